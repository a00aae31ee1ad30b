"""Where the runs of a paper-scale plan go: ``K`` workers on the GPUs a machine has.

A run of ``K`` workers is ``K`` processes (ranks) in one process group. Two cases:

* ``G >= K`` GPUs: each rank has a GPU of its own (NCCL), a run takes ``K`` GPUs, and
  ``G // K`` runs of the plan train side by side (at most ``--max-parallel-runs``).
* ``G < K``: the ranks share GPUs, ``r = ceil(K / G)`` ranks per GPU on
  ``ceil(K / r)`` GPUs (so that no GPU holds more than ``r``; with ``K = 4`` and 3 GPUs:
  2 GPUs of 2 ranks each, as fast as 3 GPUs would be and one GPU left idle), over
  gloo with CUDA tensors (NCCL refuses two ranks on one GPU): each rank binds
  ``cuda:LOCAL_RANK mod G`` (:func:`empirical.distributed.bind_device`).

Why several processes per GPU by default: each rank is a ``torch.distributed`` process
(every sync and all-reduce a collective). Sharing a GPU between processes costs a CUDA
context per rank (about 0.5 GiB) and time-slices the GPU between the ranks; the cost
model's estimate assumes ``r`` times a rank's compute per step for that
(docs/paper_figures_gpus.md).

With ``stack_workers`` (:func:`place`) a run whose ``K`` workers share ONE GPU is planned
as ONE process of ``K`` workers instead (``--nproc 1 --workers-per-process K``,
docs/stacked_workers.md: the workers stacked on a worker axis, the sync on the device, no
gloo copy through the host), when its settings allow it (:meth:`Placement.layout`: a
local-step algorithm, none of the refused options); the others keep ``K`` ranks. Off by
default: the speed of the two on one GPU has not been measured yet, and several processes
of several workers each (``G`` GPUs, ``1 < G < K``) are not supported by the trainer.

Every run is launched with ``CUDA_VISIBLE_DEVICES`` naming its GPU set (:meth:`Placement.env`),
so that a rank's ``cuda:LOCAL_RANK`` is a GPU of its set.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import UserInputError
from empirical.config import check_workers_per_process, config_from_dict

__all__ = ["Placement", "place", "visible_devices"]


def visible_devices(count: int) -> tuple[str, ...]:
    """The names of the ``count`` GPUs this process sees, as a child's
    ``CUDA_VISIBLE_DEVICES`` names them: the entries of this process's own
    ``CUDA_VISIBLE_DEVICES`` when it is set (indices or UUIDs), else ``0 .. count-1``."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip() not in ("", "-1"):
        names = tuple(x.strip() for x in env.split(",") if x.strip())
        if len(names) >= count:
            return names[:count]
    return tuple(str(i) for i in range(count))


