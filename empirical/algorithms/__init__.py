"""Distributed algorithms on ``torch.distributed``: DDP, Local SGD, Post-Local SGD, DiLoCo, PALSGD.

Each wraps any ``nn.Module`` and any ``torch.optim`` optimizer (the inner optimizer), in
the shape of PyTorch's ``PostLocalSGDOptimizer``/``PeriodicModelAverager`` but with an
explicit decision point for PALSGD's pull steps::

    from empirical.algorithms import AlgorithmConfig, build_algorithm
    algo = build_algorithm(AlgorithmConfig(name="palsgd", H=32, p=0.2, eta=1.0, T0=32,
                                           outer="nesterov", gamma=0.1, mu=0.9),
                           model, torch.optim.AdamW(model.parameters(), lr=1e-2))
    while training:
        res = algo.train_step(next_batch, loss_fn, micro_batches=A)  # StepResult
        # or by hand: if algo.next_action() == "grad": loss.backward(); algo.step()

Construction goes through one table, :data:`IMPLEMENTATIONS` (the class that runs each
implementation: torch's DDP, or the local algorithms), from which :func:`build_algorithm`
picks the class of ``config.name``.

Files: ``config.py`` (the configuration and stability check), ``base.py`` (the interface,
statistics, the communicator), ``ddp.py`` (DDP), ``local.py`` (Local SGD, Post-Local SGD,
DiLoCo, PALSGD: one class, :class:`LocalAlgorithm`, composed of the parts below),
``flat_model.py`` (the parameters as one flat buffer), ``anchor.py`` (the anchor, the outer
optimizer's place, the buffer policy), ``sync.py`` (the blocking sync), ``overlap.py``
(the overlapped sync, ``sync_delay``), ``pulls.py`` (PALSGD's coins and pull),
``collectives.py`` (the initial broadcast, the warm-up's gradient all-reduce), ``outer.py``
(the outer optimizer), ``flat.py`` (flat layouts), ``coins.py`` (coin sources), ``fsdp.py``
(workers sharded with FSDP2 on a 2-D mesh), ``slowlink.py`` (an emulated slow link).

See :mod:`empirical.algorithms.local` for the exact per-step semantics and
``docs/reference-implementation.md`` for the authors' code's quirks (available as named
switches of :class:`AlgorithmConfig`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from core.errors import UserInputError
from core.validation import check_type
from empirical.algorithms.base import DistributedAlgorithm, StepInfo, StepResult
from empirical.algorithms.coins import CoinSource, counter_coins, recorded_coins
from empirical.algorithms.config import (
    BUFFERS,
    COINS,
    NAMES,
    OUTERS,
    SYNC_SCHEDULES,
    AlgorithmConfig,
    StabilityReport,
    authors_sync_offset,
    check_stability,
)
from empirical.algorithms.ddp import DDPAlgorithm
from empirical.algorithms.flat import FlatLayout
from empirical.algorithms.local import LocalAlgorithm
from empirical.algorithms.outer import OuterOptimizer
from theory.algorithm import LOCAL_NAMES

__all__ = [
    "AlgorithmConfig",
    "StabilityReport",
    "check_stability",
    "build_algorithm",
    "DistributedAlgorithm",
    "DDPAlgorithm",
    "LocalAlgorithm",
    "IMPLEMENTATIONS",
    "implementation_of",
    "StepInfo",
    "StepResult",
    "CoinSource",
    "counter_coins",
    "recorded_coins",
    "authors_sync_offset",
    "SYNC_SCHEDULES",
    "FlatLayout",
    "OuterOptimizer",
    "NAMES",
    "OUTERS",
    "COINS",
    "BUFFERS",
]


#: the class of each implementation of a distributed algorithm: torch's DDP, or rounds of
#: local steps and a sync (every name of :data:`theory.algorithm.LOCAL_NAMES`)
IMPLEMENTATIONS: dict[str, type[DistributedAlgorithm]] = {
    "ddp": DDPAlgorithm,
    "local": LocalAlgorithm,
}


def implementation_of(name: str) -> str:
    """The key of :data:`IMPLEMENTATIONS` that runs the algorithm ``name``."""
    return "local" if name in LOCAL_NAMES else "ddp"


def build_algorithm(
    config: AlgorithmConfig,
    model: nn.Module,
    inner_optimizer: torch.optim.Optimizer,
    *,
    process_group: Any = None,
    coin_source: Any = None,
) -> DistributedAlgorithm:
    """The algorithm named by ``config`` around ``model`` and ``inner_optimizer``.

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
    cls = IMPLEMENTATIONS[implementation_of(config.name)]
    kw: dict[str, Any] = {"process_group": process_group}
    if coin_source is not None:
        if cls is not LocalAlgorithm:
            raise UserInputError(f"'coin_source' is used by 'palsgd' only, not {config.name!r}")
        kw["coin_source"] = coin_source
    return cls(config, model, inner_optimizer, **kw)
