"""The PALSGD proof chain: every lemma checks, and the checks can fail.

Run: ``OMP_NUM_THREADS=1 python -m pytest -q tests/test_palsgd_proof.py``.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import replace
from pathlib import Path

import pytest
import sympy as sp

from theory import symbols as S
from theory.proofs import palsgd as P
from theory.proofs.lemmas import (
    Domain,
    Family,
    Hypothesis,
    Identity,
    Inequality,
    SampledInequality,
    expect,
    is_zero,
    manifestly_nonnegative,
    mean_zero_two_point,
    sqnorm,
    vector,
)

DOC = Path(__file__).resolve().parents[1] / "docs" / "palsgd_proof.md"

CHAINS = {
    "independent": lambda: P.theorem("independent"),
    "shared": lambda: P.theorem("shared"),
    "local_sgd": P.local_sgd_theorem,
}


def _cases():
    out = []
    for name, make in CHAINS.items():
        th = make()
        for lem in th.lemmas + th.extra_checks:
            out.append(pytest.param(name, lem.key, id=f"{name}-{lem.key}"))
    return out


@pytest.mark.parametrize(("chain", "key"), _cases())
def test_every_lemma_checks(chain, key):
    th = CHAINS[chain]()
    lem = {x.key: x for x in th.lemmas + th.extra_checks}[key]
    res = lem.check()
    assert res.ok, f"{chain} {key}: {res.detail}"
    assert res.method in {
        "identity",
        "certificate",
        "induction",
        "sampling",
        "cited",
        "certificate+identity",
    }


def test_chain_is_numbered_documented_and_states_its_method():
    th = P.theorem("shared")  # the shared chain has every key of the independent one plus L10s
    keys = [lem.key for lem in th.lemmas + th.extra_checks]
    assert len(keys) == len(set(keys))
    doc = DOC.read_text()
    for lem in th.lemmas + th.extra_checks:
        assert re.search(rf"^\| {re.escape(lem.key)}\b", doc, re.M), f"{lem.key} not in the docs"
        assert lem.how_checked
        assert lem.title and lem.statement
    assert {lem.key for lem in P.theorem().lemmas} < set(keys)


def test_conditions_are_collected_from_the_certificates():
    th = P.theorem()
    assert [c.name for c in th.conditions] == ["C1", "C2", "C3", "C4"]
    users = {}
    for lem in th.lemmas:
        for h in getattr(lem, "hypotheses", ()):
            if h.relation is not None:
                users.setdefault(h.name, []).append(lem.key)
    assert users == {"C1": ["L11"], "C2": ["L15a"], "C3": ["L17"], "C4": ["L18b"]}
    # the statement's conditions (collected from the scalar core) are those of the full chain
    full = P._to_conditions(P._collect_conditions(list(th.lemmas)), None)
    assert [(c.name, c.relation) for c in full] == [(c.name, c.relation) for c in th.conditions]


def test_bound_is_read_off_the_last_lemma():
    th = P.theorem()
    l20 = th.lemma("L20")
    assert is_zero(sp.sympify(l20.rhs).subs(S.R, S.T / S.H) - th.expression)
    # and that lemma's certificate uses the round constant of L18 (same object, not retyped)
    l18 = th.lemma("L18")
    assert is_zero(l18.rhs - sp.Symbol("Delta", real=True) - th.round_constant)


# ----------------------------------------------------------------------------- can fail
def test_identity_check_fails_on_a_wrong_identity():
    e, g = vector("e"), vector("g")
    wrong = Identity("bad", "", "", lhs=sqnorm(e + g), rhs=sqnorm(e) + sqnorm(g))
    assert not wrong.check().ok
    assert not is_zero(S.p / (1 - S.p) - S.p)


def test_oracle_variance_with_a_wrong_constant_fails():
    lem = P.Chain("independent")["L3"]
    assert lem.check().ok
    broken = replace(
        lem, rhs=lem.rhs * (1 + S.p) / (1 + S.p) + S.p * S.eta**2 * sqnorm(vector("e"))
    )
    assert not broken.check().ok


def test_shared_and_independent_coins_differ():
    """L5's independent-coin formula is false for shared coins (the coin does not average)."""
    e1, e2, g1, g2 = vector("e1"), vector("e2"), vector("g1"), vector("g2")
    n1, _ = mean_zero_two_point("xi1")
    n2, _ = mean_zero_two_point("xi2")
    indep = P.Chain("independent")["L5"]

    def sq(b, x1, x2):
        return sqnorm((P._oracle(b, e1, g1, x1) + P._oracle(b, e2, g2, x2)) / 2)

    shared_lhs = expect(sq, P._coin(), n1, n2)
    assert not is_zero(shared_lhs - indep.rhs)


