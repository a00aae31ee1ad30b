"""What ``palsgd verify`` reaches: a pinned step solved for, an untested bound never passing,
and the design box grown to ``mu <= 0.999`` and ``T <= 2^24`` (issue 33, item 3).

Each check ships with the false statement it must flag: a SlowMo-like statement pinned
without a ``recommended_step`` (false by a factor 2.2; it used to be tested on 0 of 600
designs and pass), a bound whose conditions admit no design (exit 6, not 0), and a statement
false only for ``mu > 0.99`` (the outer-momentum bound of Theorem 2 times
``min(1, 100 (1 - mu))^3``). The exact oracle is checked at ``mu = 0.999``, ``T ~ 2^24``
against an independent 60-digit evaluation.
"""

from __future__ import annotations

import json
import math

import mpmath as mp
import numpy as np
import pytest
import sympy as sp

from core import exitcodes
from palsgd.cli import main
from theory import bounds as registry
from theory import symbols as S
from theory.verify.bound_file import load_bound_file
from theory.verify.designs import T_MAX, decode, random_points, space_of
from theory.verify.oracle import evaluate, family_of, parse_design
from theory.verify.pinned import pinned_roots, pinned_step
from theory.verify.untested import UNTESTED, exit_code, untested_bounds

QUICK = ["--quick", "--problems", "quadratic", "--controls", "--no-progress", "--no-plots"]

#: SlowMo over all-reduce SGD, Theorem 1 with the squared horizon condition and slow rate <= 1
#: (slowmo_ar_sgd_corrected, worst ratio about 0.62), pinned at alpha gamma/(1 - mu) =
#: sqrt(K/T) by two conditions, without a recommended_step line; FACTOR x it is false
SLOWMO = """name: {name}
expression: {factor}*((2*F0 + L*sigma**2)/sqrt(K*T) + 4*L**2*sigma**2*(H-1)/T*((1-mu)/gamma - 1)**2 + 8*H*L**2*mu**2*sigma**2/(T*(1-mu**2)))
conditions:
  - "alpha*gamma/(1 - mu) <= sqrt(K/T)"
  - "sqrt(K/T) <= alpha*gamma/(1 - mu)"
  - "K*L**2*(sqrt(3)*Max(1, 3*H*(1-gamma-mu)/gamma, 4*H*mu/(1-mu)) + 1)**2 <= T"
  - "mu < 1"
  - "gamma <= 1"
algorithm: slowmo_ar_sgd
outer: sgd
assumptions: [A1, A2, A4, S1]
"""  # noqa: E501

NEVER_INSIDE = """name: never_inside
expression: 2*F0/(alpha*T) + L*alpha*sigma**2/K
conditions: ["alpha*L <= 0.001", "1 <= alpha*L"]
algorithm: sgd
assumptions: [A1, A2, A4]
"""