@dataclass(frozen=True)
class Placement:
    """The GPUs of a plan's runs: ``slots`` holds one GPU set per run that trains at the
    same time (indices among the GPUs used, ``0 .. gpus-1``); ``names`` the
    ``CUDA_VISIBLE_DEVICES`` entry of each of those GPUs."""

    workers: int
    gpus: int
    ranks_per_gpu: int
    slots: tuple[tuple[int, ...], ...]
    names: tuple[str, ...]
    stack: bool = False

    @property
    def workers_per_process(self) -> int:
        """``W`` of the runs that can be stacked: ``K`` when ``stack`` and a run's ``K``
        workers share one GPU, else 1."""
        one_gpu = self.gpus_per_run == 1 and self.workers > 1
        return self.workers if self.stack and one_gpu else 1

    def layout(self, config: Mapping[str, Any]) -> tuple[int, int]:
        """``(nproc, workers_per_process)`` of a run with the resolved ``config``:
        ``(1, K)`` when its workers are stacked (:attr:`workers_per_process` and settings
        ``--workers-per-process`` runs), else ``(K, 1)``."""
        w = self.workers_per_process
        if w > 1 and _stackable(config, w):
            return 1, w
        return self.workers, 1

    @property
    def gpus_per_run(self) -> int:
        return len(self.slots[0])

    @property
    def parallel(self) -> int:
        """Runs that train at the same time."""
        return len(self.slots)

    @property
    def shared(self) -> bool:
        """Whether ranks share a GPU (gloo) rather than each having one (NCCL)."""
        return self.ranks_per_gpu > 1

    @property
    def backend(self) -> str:
        """The process-group backend of a run: gloo when ranks share a GPU, else NCCL."""
        return "gloo" if self.shared else "nccl"

    @property
    def config_backend(self) -> str:
        """The run's ``TrainConfig.backend``: ``gloo`` when shared, else ``auto`` (NCCL on
        CUDA; the value a run had before GPUs could be shared, so its cache key stays)."""
        return "gloo" if self.shared else "auto"

    @property
    def idle(self) -> int:
        """GPUs no run uses."""
        return self.gpus - self.parallel * self.gpus_per_run

    def env(self, slot: int) -> dict[str, str]:
        """The environment of a run launched on GPU set ``slot``."""
        return {"CUDA_VISIBLE_DEVICES": ",".join(self.names[i] for i in self.slots[slot])}

    def gpu_label(self, slot: int) -> str:
        """``GPU 0`` or ``GPUs 0-3`` (indices among the GPUs used)."""
        ids = self.slots[slot]
        if len(ids) == 1:
            return f"GPU {ids[0]}"
        return f"GPUs {ids[0]}-{ids[-1]}"

    def describe(self) -> str:
        """One line: the workers, their GPUs and the runs side by side."""
        k, g = self.workers, self.gpus_per_run
        if self.shared:
            how = (
                f"{k} workers share {g} GPU(s), {self.ranks_per_gpu} ranks per GPU "
                "(gloo, CUDA tensors)"
            )
        else:
            how = f"{k} worker(s), one GPU each (NCCL)"
        if self.workers_per_process > 1:
            how = (
                f"{k} workers in one process on 1 GPU (--workers-per-process {k}; a run "
                f"that cannot be stacked: {k} ranks, gloo)"
            )
        side = f"{self.parallel} run(s) side by side on {self.parallel} GPU set(s)"
        idle = f"; {self.idle} GPU(s) idle" if self.idle else ""
        return f"{self.gpus} GPU(s): {how}; {side}{idle}"

    def to_dict(self) -> dict[str, object]:
        return {
            "workers": self.workers,
            "gpus": self.gpus,
            "ranks_per_gpu": self.ranks_per_gpu,
            "workers_per_process": self.workers_per_process,
            "backend": self.backend,
            "slots": [list(s) for s in self.slots],
            "cuda_visible_devices": [
                self.env(i)["CUDA_VISIBLE_DEVICES"] for i in range(self.parallel)
            ],
        }


def place(
    workers: int,
    gpus: int,
    *,
    max_parallel: int | None = None,
    names: tuple[str, ...] | None = None,
    stack_workers: bool = False,
) -> Placement:
    """The placement of runs of ``workers`` ranks on ``gpus`` GPUs (module docstring), at
    most ``max_parallel`` runs at a time (None: as many as there are GPU sets); ``names``:
    the GPUs' ``CUDA_VISIBLE_DEVICES`` entries (default :func:`visible_devices`);
    ``stack_workers``: plan the runs of ``K`` workers on one GPU as one process of ``K``
    workers (module docstring)."""
    if workers < 1:
        raise UserInputError(f"--nproc must be >= 1, got {workers}")
    if gpus < 1:
        raise UserInputError(f"--gpus must be >= 1 for the paper scale, got {gpus}")
    if max_parallel is not None and max_parallel < 1:
        raise UserInputError(f"--max-parallel-runs must be >= 1, got {max_parallel}")
    per_gpu = math.ceil(workers / gpus)
    per_run = math.ceil(workers / per_gpu)
    count = gpus // per_run
    if max_parallel is not None:
        count = min(count, max_parallel)
    slots = tuple(tuple(range(i * per_run, (i + 1) * per_run)) for i in range(count))
    return Placement(
        workers, gpus, per_gpu, slots, names or visible_devices(gpus), stack=stack_workers
    )


def _stackable(config: Mapping[str, Any], w: int) -> bool:
    """Whether ``palsgd train --nproc 1 --workers-per-process w`` runs ``config`` (the
    options' checks, and no interleaved outer steps the authors' preset would add)."""
    try:
        cfg = config_from_dict({**config, "nproc": 1, "workers_per_process": w})
        check_workers_per_process(cfg)
    except UserInputError:
        return False
    return not (cfg.reference_faithful and (cfg.outer_steps_per_sync or 1) > 1)
