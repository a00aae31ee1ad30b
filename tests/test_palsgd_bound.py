"""The registered PALSGD bounds: statement, reductions, comparisons, sanity, simulation.

Run: ``OMP_NUM_THREADS=1 python -m pytest -q tests/test_palsgd_bound.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from core.validation import ParameterError
from theory import symbols as S
from theory.bounds import get, names
from theory.proofs import palsgd as P
from theory.proofs.lemmas import is_zero, manifestly_nonnegative

DOC = Path(__file__).resolve().parents[1] / "docs" / "palsgd_proof.md"
LOCALS = {s.name: s for s in S.ALL}


def _documented() -> dict[str, object]:
    """The ``key: expression`` lines of the ```sympy block in docs/palsgd_proof.md."""
    text = DOC.read_text()
    block = re.search(r"```sympy\n(.*?)```", text, re.S)
    assert block, "no ```sympy block in the proof document"
    out = {}
    for line in block.group(1).strip().splitlines():
        key, expr = line.split(":", 1)
        out[key.strip()] = expr.strip()
    return out


def _parse(text: str, cprime: sp.Expr | None = None):
    loc = dict(LOCALS)
    if cprime is not None:
        loc["cprime"] = cprime
    return sp.sympify(text, locals=loc)


DOCS = _documented()


def _same(a, b) -> bool:
    return is_zero(sp.sympify(a) - sp.sympify(b))


def _same_relation(a, b) -> bool:
    """``a`` and ``b`` are ``lhs <= rhs`` relations with proportional margins (positive factor)."""
    ratio = sp.cancel((a.rhs - a.lhs) / (b.rhs - b.lhs))
    return manifestly_nonnegative(ratio, P.DOMAIN) and _same(a.lhs / a.rhs, b.lhs / b.rhs)


# ----------------------------------------------------------------------------- statement
@pytest.mark.parametrize("name", ["palsgd", "palsgd_shared_coins"])
def test_assembled_bound_equals_documented_statement(name):
    b = get(name)
    cprime = _parse(DOCS[f"{name}.cprime"])
    assert _same(
        cprime, P.theorem("independent" if name == "palsgd" else "shared").coefficients["c_prime"]
    )
    assert _same(b.expression, _parse(DOCS[f"{name}.bound"], cprime))
    conds = {c.name: c.relation for c in b.conditions}
    assert sorted(conds) == ["C1", "C2", "C3", "C4"]
    for key in ("C1", "C2", "C3", "C4"):
        doc_key = f"{name}.{key}" if f"{name}.{key}" in DOCS else f"palsgd.{key}"
        assert _same_relation(conds[key], _parse(DOCS[doc_key], cprime)), key


def test_local_sgd_ours_equals_documented_statement():
    b = get("local_sgd_ours")
    assert _same(b.expression, _parse(DOCS["local_sgd_ours.bound"]))
    assert len(b.conditions) == 2
    assert _same_relation(b.conditions[0].relation, _parse(DOCS["local_sgd_ours.C1"]))
    assert _same_relation(b.conditions[1].relation, _parse(DOCS["local_sgd_ours.C3"]))
    assert _same(b.recommended_step, _parse(DOCS["local_sgd_ours.step"]))


def test_registry_entries_are_the_theorem_objects_and_say_derived_here():
    assert {"palsgd", "palsgd_shared_coins", "local_sgd_ours"} <= set(names())
    assert get("palsgd").expression == P.theorem("independent").expression
    assert get("palsgd_shared_coins").expression == P.theorem("shared").expression
    assert get("local_sgd_ours").expression == P.local_sgd_theorem().expression
    for n in ("palsgd", "palsgd_shared_coins", "local_sgd_ours"):
        b = get(n)
        assert b.derived_here and b.provenance.startswith("derived here")
        assert "not available" in b.provenance


def test_rate_matches_documented_terms():
    b = get("palsgd")
    assert _same(b.recommended_step**2, _parse(DOCS["palsgd.step"]) ** 2)  # both positive
    rate = b.rate()
    assert [r.t_exponent for r in rate] == [sp.Rational(-1, 2), -1, sp.Rational(-3, 2)]
    vals = {
        S.F0: 3,
        S.L: 2,
        S.sigma: sp.Rational(3, 2),
        S.zeta: sp.Rational(1, 2),
        S.K: 5,
        S.p: sp.Rational(1, 5),
        S.H: 7,
        S.eta: sp.Rational(7, 10),
    }
    lead = _parse(DOCS["palsgd.rate_T^-1/2"])
    second = _parse(DOCS["palsgd.rate_T^-1"])
    assert sp.N(rate[0].coefficient.subs(vals) - lead.subs(vals), 30) == 0
    assert _same(rate[1].coefficient, second)


