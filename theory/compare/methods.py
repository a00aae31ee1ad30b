"""The methods a comparison tunes, their tuning grids, and what one round costs each of them.

Every method is an :class:`~theory.algorithm.AlgorithmSpec` of the algorithm table (the
inner step ``alpha`` left to the tuning grid) with its coin model and outer update:

| method | spec kind | outer update | coins | tuned over |
|---|---|---|---|---|
| ``sgd`` | ``sgd`` (minibatch SGD / DDP) | (every step) | | ``alpha`` |
| ``local_sgd`` | ``local_sgd`` run on its ``outer_name``, ``diloco`` (Local SGD rounds + outer step) | SGD, ``mu = 0`` (``gamma = 1``: averaging) | | ``alpha``, ``gamma`` |
| ``diloco`` | ``diloco`` | Nesterov | | ``alpha``, ``gamma`` (``mu`` fixed) |
| ``palsgd`` | ``palsgd`` | SGD, ``mu = 0`` | independent | ``alpha``, ``gamma`` |
| ``palsgd_nesterov`` | ``palsgd`` | Nesterov | independent | ``alpha``, ``gamma`` |
| ``palsgd_shared`` | ``palsgd`` | SGD, ``mu = 0`` | shared | ``alpha``, ``gamma`` |

PALSGD's ``eta`` and ``p`` are the cell's (a map's axes). Every method is tuned over the same
number of configurations, ``n_alpha x n_outer``: those with an outer rate over ``n_alpha``
inner steps times ``n_outer`` outer rates, minibatch SGD over ``n_alpha * n_outer`` inner
steps on the same range. The inner steps are log-spaced over ``span`` decades below the
method's stability edge (``alpha L < 2``; for PALSGD also the gradient step
``alpha L/(1-p) < 2`` and the pull ``alpha eta/p < 2``, the edge of
:func:`theory.algorithm.pull_stability`).

Cost of one round (:class:`Prices`, :func:`round_cost`): ``grads`` counts gradient
evaluations per worker (PALSGD: ``(1-p) H`` in expectation), ``rounds`` counts
communication rounds (minibatch SGD: one per step), ``time`` is modelled wall-clock
seconds: gradient steps, pull steps (their own price), the sync (local work and the
all-reduce of the parameters) and, with independent coins, the wait for the worker with the
most gradient steps (:func:`theory.coins.round_excess`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.validation import check_choice
from theory.algorithm import (
    DILOCO_DEFAULT_GAMMA,
    DILOCO_DEFAULT_MU,
    LABELS,
    PULL_EDGE,
    VARIANTS,
    AlgorithmSpec,
    lookup,
)
from theory.coins import round_excess

__all__ = [
    "METHODS",
    "DEFAULT_METHODS",
    "BASELINES",
    "PALSGD_METHODS",
    "SHARED_METHODS",
    "BUDGET_KINDS",
    "Method",
    "Prices",
    "method",
    "round_cost",
    "alpha_edge",
    "default_outer_grid",
]

#: the budgets a cost can be counted in
BUDGET_KINDS = ("grads", "rounds", "time")
#: a step size this close below the stability edge is the grid's top
EDGE_FRACTION = 0.98


@dataclass(frozen=True)
class Method:
    """One compared method: a name, the algorithm it runs (an
    :class:`~theory.algorithm.AlgorithmSpec` whose ``alpha`` the tuning grid sets, and whose
    ``gamma``, ``eta``, ``p`` the grid and the cell set) and a label."""

    name: str
    spec: AlgorithmSpec
    label: str = ""
    #: the overlapped sync's delay in local steps (0: blocking), set on the spec that runs
    sync_delay: int = 0

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def local(self) -> bool:
        """Whether the workers take local steps (minibatch SGD: a round is one step)."""
        return self.spec.local

    @property
    def pulls(self) -> bool:
        """Whether the method takes pull steps (its cost depends on ``eta`` and ``p``)."""
        return self.spec.definition.pulls

    @property
    def has_outer(self) -> bool:
        """Whether an outer rate ``gamma`` is tuned (every method with rounds)."""
        return self.spec.outer != "average"

    @property
    def outer(self) -> str:
        """The outer update of the spec (``"average"`` for minibatch SGD)."""
        return self.spec.outer

    @property
    def nesterov(self) -> bool:
        return self.spec.nesterov

    def outer_momentum(self, nesterov_mu: float) -> float:
        """The outer momentum a configuration of the method runs: ``nesterov_mu`` (the grid's,
        fixed) for a Nesterov method, else the spec's own (SlowMo's heavy ball ``0.5``; ``0``
        for averaging and a plain outer SGD step)."""
        return nesterov_mu if self.nesterov else self.spec.mu

    @property
    def coins(self) -> str:
        return self.spec.coins

    @property
    def shared(self) -> bool:
        return self.spec.shared_coins


def _method(name: str, algorithm: str, label: str, **values: Any) -> Method:
    """The method ``name``: the table's ``algorithm`` (a name or a preset) with ``values``;
    an outer update the row does not take runs on the row's ``outer_name`` (Local SGD with
    an outer SGD step runs DiLoCo's rounds)."""
    row = lookup(algorithm)
    outer = values.get("outer")
    if outer is not None and outer not in row.outers and row.outer_name:
        algorithm = row.outer_name
    return Method(name, AlgorithmSpec.of(algorithm, **values), label)