def test_certificate_rejects_negative_multiplier_and_wrong_identity():
    x, y = sp.symbols("x y", nonnegative=True)
    hyp = (Hypothesis("h", x - y, "x >= y"),)
    good = Inequality("ok", "", "", lhs=2 * y, rhs=2 * x, hypotheses=hyp, multipliers={"h": 2})
    assert good.check().ok
    neg = Inequality("neg", "", "", lhs=2 * x, rhs=2 * y, hypotheses=hyp, multipliers={"h": -2})
    res = neg.check()
    assert not res.ok and "not shown >= 0" in res.detail
    off = Inequality("off", "", "", lhs=3 * y, rhs=2 * x, hypotheses=hyp, multipliers={"h": 2})
    assert not off.check().ok


def test_mutated_descent_constant_breaks_the_certificate():
    """Replacing (L + eta)^2 by L^2 in c_D must make L11 fail (the pull bias costs something)."""
    th = P.theorem()
    l11 = th.lemma("L11")
    assert l11.check().ok
    co = th.coefficients
    weaker = co["c_D"].subs((S.L + S.eta) ** 2, S.L**2)
    assert not is_zero(weaker - co["c_D"])
    mutated = replace(l11, rhs=l11.rhs - co["c_D"] * P.D + weaker * P.D)
    assert not mutated.check().ok


def test_mutated_drift_threshold_breaks_the_certificate():
    """L17 with C3 loosened to rho_D <= 1/2 but the factor 3/2 kept must fail."""
    th = P.theorem()
    l17 = th.lemma("L17")
    hyps = tuple(
        Hypothesis.condition("C3", th.coefficients["rho_D"], sp.Rational(1, 2))
        if h.name == "C3"
        else h
        for h in l17.hypotheses
    )
    assert not replace(l17, hypotheses=hyps).check().ok


def test_sampling_finds_a_counterexample():
    a, b = sp.symbols("a b", real=True)
    false = SampledInequality(
        "false",
        "",
        "",
        lhs=(a + b) ** 2,
        rhs=a**2 + b**2,
        ranges={a: (-2, 2), b: (-2, 2)},
        n=200,
        min_kept=10,
    )
    res = false.check()
    assert not res.ok and "violated" in res.detail
    true = replace(false, lhs=(a + b) ** 2, rhs=2 * a**2 + 2 * b**2)
    assert true.check().ok


def test_sampling_reports_an_empty_region():
    a = sp.Symbol("a", positive=True)
    c = sp.Symbol("c", real=True)
    lem = SampledInequality(
        "empty",
        "",
        "",
        lhs=a,
        rhs=a + 1,
        ranges={a: (1, 2), c: (1, 2)},
        region=(sp.Le(c, 0),),
        n=50,
    )
    res = lem.check()
    assert not res.ok and "inside the region" in res.detail
    always_false = replace(lem, region=(sp.Le(a, 0),))  # sympy decides this one: False
    assert not always_false.check().ok


def test_manifest_nonnegativity_is_sound_on_examples():
    x = sp.Symbol("x", real=True)
    u = sp.Symbol("u", positive=True)
    assert manifestly_nonnegative((x - 1) ** 2 + u)
    assert manifestly_nonnegative(S.p / (1 - S.p), P.DOMAIN)
    assert not manifestly_nonnegative(S.p / (1 - S.p))  # p < 1 is not known without the domain
    assert not manifestly_nonnegative(x)
    assert not manifestly_nonnegative(S.H - 2, P.DOMAIN)
    assert manifestly_nonnegative(S.H - 1, P.DOMAIN)
    assert not manifestly_nonnegative(1 - u, Domain())