# ----------------------------------------------------------------------------- reductions
def test_p0_specialisation_of_palsgd_is_local_sgd_ours():
    pal, loc = get("palsgd"), get("local_sgd_ours")
    assert _same(P.specialise_p0(pal.expression), loc.expression)
    spec = [P.specialise_p0(c.relation) for c in pal.conditions]
    spec = [r for r in spec if r is not sp.true]  # C2 (alpha*eta <= 2) is vacuous at eta = 0
    assert len(spec) == 3 and len(loc.conditions) == 2
    for r in spec:
        assert any(_same_relation(r, c.relation) for c in loc.conditions), r
    assert _same(P.specialise_p0(pal.recommended_step), loc.recommended_step)


def test_specialisation_order_matters():
    """Substituting p = 0 before eta = 0 hits the undefined pull variance eta^2 (1-p)/p."""
    c = P.coefficients()["c_D"]
    assert c.subs(S.p, 0).subs(S.eta, 0).has(sp.nan) or c.subs(S.p, 0).has(sp.zoo)
    assert _same(P.specialise_p0(c), S.alpha * S.L**2 / 2)


def test_local_sgd_ours_at_H1_is_exactly_twice_sgd_and_sharp_form_is_sgd():
    loc, sgd = get("local_sgd_ours"), get("sgd")
    assert _same(loc.expression.subs(S.H, 1), 2 * sgd.expression)
    conds = [sp.Le(c.relation.lhs.subs(S.H, 1), c.relation.rhs) for c in loc.conditions]
    conds = [c for c in conds if c is not sp.true]
    assert len(conds) == 1 and _same_relation(conds[0], sgd.conditions[0].relation)
    sharp = P.local_sgd_theorem().sharp_expression.subs(S.H, 1)
    assert _same(sharp, sgd.expression)


def test_one_worker_shared_and_independent_coincide():
    a = get("palsgd").expression.subs({S.K: 1, S.zeta: 0})
    b = get("palsgd_shared_coins").expression.subs({S.K: 1, S.zeta: 0})
    assert _same(a, b)


# ----------------------------------------------------------------------------- comparisons
def _published(name):
    if name not in names():
        pytest.skip(f"published bound {name!r} is not registered (theory/bounds/local_sgd.py)")
    return get(name)


def test_comparison_with_wang_joshi_theorem_2():
    """Documented: ours = Thm 2 + alpha^2 L^2 sigma^2 (H-1); our step range is larger."""
    wj, ours = _published("local_sgd_noniid"), get("local_sgd_ours")
    diff = ours.expression - wj.expression
    assert _same(diff, S.alpha**2 * S.L**2 * S.sigma**2 * (S.H - 1))
    assert manifestly_nonnegative(diff, P.DOMAIN)
    rng = np.random.default_rng(3)
    vals = dict(
        L=rng.uniform(0.1, 10, 4000),
        H=rng.integers(1, 200, 4000),
        alpha=10 ** rng.uniform(-5, 0, 4000),
    )
    wj_ok = wj.conditions_hold(**vals)
    ours_ok = ours.conditions_hold(**vals)
    assert np.all(ours_ok[wj_ok])  # where Wang-Joshi's conditions hold, ours hold
    assert np.any(ours_ok & ~wj_ok)  # and ours hold on a strictly larger range


def test_comparison_with_wang_joshi_corollary_2():
    """Documented: at zeta = 0, ours = 2 x Cor. 2 + alpha^2 L^2 sigma^2 (H-1)."""
    wj, ours = _published("local_sgd_iid"), get("local_sgd_ours")
    diff = ours.expression.subs(S.zeta, 0) - 2 * wj.expression
    assert _same(diff, S.alpha**2 * S.L**2 * S.sigma**2 * (S.H - 1))


