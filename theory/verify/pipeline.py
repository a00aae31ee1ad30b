"""The contract of ``palsgd verify``'s stages: ``plan -> designs -> measure -> judge -> report``.

A :class:`Design` is a batch of runs of one algorithm (its
:class:`~theory.algorithm.AlgorithmSpec`) on one instance family; an :class:`Oracle` turns
it into a :class:`Measurement` (the measured left-hand side of the bounds, exactly or by
Monte Carlo); a :class:`Judge` compares a measurement with a statement. Oracles and judges
are interchangeable parts found by name in :data:`ORACLES` and :data:`JUDGES`: the
built-in ones are imported on first use from the modules of :data:`BUILTIN_ORACLES` and
:data:`BUILTIN_JUDGES` (one module each), and a new one is one class passed to
:func:`register_oracle` / :func:`register_judge` (``docs/verify_pipeline.md``).

The measure stage is :func:`measure`: every stage of the run that needs a measured value
(the exact search on quadratics, the heterogeneous and joint instances, the Monte-Carlo
tests, the class stage) asks for it here, by oracle name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from core.errors import UserInputError
from theory.algorithm import AlgorithmSpec

__all__ = [
    "Design",
    "Measurement",
    "Judgement",
    "Oracle",
    "Judge",
    "ORACLES",
    "JUDGES",
    "BUILTIN_ORACLES",
    "BUILTIN_JUDGES",
    "register_oracle",
    "register_judge",
    "oracle",
    "judge_named",
    "measure",
    "judge",
]


@dataclass(frozen=True)
class Design:
    """A batch of ``N`` runs of one algorithm on one instance family.

    ``spec``: the algorithm; ``problem``: the instance family (``"quadratic"``: the
    single-Hessian eigen-designs of :mod:`theory.verify.oracle`; ``"two_curvature"``:
    per-worker Hessians, :mod:`theory.lower.hetero`; ``"joint"``: gap, heterogeneity and
    noise together, :mod:`theory.verify.joint`; ``"class"``: a design of the class oracle,
    :mod:`theory.worstcase`; else the name of a :mod:`theory.problems` problem, simulated);
    ``params``: one array of shape ``(N,)`` per parameter (``alpha``, ``L``, ``K``, ``H``,
    ``T``, sources ``F0``, ``sigma2``/``sigma``, ``zeta2``/``zeta``, ...), in the units of
    the bounds. ``bound``: the statement the designs are drawn for (its outer updates and
    measured quantity fix how the runs are read), or ``None``. ``family``: an oracle's own
    reading of the statement (:class:`theory.verify.oracle.Family` for the exact quadratic
    oracle; ``None``: derived from ``bound``). ``active``: the runs to measure (``None``:
    all; the others are ``nan``). ``instance`` / ``config`` / ``replicas``: a built problem,
    the :class:`~theory.verify.settings.Config` and the number of replicas of a Monte-Carlo
    design; ``instance`` also holds the class oracle's design."""

    spec: AlgorithmSpec
    problem: str
    params: Mapping[str, np.ndarray] = field(default_factory=dict)
    bound: Any = None
    family: Any = None
    active: np.ndarray | None = None
    instance: Any = None
    config: Any = None
    replicas: int = 0

    def __len__(self) -> int:
        if self.replicas:
            return 1
        first = next(iter(self.params.values()), np.zeros(1))
        return int(np.shape(first)[0]) if np.ndim(first) else 1

    def mask(self) -> np.ndarray:
        """:attr:`active` as a boolean array of shape ``(N,)``."""
        if self.active is None:
            return np.ones(len(self), dtype=bool)
        return np.asarray(self.active, dtype=bool)