def test_family_fails_if_any_part_fails():
    a = sp.Symbol("a", real=True)
    fam = Family(
        "F",
        "",
        "",
        parts=(Identity("ok", "", "", lhs=a, rhs=a), Identity("bad", "", "", lhs=a, rhs=2 * a)),
    )
    res = fam.check()
    assert not res.ok and "bad" in res.detail


def test_descent_spot_check_detects_a_too_small_constant():
    """The cited descent lemma's numerical check fails if L is underestimated."""
    import numpy as np

    rng = np.random.default_rng(0)
    w = rng.normal(size=(3, 2))
    a = np.abs(rng.normal(size=3))
    lip = float(np.sum(a * np.sum(w**2, axis=1)))
    x = rng.normal(size=(2000, 2))
    y = x + rng.normal(size=(2000, 2))

    def f(z):
        return np.cos(z @ w.T) @ a

    def grad(z):
        return -(np.sin(z @ w.T) * a) @ w

    def excess(L):
        return np.max(f(y) - f(x) - np.sum(grad(x) * (y - x), 1) - L / 2 * np.sum((y - x) ** 2, 1))

    assert excess(lip) <= 1e-12
    assert excess(lip / 20) > 0
    assert P._descent_spot_check()[0]


def test_local_sgd_chain_is_the_specialised_chain():
    full, local = P.theorem(), P.local_sgd_theorem()
    assert [lem.key for lem in full.lemmas] == [lem.key for lem in local.lemmas]
    for lem in local.lemmas:
        for attr in ("lhs", "rhs"):
            val = getattr(lem, attr, None)
            if val is not None and not isinstance(val, sp.MatrixBase):
                assert not ({S.p, S.eta} & sp.sympify(val).free_symbols), lem.key


def _users(lemmas) -> dict[str, set[str]]:
    """Which lemmas take a hypothesis built from which lemma object (``source = lemma K``)."""
    out: dict[str, set[str]] = {}
    for lem in lemmas:
        parts = [lem, getattr(lem, "base", None), getattr(lem, "step", None)]
        parts += [*getattr(lem, "extra", ()), *getattr(lem, "parts", ())]
        for part in parts:
            for h in getattr(part, "hypotheses", ()) if part is not None else ():
                if h.source.startswith("lemma "):
                    out.setdefault(h.source.removeprefix("lemma "), set()).add(lem.key)
    return out


USED = sorted(_users(P.Chain("shared").lemmas()) | _users(P.Chain("independent").lemmas()))


def _mutations(key):
    """Two mutations of lemma ``key``'s constants: its rhs halved, its rhs plus sigma^2."""
    return (
        lambda lem: (
            dataclasses.replace(lem, rhs=sp.sympify(lem.rhs) / 2) if lem.key == key else lem
        ),
        lambda lem: (
            dataclasses.replace(lem, rhs=sp.sympify(lem.rhs) + S.sigma**2)
            if lem.key == key
            else lem
        ),
    )


def test_every_link_is_built_from_a_lemma_object():
    """The links of the chain (hypotheses built from lemma objects), as the docs list them."""
    users = _users(P.Chain("independent").lemmas())
    assert users["L4"] == {"L5c", "L15"}
    assert users["L15"] == {"L16"} and users["L16"] == {"L17"}
    assert users["L10"] == {"L17", "L18"} and users["L11"] == {"L18"}
    assert {"L10a", "L14", "L5c", "L9", "L17", "L18", "L18b"} <= set(users)


@pytest.mark.parametrize("used", USED)
def test_mutating_a_lemma_breaks_every_lemma_built_from_it(used):
    """Change one lemma's constants: every lemma that builds a hypothesis from it must fail."""
    for coins in ("independent", "shared"):
        users = _users(P.Chain(coins).lemmas()).get(used, set())
        for mutate in _mutations(used):
            chain = P.Chain(coins, mutate)
            for user in users:
                res = chain[user].check()
                assert not res.ok, f"{coins}: {user} still checks with {used} mutated"