def test_max_H_orders_match_table_1():
    """Largest H for linear speed-up: T^(1/2) K^(-3/2) (iid) and T^(1/4) K^(-3/4) (zeta > 0)."""
    b = get("local_sgd_ours")
    base = dict(L=1.0, sigma=1.0, F0=1.0, K=2)
    T = np.array([1e10, 16e10])
    iid = b.max_H(T=T, zeta=0.0, **base)["speedup"]
    het = b.max_H(T=T, zeta=1.0, **base)["speedup"]
    assert iid[1] / iid[0] == pytest.approx(4.0, rel=0.01)
    assert het[1] / het[0] == pytest.approx(2.0, rel=0.01)
    # closed form of the docs (i.i.d.): H - 1 <= (2 sqrt 2/3) sigma^3 sqrt(T)/(K^1.5 sqrt(F0 L))
    closed = 1 + np.floor(2 * np.sqrt(2) / 3 * np.sqrt(T) / 2**1.5)
    np.testing.assert_allclose(iid, closed)


def test_palsgd_max_H_matches_documented_formula_at_large_T():
    """Docs, section 4 (T^-3/2 term negligible at large T):
    (H-1)(sigma^2 + 8 p zeta^2 + 2 (1-p) H zeta^2)
        <= (2 sqrt 2/3) L^1.5 S^1.5 sqrt(T)/((L + eta)^2 K^1.5 sqrt(F0 (1-p))), S = sigma^2 + 4 p zeta^2."""
    b = get("palsgd")
    v = dict(L=2.0, sigma=1.5, zeta=0.7, F0=3.0, K=4, p=0.25, eta=0.8, T=1e9)
    got = float(b.max_H(**v)["speedup"])
    Sg = v["sigma"] ** 2 + 4 * v["p"] * v["zeta"] ** 2
    rhs = (
        2
        * np.sqrt(2)
        / 3
        * v["L"] ** 1.5
        * Sg**1.5
        * np.sqrt(v["T"])
        / ((v["L"] + v["eta"]) ** 2 * v["K"] ** 1.5 * np.sqrt(v["F0"] * (1 - v["p"])))
    )
    Hs = np.arange(1, 10**5)
    lhs = (Hs - 1) * (
        v["sigma"] ** 2 + 8 * v["p"] * v["zeta"] ** 2 + 2 * (1 - v["p"]) * Hs * v["zeta"] ** 2
    )
    closed = int(Hs[lhs <= rhs].max())
    assert abs(got - closed) <= 1


# ----------------------------------------------------------------------------- sanity
_params = st.fixed_dictionaries(
    {
        "L": st.floats(0.1, 10),
        "sigma": st.floats(0.0, 5),
        "zeta": st.floats(0.0, 5),
        "F0": st.floats(0.0, 10),
        "K": st.integers(1, 64),
        "H": st.integers(1, 64),
        "T": st.integers(1, 10**7),
        "p": st.floats(0.01, 0.95),
        "eta": st.floats(0.0, 5),
        "alpha": st.floats(1e-6, 1.0),
    }
)


@pytest.mark.parametrize("name", ["palsgd", "palsgd_shared_coins", "local_sgd_ours"])
@settings(max_examples=40, deadline=None)
@given(v=_params, factor=st.floats(1.01, 10))
def test_bound_monotone_in_constants_and_decreasing_in_T(name, v, factor):
    b = get(name)
    base = float(b.evaluate(**v))
    for key in ("sigma", "L", "F0", "zeta"):
        assert float(b.evaluate(**{**v, key: v[key] * factor})) >= base * (1 - 1e-12)
    assert float(b.evaluate(**{**v, "T": v["T"] * 2})) <= base * (1 + 1e-12)


@pytest.mark.parametrize("name", ["palsgd", "palsgd_shared_coins", "local_sgd_ours"])
@settings(max_examples=40, deadline=None)
@given(v=_params, shrink=st.floats(0.01, 0.99))
def test_conditions_monotone_in_alpha(name, v, shrink):
    b = get(name)
    if bool(b.conditions_hold(**v)):
        assert bool(b.conditions_hold(**{**v, "alpha": v["alpha"] * shrink}))
    else:
        assert not bool(b.conditions_hold(**{**v, "alpha": v["alpha"] / shrink}))


def test_invalid_parameters_rejected_and_p0_reported_as_failing():
    b = get("palsgd")
    v = dict(L=1.0, sigma=1.0, zeta=0.5, F0=1.0, K=4, H=8, T=1000, p=0.2, eta=0.5, alpha=0.01)
    with pytest.raises(ParameterError, match="'p'"):
        b.evaluate(**{**v, "p": 1.0})
    with pytest.raises(ParameterError, match="'K'"):
        b.evaluate(**{**v, "K": 0})
    with pytest.raises(ParameterError, match="'H'"):
        b.evaluate(**{**v, "H": 2.5})
    assert bool(b.conditions_hold(**v))
    assert not bool(b.conditions_hold(**{**v, "p": 0.0, "eta": 0.0}))  # use local_sgd_ours at p = 0


