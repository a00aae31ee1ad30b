"""Emulated slow link: an injected delay on every all-reduce, to test a cost model on one machine.

A real network adds, per all-reduce call of ``n`` payload bytes, a latency and a transfer
time. On a single machine (gloo over loopback) both are tiny, so the cost model
(:mod:`empirical.cost`) could not be checked against a slow link. With
:class:`~empirical.algorithms.AlgorithmConfig` fields ``comm_delay_s`` (seconds per call)
and ``comm_delay_per_byte_s`` (seconds per payload byte), each all-reduce issued by an
algorithm is followed by an extra delay of

    ``comm_delay_s + n * comm_delay_per_byte_s``   seconds,

on top of the real all-reduce. The emulated link is serial: a call's delay starts when the
real collective has finished and the link has finished the delays of earlier calls.

* Local SGD / Post-Local SGD / DiLoCo / PALSGD (:class:`~empirical.algorithms.base.Communicator`):
  the caller blocks for the delay (its all-reduces are blocking anyway).
* DDP: :func:`delayed_allreduce_hook` is a DDP communication hook; it all-reduces each
  gradient bucket asynchronously and completes the bucket's future only after the delay,
  which runs on a timer thread, so the backward pass keeps computing meanwhile (DDP's
  overlap of communication with backward is preserved).

Both delays are 0 by default: nothing is injected and no hook is registered.
(No ``from __future__ import annotations`` here: DDP compares the hook's annotations
with ``dist.GradBucket`` and ``torch.futures.Future[torch.Tensor]`` at registration.)
"""

import threading
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["link_delay_fn", "SerialLinkClock", "SlowLinkState", "delayed_allreduce_hook"]


def link_delay_fn(delay_s: float, delay_per_byte_s: float) -> Callable[[int], float] | None:
    """``n -> delay_s + n * delay_per_byte_s`` (seconds), or ``None`` when both are 0."""
    if delay_s == 0 and delay_per_byte_s == 0:
        return None
    a, b = float(delay_s), float(delay_per_byte_s)

    def delay(nbytes: int) -> float:
        return a + b * float(nbytes)

    return delay


class SerialLinkClock:
    """When a serial link becomes free: each reservation starts no earlier than the end of
    the previous one. Thread safe (DDP completes buckets on gloo's threads)."""

    def __init__(self) -> None:
        self._free_at = 0.0
        self._lock = threading.Lock()

    def reserve(self, seconds: float) -> float:
        """Book ``seconds`` of link time from now (or from when the link frees up); return
        the ``time.perf_counter()`` instant at which the booking ends."""
        with self._lock:
            start = max(time.perf_counter(), self._free_at)
            self._free_at = start + seconds
            return self._free_at


class SlowLinkState:
    """State of :func:`delayed_allreduce_hook`: the delay function, the process group and the
    link's clock. Register with
    ``ddp_model.register_comm_hook(SlowLinkState(delay, group), delayed_allreduce_hook)``."""

    def __init__(self, delay: Callable[[int], float], group: Any = None) -> None:
        self.delay = delay
        self.group = group
        self.clock = SerialLinkClock()


def delayed_allreduce_hook(
    state: SlowLinkState, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: averaged all-reduce of a bucket plus an emulated link delay.

    The gradient is divided by the group size and all-reduced (SUM) asynchronously, as in
    torch's default ``allreduce_hook``; when the collective completes, the link is booked for
    ``state.delay(bucket bytes)`` seconds (:class:`SerialLinkClock`) and the returned future
    is completed by a timer thread at the end of the booking.
    """
    buf: torch.Tensor = bucket.buffer()
    buf.div_(dist.get_world_size(state.group))
    work = dist.all_reduce(buf, group=state.group, async_op=True)
    out: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    nbytes = buf.numel() * buf.element_size()

    def finish() -> None:
        out.set_result(buf)

    def on_done(fut: torch.futures.Future) -> None:
        try:
            fut.wait()
        except Exception as exc:  # noqa: BLE001 - handed to DDP through the future
            out.set_exception(exc)
            return
        wait = state.clock.reserve(state.delay(nbytes)) - time.perf_counter()
        if wait <= 0:
            finish()
        else:
            timer = threading.Timer(wait, finish)
            timer.daemon = True
            timer.start()

    work.get_future().add_done_callback(on_done)
    return out