def _file(tmp_path, text: str, name: str = "b.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _run(tmp_path, path, capsys, *extra: str) -> tuple[int, dict, str]:
    out = tmp_path / f"r_{path.stem}"
    code = main(["verify", "--bound-file", str(path), *QUICK, *extra, "--out", str(out)])
    return code, json.loads((out / "results.json").read_text()), capsys.readouterr().out


# ----------------------------------------------------------------------- the pinned step
def test_the_pinned_step_is_solved_for_without_a_recommended_step(tmp_path):
    (b,) = load_bound_file(_file(tmp_path, SLOWMO.format(name="mine", factor=1)))
    assert b.recommended_step is None and pinned_step(b) and family_of(b).pinned
    (root,) = pinned_roots(b)
    want = (1 - S.mu) / S.gamma * sp.sqrt(S.K / S.T)
    assert sp.simplify(root - want) == 0
    fam = family_of(b)
    space = space_of(fam)
    x, m = random_points(space, np.random.default_rng(0), 200)
    d, ok = decode(b, space, x, m)
    rec = (1 - d["mu"]) / d["gamma"] * np.sqrt(d["K"] / d["T"])
    np.testing.assert_allclose(d["alpha"][ok], rec[ok], rtol=1e-12)
    # the same designs as the registered statement, which states its recommended step
    reg = registry.get("slowmo_ar_sgd_corrected")
    d2, ok2 = decode(reg, space_of(family_of(reg)), x, m)
    assert ok.sum() >= 10 and np.array_equal(ok, ok2)
    np.testing.assert_allclose(d["alpha"][ok], d2["alpha"][ok], rtol=1e-12)
    # a bound that is not pinned keeps its sampled step
    assert not pinned_step(registry.get("local_sgd_outer"))


def test_a_false_statement_pinned_without_recommended_step_is_flagged(tmp_path, capsys):
    """0.28 x the corrected SlowMo statement: false by a factor 0.62/0.28 = 2.2 at its step.
    Before the step was solved for it was tested on 0 of 600 designs and exited 0."""
    path = _file(tmp_path, SLOWMO.format(name="slowmo_low", factor=0.28))
    code, rep, text = _run(tmp_path, path, capsys)
    assert code == exitcodes.BOUND_VIOLATED
    (row,) = rep["exact"]
    assert row["verdict"] == "violated" and row["inside"] > 100 and row["worst_ratio"] > 1.8
    assert "BOUND VIOLATED (exact): slowmo_low" in text


def test_the_true_pinned_statement_passes_on_designs_inside(tmp_path, capsys):
    path = _file(tmp_path, SLOWMO.format(name="slowmo_file", factor=1))
    code, rep, _ = _run(tmp_path, path, capsys)
    (row,) = rep["exact"]
    assert code == 0 and row["verdict"] == "not shown false"
    assert row["inside"] > 100 and 0.3 < row["worst_ratio"] <= 1 + 1e-6


# ----------------------------------------------------------------------- untested
def test_a_bound_no_design_meets_is_untested_and_exits_6(tmp_path, capsys):
    code, rep, text = _run(tmp_path, _file(tmp_path, NEVER_INSIDE), capsys)
    assert code == exitcodes.UNTESTED == 6
    (row,) = rep["exact"]
    assert row["inside"] == 0 and row["verdict"] == UNTESTED
    assert rep["summary"]["untested"] == ["never_inside"] and rep["summary"]["exit_code"] == 6
    assert "UNTESTED: never_inside" in text and "(exit code 6)" in text
    assert "not shown false" not in text.split("negative controls")[0]


def test_untested_beside_a_tested_bound_still_exits_6_and_a_violation_takes_precedence(
    tmp_path, capsys
):
    good = NEVER_INSIDE.replace("never_inside", "good").replace(
        '["alpha*L <= 0.001", "1 <= alpha*L"]', '["alpha*L <= 1"]'
    )
    bad = good.replace("name: good", "name: bad").replace("sigma**2/K", "sigma**2/K**2")
    both = "bounds:\n" + "".join(
        "  - " + t.strip().replace("\n", "\n    ") + "\n" for t in (NEVER_INSIDE, good)
    )
    code, rep, _ = _run(tmp_path, _file(tmp_path, both, "both.yaml"), capsys)
    assert code == 6 and rep["summary"]["untested"] == ["never_inside"]
    three = both + "  - " + bad.strip().replace("\n", "\n    ") + "\n"
    code, rep, _ = _run(tmp_path, _file(tmp_path, three, "three.yaml"), capsys)
    assert code == 1 and rep["summary"]["untested"] == ["never_inside"]
    # the negative control of the check: the tested bound alone exits 0
    code, rep, _ = _run(tmp_path, _file(tmp_path, good, "good.yaml"), capsys)
    assert code == 0 and rep["summary"]["untested"] == []


def test_untested_bounds_counts_every_stage():
    exact = [{"bound": "a", "inside": 0}, {"bound": "b", "inside": 0}]
    hetero = [{"bound": "b", "inside": 3}]
    mc = [{"bound": "c", "verdict": "outside conditions"}, {"bound": "d", "verdict": "holds"}]
    got = untested_bounds(["a", "b", "c", "d"], [exact, hetero], mc)
    assert got == ["a", "c"]
    assert exit_code(0, got) == 6 and exit_code(1, got) == 1 and exit_code(0, []) == 0


# ----------------------------------------------------------------------- the box
def test_the_box_reaches_mu_near_one_and_long_horizons():
    b = registry.get("local_sgd_outer")
    space = space_of(family_of(b))
    x, m = random_points(space, np.random.default_rng(0), 2000)
    d, _ = decode(b, space, x, m)
    assert d["mu"].max() > 0.998 and d["mu"].max() <= 0.999 + 1e-12 and d["mu"].min() < 0.01
    assert 0.1 < np.mean(d["mu"] > 0.99) < 0.3  # a share near 1, not a corner
    assert d["T"].max() > 2**20 and d["T"].max() <= T_MAX == 2**24
    assert np.mean(d["T"] <= 2**17) > 0.4  # the old box keeps its share


def _truth(lam, y0, alpha, eta, p, H, R, gamma, mu) -> float:
    """(1/R) sum_{r<R} lam^2 E z_r^2 of PALSGD with one worker, no noise, outer heavy ball
    (buf <- mu buf + (z - x), z <- z - gamma buf), in 60-digit arithmetic: the coin paths'
    moments E A, E A^2 of a round, then the anchor's second moments over R rounds."""
    with mp.workdps(60):
        lam, alpha, eta, p, gamma, mu = map(mp.mpf, (lam, alpha, eta, p, gamma, mu))
        cg, cp = alpha / (1 - p), alpha * eta / p
        branches = [(1 - p, 1 - cg * lam, mp.mpf(0)), (p, 1 - cp, cp)]
        ea, ea2 = mp.mpf(1), mp.mpf(1)
        for _ in range(H):
            ea, ea2 = (
                sum(q * (s * ea + c) for q, s, c in branches),
                sum(q * (s * s * ea2 + 2 * s * c * ea + c * c) for q, s, c in branches),
            )
        d1, dd = 1 - ea, 1 - 2 * ea + ea2

        def one_round(z2, zb, b2):
            b2n = mu * mu * b2 + 2 * mu * d1 * zb + dd * z2
            zbn = mu * zb + d1 * z2
            return (z2 - 2 * gamma * zbn + gamma**2 * b2n, zbn - gamma * b2n, b2n)

        M = mp.matrix(4, 4)
        for j in range(3):
            col = one_round(*[mp.mpf(int(i == j)) for i in range(3)])
            for i in range(3):
                M[i, j] = col[i]
        M[3, 0], M[3, 3] = lam * lam, 1
        v, e = mp.matrix([mp.mpf(y0) ** 2, 0, 0, 0]), R
        while e:
            if e & 1:
                v = M * v
            e >>= 1
            if e:
                M = M * M
        return float(v[3] / R)


def test_the_oracle_keeps_its_precision_at_mu_0999_and_t_2_24():
    """At mu = 0.999, gamma = 100, T = 2^24 and alpha lam H ~ 6e-13 the round map's
    1 - E A was all rounding: the oracle gave 2.7e10 for 1.57e-3 (a false violation of
    palsgd_outer, ratio 1.2e11). The deviation form agrees with 60 digits to 1e-9."""
    b = registry.get("palsgd_outer")
    lam, F0, H = 1.9657153179761828e-05, 40.430897427755085, 75
    alpha, eta, p = 4.2638356653064172e-10, 195.30769597516536, 0.042689956202109282
    for R in (10, 223_696):
        at = (
            f"L=0.019530769597516536 lam_F={lam!r} F0={F0!r} K=1 H={H} T={H * R} p={p!r} "
            f"eta={eta!r} gamma=100 mu=0.999 heavy_ball=1 alpha={alpha!r}"
        )
        ev = evaluate(b, family_of(b), parse_design(at))
        want = _truth(lam, math.sqrt(2 * F0 / lam), alpha, eta, p, H, R, 100, 0.999)
        assert float(ev.measured[0]) == pytest.approx(want, rel=1e-9)
        assert ev.inside[0] and ev.ratio[0] < 1


def _outer_high_momentum() -> str:
    """local_sgd_outer x min(1, 100 (1 - mu))^3: the registered statement for mu <= 0.99,
    below its worst ratio (about 0.27 near mu = 1) from mu = 0.9936 on."""
    b = registry.get("local_sgd_outer")
    conds = ", ".join(f'"{c.relation}"' for c in b.conditions)
    return (
        f"name: outer_high_momentum\nexpression: ({b.expression})*Min(1, 100*(1 - mu))**3\n"
        f"conditions: [{conds}]\nalgorithm: diloco\nouter: [sgd, nesterov]\n"
        "measured: anchors\nassumptions: [A1, A2, A3, A4]\n"
    )


def test_a_statement_false_only_above_mu_099_is_flagged(tmp_path, capsys):
    path = _file(tmp_path, _outer_high_momentum())
    (mine,) = load_bound_file(path)
    ref = registry.get("local_sgd_outer")
    # identical to the registered (not shown false) statement for mu <= 0.99
    at = "L=1 lam_F=0.5 F0=1 sigma2=1 zeta2=1 K=4 H=8 T=800 gamma=0.5 heavy_ball=1 alpha=1e-4"
    for mu, same in ((0.5, True), (0.99, True), (0.995, False)):
        d = parse_design(f"{at} mu={mu}")
        a, r = evaluate(mine, family_of(mine), d), evaluate(ref, family_of(ref), d)
        assert float(a.measured[0]) == float(r.measured[0])
        assert (float(a.bound[0]) == pytest.approx(float(r.bound[0]), rel=1e-12)) is same
    code, rep, text = _run(tmp_path, path, capsys)
    assert code == exitcodes.BOUND_VIOLATED
    (row,) = rep["exact"]
    assert row["verdict"] == "violated" and row["worst_ratio"] > 1.5
    assert row["worst_design"]["mu"] > 0.99
    assert "BOUND VIOLATED (exact): outer_high_momentum" in text
