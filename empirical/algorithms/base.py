"""Common machinery of the distributed algorithms: the step result, statistics, and a small
communicator that counts and times its collectives."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from core.errors import UserInputError
from empirical.algorithms.config import AlgorithmConfig
from empirical.algorithms.outer import OuterOptimizer
from empirical.timing import DeviceClock

__all__ = [
    "StepInfo",
    "StepResult",
    "DistributedAlgorithm",
    "Communicator",
    "PendingReduce",
    "new_stats",
]


@dataclass
class StepInfo:
    """Result of :meth:`DistributedAlgorithm.step`.

    ``action``: ``"grad"`` or ``"pull"``; ``synced``: a sync (outer step, workers reset to
    the anchor) happened right after this step (with an overlapped sync: started); ``t``:
    local steps done after this step (the authors' ``global_step``; the step just taken had
    index ``t - 1``); ``landed``: the outer step of an overlapped sync landed right after
    this step.
    """

    action: str
    synced: bool
    t: int
    landed: bool = False


@dataclass
class StepResult:
    """Result of :meth:`DistributedAlgorithm.train_step`: the step's :class:`StepInfo`, the
    mean loss over its micro-batches (a detached float64 0-d tensor on the model's device;
    ``None`` on a pull step) and the number of micro-batches drawn from the data."""

    info: StepInfo
    loss: torch.Tensor | None
    batches: int


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
        "discarded_backward_steps": 0,
    }


class Communicator:
    """Collectives on ``group`` (default: the world) that update ``stats``.

    With no initialised process group, or a group of size 1, every collective is a no-op
    (single-process runs need no launcher). ``torch.distributed.all_reduce`` is looked up
    at call time, so a test can count the calls by patching it.

    ``delay`` (bytes -> seconds), if given, is slept after every all-reduce and added to
    ``time_comm_s`` (an emulated slow link, :mod:`empirical.algorithms.slowlink`).

    Times go through ``clock`` (:class:`empirical.timing.DeviceClock` on ``stats``): CUDA
    events read at log time on a GPU, so a collective never forces a synchronisation.
    """

    def __init__(
        self,
        group: Any,
        stats: dict[str, Any],
        delay: Callable[[int], float] | None = None,
        clock: DeviceClock | None = None,
    ) -> None:
        self.group = group
        self.stats = stats
        self.delay = delay
        self.clock = clock if clock is not None else DeviceClock("cpu", stats)
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

    def all_reduce_sum(self, buf: torch.Tensor) -> None:
        """In-place SUM all-reduce of ``buf`` (one call), timed and counted."""
        if not self.active:
            return
        with self.clock.region("time_comm_s"):
            dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=self.group)
        nbytes = buf.numel() * buf.element_size()
        if self.delay is not None:
            start = time.perf_counter()
            time.sleep(max(self.delay(nbytes), 0.0))
            self.clock.add_seconds("time_comm_s", time.perf_counter() - start)
        self.stats["allreduce_calls"] += 1
        self.stats["bytes_communicated"] += nbytes

    def all_reduce_sum_async(self, buf: torch.Tensor) -> PendingReduce:
        """Start an in-place SUM all-reduce of ``buf`` (``async_op=True``), counted now;
        :meth:`PendingReduce.wait` finishes it. With an emulated slow link the delay runs
        from the moment the collective completes, while the caller computes."""
        nbytes = buf.numel() * buf.element_size()
        if not self.active:
            return PendingReduce(None, 0.0, self)
        work = dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=self.group, async_op=True)
        self.stats["allreduce_calls"] += 1
        self.stats["bytes_communicated"] += nbytes
        delay = 0.0 if self.delay is None else max(self.delay(nbytes), 0.0)
        return PendingReduce(work, delay, self)

    def broadcast(self, t: torch.Tensor) -> None:
        """Broadcast ``t`` from the group's rank 0, timed and counted."""
        if not self.active:
            return
        with self.clock.region("time_comm_s"):
            dist.broadcast(t, src=self.src, group=self.group)
        self.stats["broadcast_calls"] += 1
        self.stats["bytes_communicated"] += t.numel() * t.element_size()


