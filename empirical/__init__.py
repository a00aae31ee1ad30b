"""PALSGD and its baselines on ``torch.distributed`` (NCCL on GPUs, gloo on the CPU).

Files: ``algorithms/`` (DDP and one class per local algorithm: Local SGD, Post-Local SGD,
DiLoCo, PALSGD), ``distributed.py`` (process groups, devices), ``models/`` (GPT-Neo from
configs, ResNets, losses), ``data/`` (embedded and local datasets, sharding, streams,
``tokenizer.py``, ``token_cache.py``), ``train/`` (``palsgd train``: options, launch, the
trainer), ``config/`` (the training configuration, presets, checks), ``checkpoint/`` and
``resume.py`` (atomic checkpoints, resuming), ``schedules.py``, ``timing.py``,
``export.py``, ``metrics.py``, ``probe/`` (``palsgd probe``: L, sigma^2, zeta^2, F0 of a
real model), ``cost/`` (``palsgd cost``: the cost model), ``commands.py`` (the subcommands
this package registers with :mod:`palsgd.cli`).

It sits above :mod:`theory` and the base layer :mod:`core` (errors, value checks, files,
writers, limits, exit codes) and imports nothing above it.
"""
