"""Common machinery of the distributed algorithms: the step result, statistics, and a small
communicator that counts and times its collectives."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from empirical.algorithms.config import AlgorithmConfig
from theory.validation import UserInputError

__all__ = ["StepInfo", "DistributedAlgorithm", "Communicator", "new_stats"]


@dataclass
class StepInfo:
    """Result of :meth:`DistributedAlgorithm.step`.

    ``action``: ``"grad"`` or ``"pull"``; ``synced``: a sync (outer step, workers reset to
    the anchor) happened right after this step; ``t``: local steps done after this step
    (the authors' ``global_step``; the step just taken had index ``t - 1``).
    """

    action: str
    synced: bool
    t: int


def new_stats() -> dict[str, Any]:
    """Fresh statistics dict (counts, bytes per rank, seconds of wall time)."""
    return {
        "grad_steps": 0,
        "pull_steps": 0,
        "warmup_steps": 0,
        "syncs": 0,
        "outer_steps": 0,
        "allreduce_calls": 0,
        "broadcast_calls": 0,
        "bytes_communicated": 0,
        "time_comm_s": 0.0,
        "time_pull_s": 0.0,
        "time_inner_step_s": 0.0,
        "time_sync_s": 0.0,
        "last_consensus": None,
    }


class Communicator:
    """Collectives on ``group`` (default: the world) that update ``stats``.

    With no initialised process group, or a group of size 1, every collective is a no-op
    (single-process runs need no launcher). ``torch.distributed.all_reduce`` is looked up
    at call time, so a test can count the calls by patching it.

    ``delay`` (bytes -> seconds), if given, is slept after every all-reduce, inside the
    timed region (an emulated slow link, :mod:`empirical.algorithms.slowlink`).
    """

    def __init__(
        self, group: Any, stats: dict[str, Any], delay: Callable[[int], float] | None = None
    ) -> None:
        self.group = group
        self.stats = stats
        self.delay = delay
        self.initialized = dist.is_available() and dist.is_initialized()
        self.rank = dist.get_rank(group) if self.initialized else 0
        self.size = dist.get_world_size(group) if self.initialized else 1
        self.src = 0
        if self.initialized and group is not None and group is not dist.group.WORLD:
            self.src = dist.get_global_rank(group, 0)

    @property
    def active(self) -> bool:
        """True when collectives actually communicate (initialised group of size > 1)."""
        return self.initialized and self.size > 1

    def _sync_device(self, t: torch.Tensor) -> None:
        if t.is_cuda:
            torch.cuda.synchronize(t.device)

    def all_reduce_sum(self, buf: torch.Tensor) -> None:
        """In-place SUM all-reduce of ``buf`` (one call), timed and counted."""
        if not self.active:
            return
        start = time.perf_counter()
        dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=self.group)
        self._sync_device(buf)
        nbytes = buf.numel() * buf.element_size()
        if self.delay is not None:
            time.sleep(max(self.delay(nbytes), 0.0))
        self.stats["time_comm_s"] += time.perf_counter() - start
        self.stats["allreduce_calls"] += 1
        self.stats["bytes_communicated"] += nbytes

    def broadcast(self, t: torch.Tensor) -> None:
        """Broadcast ``t`` from the group's rank 0, timed and counted."""
        if not self.active:
            return
        start = time.perf_counter()
        dist.broadcast(t, src=self.src, group=self.group)
        self._sync_device(t)
        self.stats["time_comm_s"] += time.perf_counter() - start
        self.stats["broadcast_calls"] += 1
        self.stats["bytes_communicated"] += t.numel() * t.element_size()


class DistributedAlgorithm:
    """Interface shared by all algorithms (see :func:`empirical.algorithms.build_algorithm`).

    Training loop, per local step::

        action = algo.next_action()
        if action == "grad":
            for i, batch in enumerate(micro_batches):      # A micro-batches
                ctx = algo.no_sync() if i < A - 1 else contextlib.nullcontext()
                with ctx:
                    (loss_fn(algo.model(batch)) / A).backward()
        info = algo.step()

    On a pull step the trainer skips forward/backward (and, with
    ``config.discard_batch_on_pull``, consumes and drops the step's batches).
    """

    config: AlgorithmConfig
    model: nn.Module
    inner_optimizer: torch.optim.Optimizer
    t: int
    stats: dict[str, Any]

    def next_action(self) -> str:
        """``"grad"`` or ``"pull"`` for step ``t`` (a pure function of ``t``)."""
        raise NotImplementedError

    def no_sync(self) -> contextlib.AbstractContextManager[Any]:
        """Context for micro-batches ``1..A-1`` of gradient accumulation (no-op by default)."""
        return contextlib.nullcontext()

    def step(self) -> StepInfo:
        """Finish local step ``t`` (see the subclasses)."""
        raise NotImplementedError

    def anchor_state_dict(self) -> dict[str, torch.Tensor]:
        """Model state with the anchor ``z`` as parameters (a copy)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Algorithm state (not the model, not the inner optimizer)."""
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; the model and inner optimizer are restored by the caller."""
        raise NotImplementedError

    def memory_bytes(self) -> dict[str, int]:
        """Bytes held by the algorithm itself, by component (not the model or inner optimizer)."""
        return {}

    # ------------------------------------------------------------------ shared helpers
    def _clip(self, params: list[torch.Tensor]) -> None:
        if self.config.clip_grad_norm is not None:
            grads = [p for p in params if p.grad is not None]
            if grads:
                torch.nn.utils.clip_grad_norm_(grads, self.config.clip_grad_norm)

    def _check_state_name(self, state: dict[str, Any]) -> None:
        cfg = state.get("config", {})
        for key in ("name", "outer"):
            if key in cfg and cfg[key] != getattr(self.config, key):
                raise UserInputError(
                    f"checkpoint was written with {key}={cfg[key]!r}, this run uses "
                    f"{key}={getattr(self.config, key)!r}"
                )


@contextlib.contextmanager
def timed(stats: dict[str, Any], key: str) -> Iterator[None]:
    """Add the wall time of the block to ``stats[key]``."""
    start = time.perf_counter()
    try:
        yield
    finally:
        stats[key] += time.perf_counter() - start