@dataclass(frozen=True)
class Measurement:
    """What an oracle measured on a :class:`Design`.

    ``measured``: the bounds' left-hand side ``(1/T) sum_{t<T} E||grad f(xbar_t)||^2`` (or
    at the anchors), shape ``(N,)`` for an exact oracle (``inf`` where the run diverged,
    ``nan`` where not measured), shape ``(R,)`` (one value per replica) for a Monte-Carlo
    one; ``diverged``: boolean, same shape; ``exact``: whether ``measured`` is an
    expectation (no sampling error); ``companions``: what else the oracle measured on the
    way (``initial``: ``||grad f(x0)||^2``; ``trace``: the simulator's trace; ``F0``,
    ``sigma``: an instance's own constants; ``solution``: the class oracle's solution)."""

    oracle: str
    design: Design
    measured: np.ndarray
    diverged: np.ndarray
    exact: bool = True
    companions: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Judgement:
    """A statement against a measurement: per run the bound's value, whether its
    conditions hold (``inside``), ``ratio = measured / bound`` (``nan`` outside) and
    ``violated`` (inside and above the bound beyond the judge's tolerance)."""

    bound: str
    judge: str
    value: np.ndarray
    inside: np.ndarray
    ratio: np.ndarray
    violated: np.ndarray

    @property
    def verdict(self) -> str:
        """``"violated"`` when some run inside the conditions violates the statement,
        ``"untested"`` when no run is inside them, else ``"not shown false"``."""
        if bool(np.any(self.violated)):
            return "violated"
        return "not shown false" if bool(np.any(self.inside)) else "untested"

    @property
    def worst_ratio(self) -> float | None:
        r = self.ratio[np.asarray(self.inside, dtype=bool)]
        return float(np.max(r)) if r.size else None


@runtime_checkable
class Oracle(Protocol):
    """Measures a design: one method, :meth:`measure`; ``name`` is its registry key."""

    name: str

    def measure(self, design: Design) -> Measurement: ...


@runtime_checkable
class Judge(Protocol):
    """Compares a measurement with a statement: one method, :meth:`judge`."""

    name: str

    def judge(self, bound: Any, measurement: Measurement) -> Judgement: ...


#: the built-in oracles: name -> the module that defines and registers it
BUILTIN_ORACLES = {
    "exact": "theory.verify.oracle_exact",
    "hetero": "theory.verify.oracle_hessians",
    "joint": "theory.verify.oracle_hessians",
    "monte_carlo": "theory.verify.oracle_montecarlo",
    "class": "theory.verify.oracle_class",
}
#: the built-in judges: name -> the module that defines and registers it
BUILTIN_JUDGES = {"exact": "theory.verify.judge_exact"}

#: the oracles registered so far (built-in ones on first use)
ORACLES: dict[str, Oracle] = {}
#: the judges registered so far (built-in ones on first use)
JUDGES: dict[str, Judge] = {}


def register_oracle(obj: Oracle) -> Oracle:
    """Register ``obj`` (an :class:`Oracle` instance, or a class made with no arguments)
    under its ``name``; returns it (usable as a class decorator)."""
    inst = obj() if isinstance(obj, type) else obj
    if not isinstance(inst, Oracle):
        raise TypeError(f"{obj!r} has no name and measure(design) method")
    ORACLES[inst.name] = inst
    return obj


def register_judge(obj: Judge) -> Judge:
    """Register ``obj`` (a :class:`Judge` instance or class) under its ``name``."""
    inst = obj() if isinstance(obj, type) else obj
    if not isinstance(inst, Judge):
        raise TypeError(f"{obj!r} has no name and judge(bound, measurement) method")
    JUDGES[inst.name] = inst
    return obj


def _load(table: Mapping[str, object], builtin: Mapping[str, str], name: str, what: str) -> None:
    """Import the module of the built-in ``name`` unless ``table`` has it already."""
    if name not in table and name in builtin:
        importlib.import_module(builtin[name])
    if name not in table:
        raise UserInputError(f"unknown {what} {name!r}; known: {sorted({*table, *builtin})}")


def oracle(name: str) -> Oracle:
    """The oracle registered as ``name``."""
    _load(ORACLES, BUILTIN_ORACLES, name, "oracle")
    return ORACLES[name]


def judge_named(name: str) -> Judge:
    """The judge registered as ``name``."""
    _load(JUDGES, BUILTIN_JUDGES, name, "judge")
    return JUDGES[name]


def measure(design: Design, oracle_name: str) -> Measurement:
    """The measure stage: ``design`` through the oracle registered as ``oracle_name``."""
    return oracle(oracle_name).measure(design)


def judge(bound: Any, measurement: Measurement, judge_name: str = "exact") -> Judgement:
    """The judge stage: ``bound`` against ``measurement`` by the judge ``judge_name``."""
    return judge_named(judge_name).judge(bound, measurement)
