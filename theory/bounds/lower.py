"""Lower bounds: what no valid upper bound may go below. Kept apart from the upper bounds.

A lower bound is a :class:`LowerBound` (``kind = "lower"``), registered with
:func:`register_lower` in a registry of its own: :func:`theory.bounds.all_bounds`,
:func:`theory.bounds.names` and :func:`theory.bounds.get` never return one, so nothing that
iterates the registry (``palsgd check``, ``palsgd verify``) can treat it as an upper bound.
Upper bounds have no ``kind`` field; read ``getattr(bound, "kind", "upper")``.

``local_sgd_quadratic_lower`` (derived here). Instance: ``f_k(x) = (L/2)||x||^2`` on every
worker (``zeta = 0``), additive noise of variance ``sigma^2``, ``F0 = (L/2)||x_0||^2``. It
satisfies A1-A4 of every Local SGD and minibatch-SGD bound. On it the workers' average
follows minibatch SGD exactly for every ``H`` (gradients are affine and share one Hessian:
``xbar <- (1 - alpha L) xbar - alpha xibar``, ``Var xibar = sigma^2/K``; the mechanism of
Woodworth et al., ICML 2020), so with ``r = (1 - alpha L)^2``

    (1/T) sum_{t<T} E||grad f(xbar_t)||^2
        = 2 L F0 (1 - r^T)/(T (1 - r)) + (L^2 alpha^2 sigma^2/(K (1 - r))) (1 - (1 - r^T)/(T (1 - r)))

exactly. It is a lower bound on the worst case over the assumption class at the same
``(alpha, K, T, L, sigma, F0)`` and any ``H``: an upper bound for Local SGD or minibatch SGD
that is smaller somewhere inside its conditions is false there.

``local_sgd_heterogeneity_lower`` (derived here, :mod:`theory.bounds.lower_hetero`): the
exact value on two-curvature piecewise-quadratic instances, which depends on ``H`` and
``zeta``; an :class:`~theory.bounds.lower_hetero.InstanceLowerBound`.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from theory import symbols as S
from theory.assumptions import A1_SMOOTH, A2_NOISE, A3_IID, A4_LOWER_BOUND, INNER_SGD
from theory.bound import Bound, Condition
from theory.bounds.lower_hetero import LOCAL_SGD_HETEROGENEITY_LOWER, InstanceLowerBound
from theory.validation import UserInputError, check_choice

__all__ = [
    "LowerBound",
    "LOCAL_SGD_QUADRATIC_LOWER",
    "register_lower",
    "get_lower",
    "lower_bounds",
    "quadratic_lower_expression",
]


@dataclass(frozen=True, eq=False)
class LowerBound(Bound):
    """A lower bound on the worst case of ``(1/T) sum_t E||grad f(xbar_t)||^2`` over the
    assumption class: a valid upper bound is never below it inside its own conditions."""

    kind: str = "lower"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kind != "lower":
            raise UserInputError(f"lower bound {self.name!r}: kind must be 'lower'")


_LOWER: dict[str, LowerBound] = {}


def register_lower(bound: LowerBound | InstanceLowerBound) -> LowerBound | InstanceLowerBound:
    """Add ``bound`` to the lower-bound registry (never to the upper-bound one)."""
    if not isinstance(bound, LowerBound | InstanceLowerBound):
        raise TypeError("register_lower() takes a LowerBound or an InstanceLowerBound")
    if bound.name in _LOWER and _LOWER[bound.name] is not bound:
        raise UserInputError(f"a lower bound named {bound.name!r} is already registered")
    _LOWER[bound.name] = bound
    return bound


def get_lower(name: str) -> LowerBound | InstanceLowerBound:
    """The registered lower bound called ``name``."""
    return _LOWER[check_choice("lower bound", name, sorted(_LOWER))]


def lower_bounds() -> list[LowerBound | InstanceLowerBound]:
    """Every registered lower bound (sorted by name)."""
    return [_LOWER[n] for n in sorted(_LOWER)]


def quadratic_lower_expression() -> sp.Expr:
    """The exact average gradient norm of Local SGD / minibatch SGD on the isotropic quadratic."""
    a, L, sig, K, T, F0 = S.alpha, S.L, S.sigma, S.K, S.T, S.F0
    r = (1 - a * L) ** 2
    avg = (1 - r**T) / (T * (1 - r))  # (1/T) sum_{t<T} r^t
    return 2 * L * F0 * avg + L**2 * a**2 * sig**2 / (K * (1 - r)) * (1 - avg)


LOCAL_SGD_QUADRATIC_LOWER = register_lower(
    LowerBound(
        name="local_sgd_quadratic_lower",
        title="Local SGD / minibatch SGD: exact value on the isotropic quadratic (lower bound)",
        expression=quadratic_lower_expression(),
        conditions=(Condition("stable", sp.Lt(S.alpha * S.L, 2), "alpha L < 2 (r < 1)"),),
        assumptions=(A1_SMOOTH, A2_NOISE, A3_IID, A4_LOWER_BOUND, INNER_SGD),
        provenance=(
            "derived here: exact second moment of minibatch SGD on f_k = (L/2)||x||^2 "
            "(theory.bounds.lower); Local SGD's average equals it for every H "
            "(Woodworth et al., ICML 2020, quadratic case)"
        ),
        derived_here=True,
        algorithms=("sgd", "local_sgd"),
        notes=(
            "A lower bound (kind = 'lower'): no valid Local SGD or minibatch-SGD upper bound "
            "at the same (alpha, K, T, L, sigma, F0) may be smaller inside its conditions. It "
            "does not depend on H or zeta; local_sgd_heterogeneity_lower does, on "
            "non-quadratic instances (the published one, Woodworth, Patel, Srebro, NeurIPS "
            "2020, could not be read here)."
        ),
    )
)

register_lower(LOCAL_SGD_HETEROGENEITY_LOWER)