class PendingReduce:
    """An all-reduce in flight (:meth:`Communicator.all_reduce_sum_async`).

    :meth:`wait` blocks until the collective has completed and, with an emulated slow link,
    until ``delay`` seconds after its completion; only the time it blocks, the exposed
    communication, is added to ``time_comm_s``. Waiting twice is free.
    """

    def __init__(self, work: Any, delay: float, comm: Communicator) -> None:
        self.work, self.delay, self.comm = work, float(delay), comm
        self.done = work is None
        self._completed_at: float | None = None
        if work is not None and self.delay > 0:
            work.get_future().add_done_callback(self._note_completion)

    def _note_completion(self, _fut: Any) -> None:
        self._completed_at = time.perf_counter()

    def wait(self) -> None:
        """Finish the all-reduce (and the emulated link's delay)."""
        if self.done:
            return
        with self.comm.clock.region("time_comm_s"):
            self.work.wait()
        if self.delay > 0:
            # the link's delay runs from the collective's completion (the callback may
            # not have run yet when wait() returns: then from now)
            completed = self._completed_at or time.perf_counter()
            left = completed + self.delay - time.perf_counter()
            if left > 0:
                time.sleep(left)
            self.comm.clock.add_seconds("time_comm_s", max(left, 0.0))
        self.done = True