def test_bound_is_smallest_without_pull():
    """eta only enters as a penalty: the bound increases in eta."""
    b = get("palsgd")
    v = dict(L=1.0, sigma=1.0, zeta=0.5, F0=1.0, K=4, H=8, T=10**5, p=0.3, alpha=0.003)
    vals = b.evaluate(eta=np.array([0.0, 0.1, 1.0, 3.0]), **v)
    assert np.all(np.diff(vals) > 0)


# ----------------------------------------------------------------------------- simulation
X0 = 3.0  # starting point, away from every stationary point of the test functions


def _simulate(p, eta, H, R, alpha, sigma, centers, curv, wiggle, reps, shared, seed):
    """Measured (1/T) sum_t E|f'(xbar_t)|^2 of PALSGD on scalar f_k(x) = curv x^2/2 + wiggle cos x - c_k x."""
    rng = np.random.default_rng(seed)
    c = np.asarray(centers, float)
    K = c.size
    z = np.full(reps, X0)
    acc = np.zeros(reps)
    for _ in range(R):
        x = np.repeat(z[:, None], K, axis=1)
        for _ in range(H):
            xbar = x.mean(1)
            acc += (curv * xbar - wiggle * np.sin(xbar) - c.mean()) ** 2
            u = rng.random((reps, 1) if shared else (reps, K))
            pull = np.broadcast_to(u < p, x.shape)
            g = curv * x - wiggle * np.sin(x) - c + sigma * rng.standard_normal((reps, K))
            x = np.where(pull, x - alpha * eta / p * (x - z[:, None]), x - alpha / (1 - p) * g)
        z = x.mean(1)
    per_rep = acc / (R * H)
    return per_rep.mean(), per_rep.std(ddof=1) / np.sqrt(reps)


@pytest.mark.parametrize(
    ("p", "eta", "H", "sigma", "wiggle", "centers", "shared"),
    [
        (0.2, 1.0, 4, 1.0, 0.0, (1.0, -1.0), False),  # heterogeneous quadratic
        (0.5, 3.0, 2, 2.0, 0.0, (2.0, -2.0), False),  # strong pull
        (
            0.3,
            1.0,
            4,
            1.0,
            1.5,
            (1.0, -1.0),
            False,
        ),  # nonconvex (curvature 1 - 1.5 cos x < 0 near 0)
        (0.3, 1.0, 4, 1.0, 1.5, (1.0, -1.0), True),  # shared coins
        (0.1, 0.5, 8, 0.5, 0.0, (0.0, 0.0), False),  # i.i.d.
    ],
)
def test_bound_not_violated_on_small_simulation(p, eta, H, sigma, wiggle, centers, shared):
    curv = 1.0
    L = curv + wiggle  # |f_k''| = |curv - wiggle cos x| <= curv + wiggle
    zeta = float(np.sqrt(np.mean((np.asarray(centers) - np.mean(centers)) ** 2)))
    xs = np.linspace(-10, 10, 200001)
    f = curv * xs**2 / 2 + wiggle * np.cos(xs) - np.mean(centers) * xs
    F0 = float(curv * X0**2 / 2 + wiggle * np.cos(X0) - np.mean(centers) * X0 - f.min())
    R = 12
    b = get("palsgd_shared_coins" if shared else "palsgd")
    v = dict(L=L, sigma=sigma, zeta=zeta, F0=F0, K=len(centers), H=H, T=H * R, p=p, eta=eta)
    alpha = float(b.max_step(**v))  # the largest step the theorem allows: the hardest case
    assert bool(b.conditions_hold(alpha=alpha, **v))
    bound = float(b.evaluate(alpha=alpha, **v))
    mean, se = _simulate(p, eta, H, R, alpha, sigma, centers, curv, wiggle, 4000, shared, seed=11)
    assert mean + 4 * se <= bound, f"measured {mean:.4g} +- {se:.2g} exceeds bound {bound:.4g}"
    assert mean > 0.01 * bound  # the check is not vacuous: the bound is within two decades
