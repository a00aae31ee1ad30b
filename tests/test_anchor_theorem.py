"""Theorem 2 (theory.proofs.anchor, theory.bounds.outer): chain, composition, exact dynamics.

The exact oracle is theory.moments.exact_moments (per-eigendirection moment recursions);
the measured quantity is the anchors' mean E||grad f(z_r)||^2 over the rounds.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sympy as sp

from theory import bounds as registry
from theory import symbols as S
from theory.check import check
from theory.moments import MatrixQuadratic, exact_moments
from theory.proofs import anchor as A

NAMES = {
    "palsgd": "palsgd_outer",
    "pull_aware": "palsgd_pull_aware",
    "local_sgd": "local_sgd_outer",
}


@pytest.mark.parametrize("kind", A.KINDS)
def test_every_lemma_checks(kind):
    results = A.theorem(kind).check()
    assert results and all(r.ok for r in results), [r for r in results if not r.ok]


@pytest.mark.parametrize("kind", A.KINDS)
def test_registered_bound_is_read_off_the_chain(kind):
    th = A.theorem(kind)
    b = registry.get(NAMES[kind])
    assert sp.simplify(b.expression - th.expression) == 0
    assert [c.name for c in b.conditions] == [c.name for c in th.conditions]
    rhs = sp.sympify(th.lemma("O10").rhs)
    assert rhs.free_symbols & {sp.Symbol("X_G", nonnegative=True)}  # generic form specialised


def _users(lemmas) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for lem in lemmas:
        for part in (lem, getattr(lem, "base", None), getattr(lem, "step", None)):
            for h in getattr(part, "hypotheses", ()) if part is not None else ():
                if h.source.startswith("lemma "):
                    out.setdefault(h.source.removeprefix("lemma "), set()).add(lem.key)
    return out


def test_links_are_built_from_lemma_objects():
    users = _users(A.build_chain("pull_aware"))
    assert users == {
        "O3": {"O9"},
        "O4": {"O9"},
        "O5": {"O9"},
        "O6": {"O7"},
        "L4": {"O7"},
        "L10a": {"O7"},
        "O7": {"O8a", "O8b"},
        "O9": {"O10"},
    }


@pytest.mark.parametrize("used", ["O3", "O4", "O5", "O6", "L4", "L10a", "O7", "O9"])
def test_mutating_a_lemma_breaks_every_lemma_built_from_it(used):
    """Halve one lemma's rhs, or add zeta^2 to it: every user must then fail, or (O8a, O8b,
    whose claims are read off O7's rho and B) state a different claim."""
    plain = {lem.key: lem for lem in A.build_chain("pull_aware")}
    users = _users(plain.values())[used]
    for change in (lambda r: r / 2, lambda r: r + S.zeta**2):

        def mutate(lem, change=change):
            if lem.key != used:
                return lem
            return dataclasses.replace(lem, rhs=change(sp.sympify(lem.rhs)))

        chain = {lem.key: lem for lem in A.build_chain("pull_aware", mutate)}
        for user in users:
            moved = sp.simplify(sp.sympify(chain[user].rhs) - sp.sympify(plain[user].rhs)) != 0
            assert not chain[user].check().ok or (used == "O7" and moved), (
                f"{user} still checks with {used} mutated"
            )


def test_borrow_rejects_a_lemma_with_cross_terms():
    o4 = A.o4_anchor_step()  # rhs depends on the vectors through norms: fine
    A.borrow(o4, "x", sp.Symbol("y"), {"a": sp.Symbol("a2"), "dl": sp.Symbol("d2")})
    cross = dataclasses.replace(o4, rhs=sp.sympify(o4.lhs))  # <a, a + delta>: a cross term
    with pytest.raises(ValueError):
        A.borrow(cross, "x", sp.Symbol("y"), {"a": sp.Symbol("a2"), "dl": sp.Symbol("d2")})


def test_reductions():
    b = registry.get("local_sgd_outer").expression
    at1 = sp.simplify(b.subs({S.H: 1, S.gamma: 1, S.mu: 0}))
    sgd = registry.get("sgd").expression
    # 4 F0/(alpha T) + 4 L alpha sigma^2/K: twice the SGD bound's F0 term, four times its noise
    assert (
        sp.simplify(at1 - (4 * S.F0 / (S.alpha * S.T) + 4 * S.L * S.alpha * S.sigma**2 / S.K)) == 0
    )
    assert sp.simplify(at1 - 2 * sgd - 2 * S.L * S.alpha * S.sigma**2 / S.K) == 0
    # gamma and mu enter only through gamma/(1-mu) and L(1+mu)/(1-mu)
    g = A.pieces("palsgd")
    assert sp.simplify(g["gp"].subs(S.mu, 0) - S.gamma) == 0
    assert sp.simplify(g["Lo"].subs(S.mu, 0) - S.L) == 0


def test_pull_aware_conditions_do_not_limit_H():
    """For eta > L the absorption holds at fixed alpha whatever H is; Theorem 1's does not."""
    pa, t1 = registry.get("palsgd_pull_aware"), registry.get("palsgd")
    vals = dict(L=1.0, K=4, T=10**6, alpha=0.005, p=0.5, eta=10.0, sigma=1.0, zeta=1.0, F0=1.0)
    for H in (8, 512, 10**5):
        assert pa.conditions_hold(H=H, gamma=1.0, mu=0.0, **vals)
    assert not t1.conditions_hold(H=512, **vals)