class DistributedAlgorithm:
    """Interface shared by all algorithms (see :func:`empirical.algorithms.build_algorithm`).

    The simplest loop lets the algorithm drive the micro-batches, so that pull steps,
    discarded batches, gradient accumulation and the interleaved outer steps are right by
    construction::

        for _ in range(T):
            res = algo.train_step(next_batch, loss_fn, micro_batches=A)  # StepResult

    The same by hand, per local step::

        action = algo.next_action()
        if action == "grad":
            for i, batch in enumerate(micro_batches):      # A micro-batches
                ctx = algo.no_sync() if i < A - 1 else contextlib.nullcontext()
                with ctx:
                    (loss_fn(algo.model, batch) / A).backward()
                algo.micro_batch_done()
        elif algo.config.discard_batch_on_pull:
            ...draw and drop A micro-batches...
        info = algo.step()

    A backward pass on a pull step is discarded with a ``RuntimeWarning``.
    """

    config: AlgorithmConfig
    model: nn.Module
    inner_optimizer: torch.optim.Optimizer
    t: int
    stats: dict[str, Any]
    params: list[nn.Parameter]
    clock: DeviceClock

    def _start(
        self, config: AlgorithmConfig, model: nn.Module, inner_optimizer: torch.optim.Optimizer
    ) -> None:
        """The state every algorithm starts from: its config and inner optimizer, step
        ``t = 0``, fresh :func:`new_stats`, the trainable parameters of ``model``."""
        self.config = config
        self.inner_optimizer = inner_optimizer
        self.t = 0
        self.stats = new_stats()
        self.params = [p for p in model.parameters() if p.requires_grad]

    def next_action(self) -> str:
        """``"grad"`` or ``"pull"`` for step ``t`` (a pure function of ``t``)."""
        raise NotImplementedError

    @property
    def outer(self) -> OuterOptimizer | None:
        """The outer optimizer acting on the anchor (``None`` without one)."""
        return None

    def anchorless(self) -> bool:
        """True when no rank stores the global model, so that it must be formed as the
        workers' average (Local SGD with blocking averaging between syncs); False when
        :meth:`anchor_state_dict` is the global model."""
        return False

    def no_sync(self) -> contextlib.AbstractContextManager[Any]:
        """Context for micro-batches ``1..A-1`` of gradient accumulation (no-op by default)."""
        return contextlib.nullcontext()

    def step(self, scaler: Any = None) -> StepInfo:
        """Finish local step ``t`` (see the subclasses); ``scaler``: an optional
        ``torch.amp.GradScaler`` that scaled the loss."""
        raise NotImplementedError

    def micro_batch_done(self) -> None:
        """Call after each micro-batch's backward (used by the interleaved outer steps of
        the reference-faithful mode; a no-op by default)."""

    def train_step(
        self,
        next_batch: Callable[[], Any],
        loss_fn: Callable[[nn.Module, Any], torch.Tensor],
        *,
        micro_batches: int = 1,
        scaler: Any = None,
        autocast: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
    ) -> StepResult:
        """One local step, micro-batches included.

        ``next_batch()`` returns the next micro-batch; ``loss_fn(model, batch)`` its mean
        loss. A gradient step draws ``micro_batches`` batches and back-propagates
        ``loss / micro_batches`` of each (the first ``micro_batches - 1`` under
        :meth:`no_sync`, forward under ``autocast()`` if given, the loss scaled by
        ``scaler`` if given); a pull step runs no forward/backward and, with
        ``config.discard_batch_on_pull``, draws and drops ``micro_batches`` batches.
        """
        a = int(micro_batches)
        if a < 1:
            raise UserInputError(f"'micro_batches' must be >= 1, got {micro_batches!r}")
        action = self.next_action()
        loss_out: torch.Tensor | None = None
        drawn = 0
        if action == "grad":
            acc = None
            for i in range(a):
                batch = next_batch()
                drawn += 1
                ctx = self.no_sync() if i < a - 1 else contextlib.nullcontext()
                with ctx:
                    with autocast() if autocast is not None else contextlib.nullcontext():
                        loss = loss_fn(self.model, batch)
                    scaled = loss / a
                    if scaler is not None:
                        scaled = scaler.scale(scaled)
                    scaled.backward()
                value = loss.detach().to(torch.float64)
                acc = value if acc is None else acc + value
                self.micro_batch_done()
            assert acc is not None
            loss_out = acc / a
        elif self.config.discard_batch_on_pull:
            for _ in range(a):
                next_batch()
                drawn += 1
        info = self.step() if scaler is None else self.step(scaler=scaler)
        return StepResult(info=info, loss=loss_out, batches=drawn)

    def finish(self) -> bool:
        """Land an overlapped sync's outer step still in flight (at the end of training);
        ``True`` if one landed. A no-op for the blocking algorithms."""
        return False

    def resolve_timings(self) -> None:
        """Add the device-timed intervals recorded so far to ``stats`` (waits once on a GPU)."""
        self.clock.resolve()

    def anchor_state_dict(
        self, device: torch.device | str | None = None
    ) -> dict[str, torch.Tensor]:
        """Model state with the anchor ``z`` as parameters (a copy; on ``device`` when given,
        each tensor copied there directly, so that no second copy of the model is made on
        the model's device)."""
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

    def _inner_step(self, p: float, scaler: Any = None) -> None:
        """Unscale (with ``scaler``), clip, and the inner optimizer's step with every group's
        learning rate divided by ``1 - p`` (restored afterwards; a plain step for ``p = 0``);
        ``scaler.step`` skips the step when the gradients hold inf/NaN, then
        ``scaler.update``."""
        opt = self.inner_optimizer
        if scaler is not None:
            scaler.unscale_(opt)
        self._clip(self.params)
        groups = opt.param_groups
        saved = [g["lr"] for g in groups]
        with self.clock.region("time_inner_step_s"):
            try:
                if p != 0:
                    for g, lr in zip(groups, saved, strict=True):
                        g["lr"] = lr / (1.0 - p)
                if scaler is not None:
                    scaler.step(opt)
                else:
                    opt.step()
            finally:
                for g, lr in zip(groups, saved, strict=True):
                    g["lr"] = lr
        if scaler is not None:
            scaler.update()

    def _check_state_name(self, state: dict[str, Any]) -> None:
        cfg = state.get("config", {})
        for key in ("name", "outer"):
            if key in cfg and cfg[key] != getattr(self.config, key):
                raise UserInputError(
                    f"checkpoint was written with {key}={cfg[key]!r}, this run uses "
                    f"{key}={getattr(self.config, key)!r}"
                )
