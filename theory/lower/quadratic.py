"""The quadratic lower bound (derived here): Local SGD / minibatch SGD on ``(L/2)||x||^2``.

Instance: ``f_k(x) = (L/2)||x||^2`` on every worker (``zeta = 0``), additive noise of variance
``sigma^2``, ``F0 = (L/2)||x_0||^2``. It satisfies A1-A4 of every Local SGD and
minibatch-SGD bound. On it the workers' average follows minibatch SGD exactly for every
``H`` (gradients are affine and share one Hessian: ``xbar <- (1 - alpha L) xbar - alpha
xibar``, ``Var xibar = sigma^2/K``; the mechanism of Woodworth et al., ICML 2020), so with
``r = (1 - alpha L)^2``

    (1/T) sum_{t<T} E||grad f(xbar_t)||^2
        = 2 L F0 (1 - r^T)/(T (1 - r)) + (L^2 alpha^2 sigma^2/(K (1 - r))) (1 - (1 - r^T)/(T (1 - r)))

exactly, for every step but ``alpha L = 2`` (``r = 1``, where it is the limit and the
form reads 0/0). It is a lower bound on the worst case over the assumption class at the same
``(alpha, K, T, L, sigma, F0)`` and any ``H``: an upper bound for Local SGD or minibatch SGD
that is smaller somewhere inside its conditions is false there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import UserInputError
from theory.validation import validate

__all__ = [
    "ClosedFormLowerBound",
    "LOCAL_SGD_QUADRATIC_LOWER",
    "QUADRATIC_LOWER_TERMS",
    "quadratic_lower",
]


def quadratic_lower(alpha: Any, L: Any, sigma: Any, K: Any, T: Any, F0: Any) -> Any:
    """The exact average gradient norm on the isotropic quadratic (module docstring).

    Written with arithmetic only, so it takes numbers, numpy arrays or sympy symbols.
    """
    r = (1 - alpha * L) ** 2
    avg = (1 - r**T) / (T * (1 - r))  # (1/T) sum_{t<T} r^t
    return 2 * L * F0 * avg + L**2 * alpha**2 * sigma**2 / (K * (1 - r)) * (1 - avg)


def _transient(alpha: Any, L: Any, T: Any) -> Any:
    """``(1/T) sum_{t<T} r^t`` with ``r = (1 - alpha L)^2``."""
    r = (1 - alpha * L) ** 2
    return (1 - r**T) / (T * (1 - r))


#: the additive terms of :func:`quadratic_lower` (their sum), each ``(text, formula)``:
#: the initial gap's transient, the noise floor, and the noise's transient (negative)
QUADRATIC_LOWER_TERMS: tuple[tuple[str, Callable[..., Any]], ...] = (
    (
        "2 L F0 (1 - r^T)/(T (1 - r))",
        lambda alpha, L, sigma, K, T, F0: 2 * L * F0 * _transient(alpha, L, T),
    ),
    (
        "L^2 alpha^2 sigma^2/(K (1 - r))",
        lambda alpha, L, sigma, K, T, F0: (
            L**2 * alpha**2 * sigma**2 / (K * (1 - (1 - alpha * L) ** 2))
        ),
    ),
    (
        "-L^2 alpha^2 sigma^2 (1 - r^T)/(K T (1 - r)^2)",
        lambda alpha, L, sigma, K, T, F0: (
            -(L**2)
            * alpha**2
            * sigma**2
            / (K * (1 - (1 - alpha * L) ** 2))
            * _transient(alpha, L, T)
        ),
    ),
)


@dataclass(frozen=True, eq=False)
class ClosedFormLowerBound:
    """A lower bound given by a closed form ``formula(**parameters)``.

    ``kind = "lower"``: a valid upper bound is never below it inside its own conditions.
    ``evaluate`` takes numbers or arrays; :meth:`expression` is the sympy form. ``terms``:
    the formula's additive terms ``(text, formula)`` (their sum is ``formula``), for
    :meth:`term_values`; ``attained_on``: the family of instances its value is attained on
    (``"quadratic"``: the isotropic quadratic), which the verifier evaluates exactly.
    """

    name: str
    title: str
    provenance: str
    algorithms: tuple[str, ...]
    parameters: tuple[str, ...]
    formula: Callable[..., Any]
    derived_here: bool = True
    notes: str = ""
    terms: tuple[tuple[str, Callable[..., Any]], ...] = ()
    attained_on: str = ""
    kind: str = "lower"

    def _inputs(self, values: dict[str, Any]) -> dict[str, np.ndarray]:
        missing = sorted(set(self.parameters) - set(values))
        if missing:
            raise UserInputError(f"{self.name}: missing parameter(s) {missing}")
        vals = validate({k: values[k] for k in self.parameters})
        return {k: np.asarray(v, dtype=float) for k, v in vals.items()}

    def evaluate(self, **values: Any) -> np.ndarray:
        """The closed form at ``values`` (it grows without limit when ``alpha L > 2``)."""
        v = self._inputs(values)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.asarray(self.formula(**v), dtype=float)

    def term_values(self, **values: Any) -> list[np.ndarray]:
        """Each of :attr:`terms` at ``values`` (their sum is :meth:`evaluate`)."""
        v = self._inputs(values)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return [np.asarray(f(**v), dtype=float) for _, f in self.terms]

    def expression(self) -> Any:
        """The closed form as a sympy expression in :mod:`theory.symbols`."""
        from theory import symbols as S  # sympy: only when the symbolic form is asked for

        return self.formula(**{k: getattr(S, k) for k in self.parameters})


LOCAL_SGD_QUADRATIC_LOWER = ClosedFormLowerBound(
    name="local_sgd_quadratic_lower",
    title="Local SGD / minibatch SGD: exact value on the isotropic quadratic (lower bound)",
    provenance=(
        "derived here: exact second moment of minibatch SGD on f_k = (L/2)||x||^2 "
        "(theory.lower.quadratic); Local SGD's average equals it for every H "
        "(Woodworth et al., ICML 2020, quadratic case)"
    ),
    algorithms=("sgd", "local_sgd"),
    parameters=("alpha", "L", "sigma", "K", "T", "F0"),
    formula=quadratic_lower,
    terms=QUADRATIC_LOWER_TERMS,
    attained_on="quadratic",
    notes=(
        "A lower bound (kind = 'lower'): no valid Local SGD or minibatch-SGD upper bound "
        "at the same (alpha, K, T, L, sigma, F0) may be smaller inside its conditions. It "
        "does not depend on H or zeta; local_sgd_heterogeneity_lower does, on "
        "non-quadratic instances (the published one, Woodworth, Patel, Srebro, NeurIPS "
        "2020, could not be read here)."
    ),
)
