"""The registry of problem factories and :func:`make_problem`."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

from core.errors import UserInputError
from core.files import check_memory
from core.validation import ParameterError
from theory.problems.args import ProblemArgs
from theory.problems.base import Problem, check_noise
from theory.problems.cosine import make_cosine
from theory.problems.quadratic import make_quadratic
from theory.problems.regression import DataOptions, make_logistic, make_robust_regression
from theory.validation import validate

ProblemFactory = Callable[..., Problem]

PROBLEMS: dict[str, ProblemFactory] = {
    "quadratic": make_quadratic,
    "cosine": make_cosine,
    "robust_regression": make_robust_regression,
    "logistic": make_logistic,
}


def register_problem(name: str, factory: ProblemFactory, *, replace: bool = False) -> None:
    """Register ``factory(K=..., d=..., noise=..., sigma=..., zeta=..., seed=..., **kw)``
    (the keywords of :class:`ProblemArgs` and the problem's own options)."""
    if not callable(factory):
        raise TypeError("factory must be callable")
    if name in PROBLEMS and not replace and PROBLEMS[name] is not factory:
        raise UserInputError(f"a problem named {name!r} is already registered (pass replace=True)")
    PROBLEMS[name] = factory


def problem_names() -> list[str]:
    """Registered problem names."""
    return sorted(PROBLEMS)


#: the factories that take the keywords of :class:`DataOptions`
_DATA_FACTORIES = (make_robust_regression, make_logistic)


def _default_n_samples(factory: Any) -> Any:
    """The ``n_samples`` a factory uses when not given: its keyword's default, that of
    :class:`DataOptions` for the data problems, else ``None``."""
    if factory in _DATA_FACTORIES:
        return DataOptions.n_samples
    try:
        param = inspect.signature(factory).parameters.get("n_samples")
    except (TypeError, ValueError):
        param = None
    return None if param is None else param.default


def _problem_bytes(factory: Any, K: float, d: float, noise: str, kw: dict[str, Any]) -> float:
    """An estimate of the bytes a problem's arrays take: a K x d array of shifts, the
    K x n x d samples of a finite sum or of a data problem (``n_samples``, the factory's
    default when not given), a d x d rotation."""
    n = kw.get("n_samples", _default_n_samples(factory))
    if n is None or n is inspect.Parameter.empty:
        n = 32 if noise == "finite_sum" else 0
    try:
        n = float(n)
    except (TypeError, ValueError):
        n = 0.0
    return 8.0 * (2.0 * K * d + K * n * d + (d * d if kw.get("rotate") else 0.0))


def make_problem(name: str, **kw: Any) -> Problem:
    """Build a registered problem from the keywords of :class:`ProblemArgs` (``K``
    required; ``d = 10``, ``noise = 'gaussian'``, ``sigma = None``, ``zeta = 0``,
    ``seed = 0``) and the problem's own options.

    ``sigma`` defaults to 1 for additive noise and finite sums of offsets; for the data
    problems with ``noise='finite_sum'`` it is set by the data and ``batch`` (leave it
    ``None``). ``zeta`` is the requested heterogeneity (``zeta2 = zeta^2`` where exact).
    ``seed`` seeds the problem's data only (not the simulation).
    """
    if name not in PROBLEMS:
        raise UserInputError(f"unknown problem {name!r}: registered problems are {problem_names()}")
    a = ProblemArgs.take(kw)
    validate(K=a.K, d=a.d, zeta=a.zeta)
    check_noise(a.noise)
    check_memory(
        _problem_bytes(PROBLEMS[name], float(a.K), float(a.d), a.noise, kw),
        f"make_problem({name!r}): K = {a.K} workers x d = {a.d} coordinates",
    )
    if int(a.seed) < 0:
        raise ParameterError("seed", a.seed, "integer in [0, inf)")
    a = dataclasses.replace(a, K=int(a.K), d=int(a.d), seed=int(a.seed))
    prob = PROBLEMS[name](**a.keywords(), **kw)
    if not isinstance(prob, Problem):
        raise TypeError(f"factory of {name!r} returned {type(prob).__name__}, not a Problem")
    return prob