#: the compared methods, each a row of the algorithm table with its outer update and coins
METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        _method("sgd", "sgd", "minibatch SGD (DDP)"),
        _method("local_sgd", "local_sgd", "Local SGD (outer SGD)", outer="sgd", mu=0.0),
        _method("diloco", "diloco", "DiLoCo (outer Nesterov)", outer="nesterov"),
        _method("palsgd", "palsgd", "PALSGD (outer SGD)", outer="sgd"),
        _method(
            "palsgd_nesterov", "palsgd", "PALSGD (outer Nesterov)", outer="nesterov",
            mu=DILOCO_DEFAULT_MU,
        ),
        _method("palsgd_shared", "palsgd", "PALSGD, shared coins", outer="sgd", coins="shared"),
    )
}  # fmt: skip
#: the methods a map compares unless told otherwise (``palsgd map --methods``)
DEFAULT_METHODS = tuple(METHODS)
#: the table's variants whose base a map runs (SlowMo over Local SGD: DiLoCo's rounds with a
#: heavy-ball outer step), each tuned like its base with the variant's own outer momentum
METHODS.update(
    (v.name, Method(v.name, AlgorithmSpec.of(v.name), LABELS[v.name]))
    for v in VARIANTS.values()
    if lookup(v.base).name in {m.kind for m in METHODS.values()}
)
#: the methods without pulls: PALSGD's cost is compared with the best of those a map runs
BASELINES = tuple(n for n, m in METHODS.items() if not m.pulls)
#: PALSGD with independent coins (the algorithm as described), both outer families
PALSGD_METHODS = ("palsgd", "palsgd_nesterov")
#: PALSGD as the authors' code runs it (shared coins), judged on its own beside them
SHARED_METHODS = ("palsgd_shared",)


def method(name: str) -> Method:
    """The method called ``name`` (refused by name when unknown)."""
    check_choice("method", name, tuple(METHODS))
    return METHODS[name]


def alpha_edge(m: Method, L: float, p: float = 0.0, eta: float = 0.0) -> float:
    """The largest inner step of ``m``'s grid: ``EDGE_FRACTION`` of its stability edge."""
    edge = 2.0 / L
    if m.pulls and p > 0:  # the gradient branch alpha L/(1-p) and the pull alpha eta/p
        edge = min(edge * (1.0 - p), PULL_EDGE * p / eta if eta > 0 else math.inf)
    return EDGE_FRACTION * edge


@dataclass(frozen=True)
class Prices:
    """Modelled seconds of the parts of a step (for the ``time`` budget).

    ``grad_s``: one gradient step of one worker (forward, backward, inner optimiser step);
    ``pull_s``: one pull step; ``sync_s``: one sync of a local method (its local work and the
    all-reduce of the parameters); ``ddp_step_s``: the part of minibatch SGD's per-step
    gradient all-reduce not hidden behind the backward pass; ``K`` workers (for the sync
    wait of independent coins); ``source``: where the numbers come from.
    """

    grad_s: float
    pull_s: float
    sync_s: float
    ddp_step_s: float
    K: int
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("grad_s", "pull_s", "sync_s", "ddp_step_s"):
            val = getattr(self, name)
            if not (isinstance(val, int | float) and math.isfinite(val) and val >= 0):
                raise UserInputError(f"price '{name}' = {val!r} must be a finite number >= 0")


def round_cost(m: Method, budget: str, H: int, p: float, prices: Prices | None = None) -> float:
    """What one round of ``m`` costs in ``budget`` (one step for minibatch SGD)."""
    check_choice("budget", budget, BUDGET_KINDS)
    if not m.local:
        H, p = 1, 0.0
    q = p if m.pulls else 0.0
    if budget == "grads":
        return (1.0 - q) * H
    if budget == "rounds":
        return 1.0
    if prices is None:
        raise UserInputError("the 'time' budget needs prices (a cluster profile)")
    if not m.local:
        return prices.grad_s + prices.ddp_step_s
    wait = (prices.grad_s - prices.pull_s) * round_excess(H, q, prices.K, m.coins)
    return (1.0 - q) * H * prices.grad_s + q * H * prices.pull_s + prices.sync_s + max(wait, 0.0)


def default_outer_grid(m: Method, n: int) -> np.ndarray:
    """``n`` outer rates for ``m``: for outer SGD ``2^((j-1)/2)``, ``j = 0..n-1`` (``gamma = 1``,
    averaging, is the second); for Nesterov log-spaced over DiLoCo's range ``[0.1, 1]``
    (Douillard et al. 2023 use 0.7 with momentum 0.9)."""
    if not m.has_outer:
        return np.ones(1)
    if not m.nesterov:
        return 2.0 ** ((np.arange(n) - 1) / 2.0)
    return np.geomspace(0.1, 1.0, n) if n > 1 else np.full(1, DILOCO_DEFAULT_GAMMA)
