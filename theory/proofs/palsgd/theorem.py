"""The assembled Theorem 1: chain order, collected conditions, cross-checks (X1, X1s, X2).

Part of :mod:`theory.proofs.palsgd` (``docs/palsgd_proof.md``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, cached_property

import sympy as sp

from theory.bound import Condition
from theory.proofs.lemmas import (
    CheckResult,
    Domain,
    Hypothesis,
    Inequality,
    Lemma,
    SampledInequality,
    by_key,
    is_zero,
)
from theory.proofs.palsgd.chain import CORE, Chain
from theory.proofs.palsgd.descent import _descent_spot_check  # noqa: F401
from theory.proofs.palsgd.notation import (
    DOMAIN,
    F0,
    H,
    K,
    L,
    Omega,
    R,
    T,
    _u,
    alpha,
    eta,
    p,
    sigma,
    specialise_p0,
    zeta,
)
from theory.proofs.palsgd.rounds import bound_expression, sharp_expression


# ----------------------------------------------------------------------------- the theorem
@dataclass(frozen=True)
class PALSGDTheorem:
    """The assembled theorem: lemma chain, constants, conditions, bound.

    ``expression`` is the registered bound (``4 F0/(alpha T) + 4 Q/(alpha H)``, valid under
    every condition); ``sharp_expression`` is ``F0/(omega T) + Q/(omega H)``, which is never
    larger under C4 and is exact minibatch SGD at ``H = 1, p = 0``. The expression and the
    conditions are assembled from the scalar lemmas L11, L15a and L17-L20 when the object is
    built; the full chain (:attr:`lemmas`, with the vector lemmas and their branch sums) is
    built on first access.
    """

    coins: str
    local_sgd: bool
    coefficients: dict[str, sp.Expr]
    conditions: tuple[Condition, ...]
    expression: sp.Expr
    sharp_expression: sp.Expr
    recommended_step: sp.Expr
    round_constant: sp.Expr
    chain_factory: Callable[[], list[Lemma]] = field(repr=False, compare=False, default=list)
    extra_checks: tuple[Lemma, ...] = field(default=())

    @cached_property
    def lemmas(self) -> tuple[Lemma, ...]:
        """The numbered chain L1-L20s, in order."""
        return tuple(self.chain_factory())

    def lemma(self, key: str) -> Lemma:
        return by_key(self.lemmas)[key]

    def check(self) -> list[CheckResult]:
        """Check every lemma of the chain and the extra cross-checks."""
        return [lem.check() for lem in self.lemmas + self.extra_checks]


@dataclass(frozen=True)
class _Core:
    """The scalar part of the chain that the statement is assembled from."""

    co: dict[str, sp.Expr]
    lemmas: list[Lemma]
    Q: sp.Expr
    bound: sp.Expr
    sharp: sp.Expr


@cache
def _core(coins: str) -> _Core:
    chain = Chain(coins)
    co = chain.co
    # the bound is read off the last lemma (not retyped): rhs of L20 with R*H -> T,
    # displayed term by term (4 F0/(alpha T) plus 4 q/(alpha H) for each part q of Q)
    assembled = sp.sympify(chain["L20"].rhs).subs(R, T / H)  # type: ignore[attr-defined]
    display = 4 * F0 / (alpha * T) + sp.Add(*(4 * q / (alpha * H) for q in co["Q_parts"]))
    if not is_zero(assembled - bound_expression(co)) or not is_zero(display - assembled):
        raise AssertionError("L20 does not reproduce the assembled bound")  # pragma: no cover
    return _Core(co, chain.lemmas(CORE), co["Q"], display, sharp_expression(co))


def build_chain(
    coins: str = "independent", mutate: Callable[[Lemma], Lemma] | None = None
) -> tuple[list[Lemma], dict[str, sp.Expr], sp.Expr, sp.Expr, sp.Expr]:
    """All lemmas in order, the constants, the round constant Q, the bound and the sharp bound.

    ``mutate`` is applied to each lemma as it is built (see :class:`Chain`).
    """
    chain = Chain(coins, mutate)
    co = chain.co
    return chain.lemmas(), co, co["Q"], bound_expression(co), sharp_expression(co)


def _collect_conditions(chain: list[Lemma]) -> list[Hypothesis]:
    seen: dict[str, Hypothesis] = {}

    def visit(lem: Lemma) -> None:
        for part in getattr(lem, "parts", ()):
            visit(part)
        for h in getattr(lem, "hypotheses", ()):
            if h.relation is not None and h.name not in seen:
                seen[h.name] = h

    for lem in chain:
        visit(lem)
    return sorted(seen.values(), key=lambda h: h.name)


def _to_conditions(
    hyps: list[Hypothesis], fn: Callable[[sp.Expr], sp.Expr] | None
) -> tuple[Condition, ...]:
    out: list[Condition] = []
    normal_forms: list[sp.Expr] = []
    for h in hyps:
        rel = h.relation
        lhs, rhs = (rel.lhs, rel.rhs) if fn is None else (fn(rel.lhs), fn(rel.rhs))
        rel2 = sp.Le(lhs, rhs)
        if rel2 is sp.true:
            continue  # a condition that the specialisation makes vacuous (C2 at eta = 0)
        if rel2 is sp.false:
            raise ValueError(f"condition {h.name} is never satisfiable after specialisation")
        normal = lhs / rhs if rhs != 0 else None
        same = [i for i, n in enumerate(normal_forms) if fn is not None and is_zero(normal - n)]
        if normal is not None and same:
            # identical to an earlier condition after specialisation: merge the names
            idx = same[0]
            prev = out[idx]
            out[idx] = Condition(
                prev.name + "=" + h.name, prev.relation, prev.description + "; " + h.description
            )
            continue
        normal_forms.append(normal)
        out.append(Condition(h.name, sp.Le(lhs, rhs, evaluate=False), h.description))
    return tuple(out)


def _recommended_step(co: dict[str, sp.Expr]) -> sp.Expr:
    """Balance 4F0/(alpha T) against the terms linear in alpha (sigma^2/K and coin-heterogeneity)."""
    lin = 2 * L / (1 - p) * (sigma**2 / K + 4 * co["chi"] * p * zeta**2 / co["kappa"])
    return sp.sqrt(4 * F0 / (T * lin))


def _extra_checks(
    co: dict[str, sp.Expr], conds: tuple[Condition, ...], bound, sharp
) -> tuple[Lemma, ...]:
    """X1 (certificate) and X1s (the same by exact-rational sampling, a cross-check)."""
    region = tuple(c.relation for c in conds)
    ranges = {
        L: (sp.Rational(1, 10), 10),
        eta: (0, 10),
        p: (sp.Rational(1, 100), sp.Rational(99, 100)),
        H: (1, 40),
        K: (1, 16),
        alpha: (sp.Rational(1, 10**4), 1),
        F0: (0, 10),
        T: (1, 10**6),
        sigma: (0, 10),
        zeta: (0, 10),
    }
    Q = sp.sympify((bound - 4 * F0 / (alpha * T)) * alpha * H / 4)
    x1 = Inequality(
        "X1",
        "Sharp form is never larger",
        "Under C4: F0/(omega T) + Q/(omega H) <= 4F0/(alpha T) + 4Q/(alpha H).",
        "The difference is (F0/T + Q/H)(4 omega - alpha)/(alpha omega) and C4 is "
        "omega - alpha/4 >= 0 (omega written Omega > 0; Q >= 0 on the domain).",
        uses=("C4",),
        lhs=F0 / (Omega * T) + Q / (Omega * H),
        rhs=bound,
        hypotheses=(Hypothesis("C4", Omega - alpha / 4, "condition C4: omega >= alpha/4"),),
        multipliers={"C4": 4 * (F0 / T + Q / H) / (alpha * Omega)},
        domain=DOMAIN,
    )
    x1s = SampledInequality(
        "X1s",
        "Sharp form is never larger (sampled cross-check)",
        "Under C1-C4: F0/(omega T) + Q/(omega H) <= 4F0/(alpha T) + 4Q/(alpha H) (omega >= alpha/4).",
        "Sampled with exact rationals inside the conditions.",
        lhs=sharp,
        rhs=bound,
        ranges=ranges,
        region=region,
        integers=(H, K, T),
        log_scale=(alpha, L, T),
        n=600,
        min_kept=40,
        seed=1,
    )
    return (x1, x1s, _c2_redundancy(co))


def _c2_redundancy(co: dict[str, sp.Expr]) -> Lemma:
    """X2: for H >= 2, C4 implies alpha eta <= 1/sqrt(12) < 2, so C2 is never binding there."""
    g = sp.Symbol("g", nonnegative=True)  # H = 2 + g
    return Inequality(
        "X2",
        "C2 is implied by C4 when H >= 2",
        "If H >= 2 and C4 holds, then 12 alpha^2 eta^2 <= 1, hence alpha eta <= 1/sqrt(12) < 2. "
        "At H = 1 the drift lemmas that use C2 (L15a in L15-L17) are vacuous (D_0 = 0, H - 1 = 0).",
        "C4 gives 3 alpha^2 (H-1) P c' <= alpha/4 with c' >= alpha (L+eta)^2/2, P >= H >= 2, "
        "H - 1 >= 1: 3 alpha^3 eta^2 <= alpha/4.",
        uses=("C4",),
        lhs=12 * alpha**2 * eta**2,
        rhs=sp.Integer(1),
        hypotheses=(Hypothesis("C4", alpha / 4 - co["loss"], "condition C4"),),
        multipliers={"C4": 4 / alpha},
        nonneg_terms=(4 / alpha * co["loss"] - 12 * alpha**2 * eta**2,),
        domain=Domain({p: _u / (1 + _u), H: 2 + g}, "0 < p < 1, H >= 2"),
    )


@cache
def theorem(coins: str = "independent") -> PALSGDTheorem:
    """The PALSGD theorem (derived here) for independent or shared coins."""
    core = _core(coins)
    conds = _to_conditions(_collect_conditions(core.lemmas), None)
    return PALSGDTheorem(
        coins=coins,
        local_sgd=False,
        coefficients=core.co,
        conditions=conds,
        expression=core.bound,
        sharp_expression=core.sharp,
        recommended_step=_recommended_step(core.co),
        round_constant=core.Q,
        chain_factory=lambda: build_chain(coins)[0],
        extra_checks=_extra_checks(core.co, conds, core.bound, core.sharp),
    )


@cache
def local_sgd_theorem() -> PALSGDTheorem:
    """The ``p = 0`` case (Local SGD with outer averaging): every lemma specialised.

    At ``p = 0`` no pull ever happens, so ``eta`` is irrelevant and set to 0
    (:func:`specialise_p0`). Coins play no role, so the chain of the independent-coin
    theorem is used.
    """
    core = _core("independent")
    conds = _to_conditions(_collect_conditions(core.lemmas), specialise_p0)
    co0 = {
        k: (tuple(specialise_p0(x) for x in v) if isinstance(v, tuple) else specialise_p0(v))
        for k, v in core.co.items()
    }
    return PALSGDTheorem(
        coins="none",
        local_sgd=True,
        coefficients=co0,
        conditions=conds,
        expression=sp.Add(
            *(sp.factor(specialise_p0(term)) for term in sp.Add.make_args(core.bound))
        ),
        sharp_expression=specialise_p0(core.sharp),
        recommended_step=specialise_p0(_recommended_step(core.co)),
        round_constant=specialise_p0(core.Q),
        chain_factory=lambda: [lem.map(specialise_p0) for lem in build_chain("independent")[0]],
    )