def _measure(kind, *, H, R, alpha, p, eta, gamma, mu, outer, het, s2, x0):
    lam = np.array([1.0, 0.25])
    rng = np.random.default_rng(0)
    b = rng.normal(size=(4, 2)) * het
    b -= b.mean(axis=0)
    prob = MatrixQuadratic(A=np.diag(lam), b=b, noise=s2, x0=np.asarray(x0, float))
    spec = dict(  # Local SGD rounds with an outer optimizer: diloco (local_sgd_outer's spec)
        kind="diloco" if kind == "local_sgd" else "palsgd",
        alpha=alpha,
        H=H,
        p=p,
        eta=eta,
        outer=outer,
        gamma=gamma,
        mu=mu,
    )
    curves = exact_moments(prob, spec, T=R * H)
    anchors = [s for s in curves.round_steps if s < R * H]
    vals = dict(
        L=1.0,
        K=4,
        H=H,
        T=R * H,
        alpha=alpha,
        gamma=gamma,
        mu=mu,
        sigma=float(np.sqrt(2 * s2)),
        zeta=float(np.sqrt(np.mean(np.sum((b * lam) ** 2, axis=1)))),
        F0=0.5 * float(np.asarray(x0) @ (lam * np.asarray(x0))),
    )
    if kind != "local_sgd":
        vals.update(p=p, eta=eta)
    return float(np.mean(curves.grad_norm_sq[anchors])), vals


CASES = [
    ("pull_aware", dict(H=256, p=0.5, eta=10.0, gamma=1.0, mu=0.0, outer="sgd")),
    ("pull_aware", dict(H=32, p=0.5, eta=10.0, gamma=2.0, mu=0.0, outer="sgd")),
    ("pull_aware", dict(H=32, p=0.5, eta=10.0, gamma=0.1, mu=0.9, outer="nesterov")),
    ("pull_aware", dict(H=256, p=0.5, eta=50.0, gamma=12.5, mu=0.0, outer="sgd")),  # the map's
    ("pull_aware", dict(H=1024, p=0.5, eta=200.0, gamma=50.0, mu=0.0, outer="sgd")),  # winners
    ("palsgd", dict(H=16, p=0.3, eta=0.5, gamma=0.5, mu=0.0, outer="sgd")),
    ("palsgd", dict(H=16, p=0.3, eta=2.0, gamma=0.3, mu=0.5, outer="nesterov")),
    ("local_sgd", dict(H=16, p=0.0, eta=0.0, gamma=2.0, mu=0.0, outer="sgd")),
    ("local_sgd", dict(H=16, p=0.0, eta=0.0, gamma=0.1, mu=0.9, outer="nesterov")),
]
STARTS = [  # noise only from the optimum; heterogeneity only (sigma = 0); the F0 term
    dict(het=0.0, s2=0.5, x0=[0.0, 0.0]),
    dict(het=1.0, s2=0.0, x0=[0.0, 0.0]),
    dict(het=0.0, s2=0.0, x0=[3.0, -2.0]),
]


@pytest.mark.parametrize("kind,cfg", CASES)
def test_bound_holds_against_exact_dynamics(kind, cfg):
    bound = registry.get(NAMES[kind])
    for start in STARTS:
        for frac in (1.0, 0.3):
            probe = dict(cfg)
            _, vals = _measure(kind, R=1, alpha=1e-3, **probe, **start)
            vals.pop("alpha")
            amax = float(bound.max_step(**vals))
            assert np.isfinite(amax) and amax > 0
            alpha = frac * min(amax, 1.0)
            meas, vals = _measure(kind, R=6, alpha=alpha, **probe, **start)
            assert bound.conditions_hold(**vals)
            value = float(bound.evaluate(**vals))
            assert meas <= value, (kind, cfg, start, meas, value)


def test_check_reports_covered_outer_optimizer():
    base = dict(L=1.0, sigma=1.0, zeta=1.0, F0=1.0, T=10**5)
    for preset, alpha, name in (
        ("gptneo-8m-readme", None, "palsgd_outer"),
        ("diloco", 1e-4, "local_sgd_outer"),
    ):
        vals = dict(base) if alpha is None else {**base, "alpha": alpha}
        rep = check(vals, preset=preset)
        covered = [w for w in rep.warnings if w.code == "outer_covered"]
        assert covered and name in covered[0].message
        b = rep.bound(name)
        assert b.status == "evaluated"
        assert not any("not covered" in c for c in b.caveats)


def test_plain_averaging_is_the_default_outer_optimizer():
    vals = dict(L=1.0, sigma=1.0, zeta=1.0, F0=1.0, T=10**5, K=4, H=8, alpha=1e-3)
    rep = check(vals, bounds=["local_sgd_outer"])
    assert rep.bound("local_sgd_outer").status == "evaluated"
    assert rep.bound("local_sgd_outer").applicable is False  # averaging: not DiLoCo
    rep = check({**vals, "gamma": 0.7, "mu": 0.9})
    assert rep.bound("local_sgd_outer").applicable
