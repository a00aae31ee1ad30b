"""Construction of a distributed algorithm: :data:`IMPLEMENTATIONS` and
:func:`build_algorithm` (re-exported by :mod:`empirical.algorithms`).

The class is the one the algorithm's table row names (:attr:`theory.algorithm.Algorithm.
implementation`), checked to run the row's local steps and sync rule
(:func:`implementation_for`): a row that its implementation does not run is refused, never
run by another rule (before, a name outside the overlappable rows fell through to DDP).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from core.errors import UserInputError
from core.validation import check_type
from empirical.algorithms.base import DistributedAlgorithm
from empirical.algorithms.config import AlgorithmConfig
from empirical.algorithms.ddp import DDPAlgorithm
from empirical.algorithms.local import LocalAlgorithm, sync_part
from theory.algorithm import Algorithm, lookup

__all__ = ["IMPLEMENTATIONS", "RUNS", "implementation_for", "implementation_of", "build_algorithm"]


#: the class of each implementation a table row may name
#: (:data:`theory.algorithm.IMPLEMENTATION_KEYS`): torch's DDP, or rounds of local steps and
#: a sync part (:data:`empirical.algorithms.local.SYNC_PARTS`)
IMPLEMENTATIONS: dict[str, type[DistributedAlgorithm]] = {
    "ddp": DDPAlgorithm,
    "local": LocalAlgorithm,
}


def _check_ddp(row: Algorithm) -> None:
    """DDP averages the gradients at every step: a row without local steps whose sync rule
    is ``"average"``; raise otherwise."""
    if row.local or row.sync != "average":
        steps = "local steps" if row.local else "no local steps"
        raise UserInputError(
            f"the 'ddp' implementation averages the gradients at every step; it does not run "
            f"{row.name!r} ({steps}, sync rule {row.sync!r})"
        )


#: what each implementation runs: a check that raises
#: :class:`~core.errors.UserInputError` for a row whose local steps and sync rule it does
#: not run
RUNS: dict[str, Callable[[Algorithm], object]] = {
    "ddp": _check_ddp,
    "local": sync_part,
}


def implementation_for(row: Algorithm) -> type[DistributedAlgorithm]:
    """The class that runs the table row ``row`` on ``torch.distributed``: the one its
    ``implementation`` names, after checking that it runs the row's local steps and sync
    rule (:data:`RUNS`); :class:`~core.errors.UserInputError` otherwise."""
    if not row.implementation:
        raise UserInputError(f"{row.name!r} has no implementation on torch.distributed")
    if row.implementation not in IMPLEMENTATIONS:
        raise UserInputError(
            f"{row.name!r} names the implementation {row.implementation!r}; known: "
            f"{sorted(IMPLEMENTATIONS)}"
        )
    RUNS[row.implementation](row)
    return IMPLEMENTATIONS[row.implementation]


def implementation_of(name: str) -> str:
    """The key of :data:`IMPLEMENTATIONS` that runs the algorithm ``name`` (a table name,
    alias, distributed name or preset), checked by :func:`implementation_for`."""
    row = lookup(name)
    implementation_for(row)
    return row.implementation


def build_algorithm(
    config: AlgorithmConfig,
    model: nn.Module,
    inner_optimizer: torch.optim.Optimizer,
    *,
    process_group: Any = None,
    coin_source: Any = None,
) -> DistributedAlgorithm:
    """The algorithm named by ``config`` around ``model`` and ``inner_optimizer``.

    The class is the implementation its table row names (:func:`implementation_for`).
    ``process_group`` defaults to the world group (or to a single process when no group is
    initialised). Rank 0's parameters and buffers are broadcast to all ranks here.
    ``coin_source`` (PALSGD only): ``None`` (the counter-based coins of
    :func:`theory.coins.pull_coins`), a callable ``(steps, worker) -> bool array``, or a
    recorded trace of shape ``(T,)`` or ``(T, K)`` (:func:`recorded_coins`). Move the model
    to its device first: the local algorithms make its parameters views of one flat buffer.
    """
    check_type("config", config, AlgorithmConfig, "an AlgorithmConfig")
    check_type("model", model, nn.Module, "a torch.nn.Module")
    check_type("inner_optimizer", inner_optimizer, torch.optim.Optimizer, "a torch.optim.Optimizer")
    cls = implementation_for(config.spec.definition)
    kw: dict[str, Any] = {"process_group": process_group}
    if coin_source is not None:
        if cls is not LocalAlgorithm:
            raise UserInputError(f"'coin_source' is used by 'palsgd' only, not {config.name!r}")
        kw["coin_source"] = coin_source
    return cls(config, model, inner_optimizer, **kw)