def test_x1_is_a_certificate_and_x2_makes_c2_redundant_for_h_ge_2():
    th = P.theorem("independent")
    keys = {x.key: x for x in th.extra_checks}
    assert keys["X1"].method == "certificate" and keys["X1"].check().ok
    assert keys["X2"].check().ok


def test_final_partial_round_is_certified_and_needs_a_shorter_round():
    """L21 (T = R H + H') checks; L21b is false without H' <= H, and the checker says so."""
    from theory.proofs.palsgd import partial

    chain = P.Chain("independent")
    for key in ("L21a", "L21b", "L21"):
        assert chain[key].check().ok, key
    l21b = chain["L21b"]
    longer = Domain({S.p: partial._u / (1 + partial._u), S.H: 1 + partial._hp}, "H' free")
    longer = Domain({**longer.substitutions, partial.Hp: 1 + partial._hp + partial._j})
    assert not replace(l21b, domain=longer).check().ok  # H' = H + j: Q(H') > H' Q/H
    # a partial round with the full-round constant Q(H) in place of H' Q/H is not the claim
    l21 = chain["L21"]
    wrong = replace(l21.parts[0], rhs=l21.parts[0].rhs + 4 * P.coefficients()["Q"] / S.alpha)
    res = wrong.check()
    assert not res.ok and "certificate identity fails" in res.detail, res.detail


def test_induction_checks_its_structure():
    """An Induction fails if its base or step proves another claim or assumes more."""
    l14 = P.Chain("independent")["L14"]
    assert l14.check().ok and l14.method == "induction"
    assert not replace(l14, rhs=2 * l14.rhs).check().ok  # base/step no longer the claim
    assert not replace(l14, start=0).check().ok
    step = l14.step
    no_ih = replace(step, hypotheses=tuple(h for h in step.hypotheses if h.name != "IH"))
    assert "IH" in replace(l14, step=no_ih).check().detail
    strong = tuple(
        replace(h, slack=h.slack + S.sigma**2) if h.name == "IH" else h for h in step.hypotheses
    )
    assert not replace(l14, step=replace(step, hypotheses=strong)).check().ok
    later = replace(step, domain=Domain({l14.var: 2 + sp.Symbol("j", nonnegative=True)}))
    assert "cover" in replace(l14, step=later).check().detail  # steps from t >= 2 only
    adv = {k: v for k, v in l14.advance.items() if k != l14.var}
    assert not replace(l14, advance={**adv, l14.var: l14.var + 2}).check().ok


def test_round_drift_induction_rejects_a_smaller_weight():
    """L16 for every H with P = H (the coin part 4p/(1-p) of the Lam weight dropped), or
    with the noise weight H (H-1) replaced by (H-1)^2, must not certify."""
    from theory.proofs.palsgd import drift

    chain = P.Chain("independent")
    co, l15 = chain.co, chain["L15"]
    assert drift.l16_round_drift(co, l15).check().ok
    res = drift.l16_round_drift({**co, "P": S.H}, l15).check()
    assert not res.ok and "certificate identity fails" in res.detail, res.detail
    weak = drift.l16_round_drift(co, l15)
    noise = S.alpha**2 * S.sigma**2 / (1 - S.p)
    smaller = sp.sympify(weak.rhs) - noise * S.H * (S.H - 1) + noise * (S.H - 1) ** 2
    step = replace(weak.step, rhs=smaller.xreplace(dict(weak.advance)))
    ih = tuple(
        replace(h, slack=smaller - P.SD) if h.name == "IH" else h for h in weak.step.hypotheses
    )
    base = replace(weak.base, rhs=smaller.xreplace({S.H: 1}).xreplace(dict(weak.base_subs)))
    wrong = replace(weak, rhs=smaller, step=replace(step, hypotheses=ih), base=base)
    res = wrong.check()
    assert not res.ok and "certificate identity fails" in res.detail, res.detail
