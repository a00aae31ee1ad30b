"""The class oracle: worst cases over every L-smooth problem of a bound's class.

Every bound the toolkit encodes is a statement about a class: ``K`` workers whose losses are
``L``-smooth (nonconvex allowed), with heterogeneity ``zeta^2`` (A3) and an initial gap
``F0`` (A4). This package computes, at ``sigma = 0``, the worst case of the quantity a bound
bounds over that whole class, not over instances chosen by the verifier:

* :mod:`~theory.worstcase.trajectory`: one run of a method of the algorithm table, written
  once for PEPit points and for numbers;
* :mod:`~theory.worstcase.design`: a design (:class:`ClassDesign`), validated once;
* :mod:`~theory.worstcase.pep`: the performance-estimation SDP (PEPit, Clarabel) and its
  relaxations (:data:`RELAXATIONS`): the value is an upper bound on the worst case;
* :mod:`~theory.worstcase.lift`: explicit one-dimensional functions of the class that reach
  near it (a lower bound on the worst case, and a refutation when above a statement);
* :mod:`~theory.worstcase.judge`: a bound against the class: certified, exceeded on the
  relaxed class, or refuted.

``palsgd worst-case`` is the command (:mod:`theory.worstcase.cli`); ``palsgd verify`` runs a
class stage over every upper and lower bound (:mod:`theory.verify.classstage`).
"""

from __future__ import annotations

from typing import Any

from theory.algorithm import AlgorithmSpec
from theory.worstcase.design import MAX_PATHS, MAX_POINTS, ClassDesign
from theory.worstcase.pep import CLASS_TEXT, RELAXATIONS, WorstCase, solve
from theory.worstcase.trajectory import MEASURED

__all__ = [
    "ClassDesign", "WorstCase", "worst_case", "design_of", "solve", "CLASS_TEXT",
    "RELAXATIONS", "MEASURED", "MAX_PATHS", "MAX_POINTS",
]  # fmt: skip


def design_of(
    algorithm: str,
    *,
    K: int,
    L: float,
    alpha: float,
    zeta: float,
    F0: float,
    T: int | None = None,
    R: int | None = None,
    measured: str = "iterates",
    pulls: Any = None,
    **params: Any,
) -> ClassDesign:
    """The :class:`ClassDesign` of ``algorithm`` (a table name, alias or preset) with its
    hyperparameters ``params`` (``H``, ``p``, ``eta``, ``outer``, ``gamma``, ``mu``, ``T0``,
    ``coins``; the authors' names are read too). The horizon is ``T`` steps or ``R`` rounds
    (``T = R*H``), exactly one of them."""
    from core.errors import UserInputError

    spec = AlgorithmSpec.of(algorithm, alpha=alpha, **params)
    if (T is None) == (R is None):
        raise UserInputError("give the horizon as T (steps) or R (rounds), exactly one")
    T = int(R) * spec.H if R is not None and not isinstance(R, bool) else T
    return ClassDesign(spec, K=K, T=T, L=L, zeta=zeta, F0=F0, measured=measured, pulls=pulls)


def worst_case(algorithm: str, *, relaxation: str = "full", **kwargs: Any) -> WorstCase:
    """The worst case over the class (:data:`CLASS_TEXT`) of the measured quantity of
    ``algorithm`` at ``sigma = 0``: :func:`design_of` with ``kwargs``, then the SDP.

    The class: ``K`` functions ``f_k``, each ``L``-smooth (nonconvex allowed), ``f`` their
    mean, A3 ``(1/K) sum_k ||grad f_k(y) - grad f(y)||^2 <= zeta^2`` and A4
    (``f(x0) - f(y) <= F0``, ``f(y) - f(x0) + F0 >= ||grad f(y)||^2/(2L)``) at the points the
    method visits (``relaxation="full"``: every point; ``"compact"``: the shared points,
    the same value for every ``K >= 2``). Measured: ``"iterates"``,
    ``(1/T) sum_{t<T} ||grad f(xbar_t)||^2``, or ``"anchors"``,
    ``(1/R) sum_{r<R} ||grad f(z_r)||^2``; in units of a squared gradient. With pull steps
    and no ``pulls`` pattern, the expectation over every coin path.

    Example: gradient descent at ``alpha = 1/L`` is tight at ``2 L F0 / T``::

        >>> round(worst_case("sgd", K=1, T=4, L=1.0, alpha=1.0, zeta=0.0, F0=1.0).value, 6)
        0.5
    """
    from core.validation import check_choice

    check_choice("relaxation", relaxation, RELAXATIONS)
    return solve(design_of(algorithm, **kwargs), relaxation)
