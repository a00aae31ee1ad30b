"""Distributed algorithms on ``torch.distributed``: DDP, Local SGD, Post-Local SGD, DiLoCo, PALSGD,
EASGD.

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
picks the class the algorithm's table row names (``Algorithm.implementation``), checked to
run the row's local steps and sync rule (:func:`implementation_for`; the local algorithms'
sync part is the one of the row's ``sync``, :data:`~empirical.algorithms.local.SYNC_PARTS`).

Files: ``config.py`` (the configuration and stability check), ``base.py`` (the interface,
statistics, the communicator), ``ddp.py`` (DDP), ``local.py`` (Local SGD, Post-Local SGD,
DiLoCo, PALSGD, EASGD: one class, :class:`LocalAlgorithm`, composed of the parts below),
``flat_model.py`` (the parameters as one flat buffer), ``anchor.py`` (the anchor, the outer
optimizer's place, the buffer policy), ``sync.py`` (the blocking sync), ``overlap.py``
(the overlapped sync, ``sync_delay``), ``elastic.py`` (EASGD's elastic mixing), ``pulls.py`` (PALSGD's coins and pull),
``collectives.py`` (the initial broadcast, the warm-up's gradient all-reduce), ``outer.py``
(the outer optimizer), ``flat.py`` (flat layouts), ``coins.py`` (coin sources), ``fsdp.py``
(workers sharded with FSDP2 on a 2-D mesh), ``slowlink.py`` (an emulated slow link),
``stacked.py`` (K workers in ONE process, parameters stacked along a worker axis, the
step vmapped; with ``stacked_model.py`` and ``stacked_inner.py``; docs/stacked_workers.md).

See :mod:`empirical.algorithms.local` for the exact per-step semantics and
``docs/reference-implementation.md`` for the authors' code's quirks (available as named
switches of :class:`AlgorithmConfig`).
"""

from core.lazy import lazy_exports

__all__ = [
    "AlgorithmConfig",
    "StabilityReport",
    "check_stability",
    "build_algorithm",
    "DistributedAlgorithm",
    "DDPAlgorithm",
    "LocalAlgorithm",
    "ElasticSync",
    "IMPLEMENTATIONS",
    "implementation_of",
    "implementation_for",
    "RUNS",
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
    "StackedWorkers",
    "StackedStep",
    "StackedInner",
]


# lazy (core.lazy): `palsgd train --help` reads the choices of empirical.algorithms.config
# without importing torch, which the other modules need
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.algorithms.base": ("DistributedAlgorithm", "StepInfo", "StepResult"),
        "empirical.algorithms.build": (
            "IMPLEMENTATIONS",
            "RUNS",
            "build_algorithm",
            "implementation_for",
            "implementation_of",
        ),
        "empirical.algorithms.coins": ("CoinSource", "counter_coins", "recorded_coins"),
        "empirical.algorithms.config": (
            "BUFFERS",
            "COINS",
            "NAMES",
            "OUTERS",
            "SYNC_SCHEDULES",
            "AlgorithmConfig",
            "StabilityReport",
            "authors_sync_offset",
            "check_stability",
        ),
        "empirical.algorithms.ddp": ("DDPAlgorithm",),
        "empirical.algorithms.elastic": ("ElasticSync",),
        "empirical.algorithms.flat": ("FlatLayout",),
        "empirical.algorithms.local": ("LocalAlgorithm",),
        "empirical.algorithms.outer": ("OuterOptimizer",),
        "empirical.algorithms.stacked": ("StackedStep", "StackedWorkers"),
        "empirical.algorithms.stacked_inner": ("StackedInner",),
    },
)
