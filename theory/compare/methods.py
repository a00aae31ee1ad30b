"""The methods a comparison tunes, their tuning grids, and what one round costs each of them.

Every method is an :class:`~theory.algorithm.AlgorithmSpec` kind with a coin model and an
outer-optimiser family:

| method | kind | outer step | coins | tuned over |
|---|---|---|---|---|
| ``sgd`` | minibatch SGD / DDP | (every step) | | ``alpha`` |
| ``local_sgd`` | Local SGD | SGD, ``mu = 0`` (``gamma = 1``: averaging) | | ``alpha``, ``gamma`` |
| ``diloco`` | DiLoCo | Nesterov | | ``alpha``, ``gamma`` (``mu`` fixed) |
| ``palsgd`` | PALSGD | SGD, ``mu = 0`` | independent | ``alpha``, ``gamma`` |
| ``palsgd_nesterov`` | PALSGD | Nesterov | independent | ``alpha``, ``gamma`` |
| ``palsgd_shared`` | PALSGD | SGD, ``mu = 0`` | shared | ``alpha``, ``gamma`` |

PALSGD's ``eta`` and ``p`` are the cell's (a map's axes). Every method is tuned over the same
number of configurations, ``n_alpha x n_outer``: those with an outer rate over ``n_alpha``
inner steps times ``n_outer`` outer rates, minibatch SGD over ``n_alpha * n_outer`` inner
steps on the same range. The inner steps are log-spaced over ``span`` decades below the
method's stability edge (``alpha L < 2``; for PALSGD also the gradient step
``alpha L/(1-p) < 2`` and the pull ``alpha eta/p < 2``).

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

import numpy as np

from theory.algorithm import DILOCO_DEFAULT_GAMMA
from theory.coins import round_excess
from theory.validation import UserInputError, check_choice

__all__ = [
    "METHODS",
    "BASELINES",
    "PALSGD_METHODS",
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
    """One compared method: the algorithm kind, coins and outer-optimiser family."""

    name: str
    kind: str
    outer: str  # "none" (minibatch SGD), "sgd" (mu = 0) or "nesterov"
    coins: str = "independent"
    label: str = ""

    @property
    def pulls(self) -> bool:
        """Whether the method takes pull steps (its cost depends on ``eta`` and ``p``)."""
        return self.kind == "palsgd"

    @property
    def has_outer(self) -> bool:
        return self.outer != "none"

    @property
    def shared(self) -> bool:
        return self.coins == "shared"


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("sgd", "sgd", "none", label="minibatch SGD (DDP)"),
        Method("local_sgd", "local_sgd", "sgd", label="Local SGD (outer SGD)"),
        Method("diloco", "diloco", "nesterov", label="DiLoCo (outer Nesterov)"),
        Method("palsgd", "palsgd", "sgd", label="PALSGD (outer SGD)"),
        Method("palsgd_nesterov", "palsgd", "nesterov", label="PALSGD (outer Nesterov)"),
        Method("palsgd_shared", "palsgd", "sgd", "shared", label="PALSGD, shared coins"),
    )
}
#: the methods without pulls: PALSGD's cost is compared with the best of these
BASELINES = ("sgd", "local_sgd", "diloco")
#: PALSGD with independent coins (the algorithm as described), both outer families
PALSGD_METHODS = ("palsgd", "palsgd_nesterov")


def method(name: str) -> Method:
    """The method called ``name`` (refused by name when unknown)."""
    check_choice("method", name, tuple(METHODS))
    return METHODS[name]


def alpha_edge(m: Method, L: float, p: float = 0.0, eta: float = 0.0) -> float:
    """The largest inner step of ``m``'s grid: ``EDGE_FRACTION`` of its stability edge."""
    edge = 2.0 / L
    if m.pulls and p > 0:
        edge = min(edge * (1.0 - p), 2.0 * p / eta if eta > 0 else math.inf)
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
    if m.kind == "sgd":
        H, p = 1, 0.0
    q = p if m.pulls else 0.0
    if budget == "grads":
        return (1.0 - q) * H
    if budget == "rounds":
        return 1.0
    if prices is None:
        raise UserInputError("the 'time' budget needs prices (a cluster profile)")
    if m.kind == "sgd":
        return prices.grad_s + prices.ddp_step_s
    wait = (prices.grad_s - prices.pull_s) * round_excess(H, q, prices.K, m.coins)
    return (1.0 - q) * H * prices.grad_s + q * H * prices.pull_s + prices.sync_s + max(wait, 0.0)


def default_outer_grid(m: Method, n: int) -> np.ndarray:
    """``n`` outer rates for ``m``: for outer SGD ``2^((j-1)/2)``, ``j = 0..n-1`` (``gamma = 1``,
    averaging, is the second); for Nesterov log-spaced over DiLoCo's range ``[0.1, 1]``
    (Douillard et al. 2023 use 0.7 with momentum 0.9)."""
    if not m.has_outer:
        return np.ones(1)
    if m.outer == "sgd":
        return 2.0 ** ((np.arange(n) - 1) / 2.0)
    return np.geomspace(0.1, 1.0, n) if n > 1 else np.full(1, DILOCO_DEFAULT_GAMMA)
