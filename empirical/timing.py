"""Wall-clock accounting of a training step: compute, communication, pull.

On a GPU, kernels run asynchronously: a host timer read without synchronising measures
only the launch, and synchronising at every reading stalls the pipeline. :class:`DeviceClock`
therefore records CUDA events (``torch.cuda.Event(enable_timing=True)``) on a CUDA device
and reads them only when :meth:`DeviceClock.resolve` is called (the trainer does so when it
logs, checkpoints or finishes: one wait per log interval, none per step). On the CPU it
reads ``time.perf_counter`` at once. Times are in seconds.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, MutableMapping
from dataclasses import asdict, dataclass
from typing import Any

import torch

__all__ = ["DeviceClock", "Totals"]


@dataclass
class Totals:
    """Cumulative seconds of one rank (see :data:`empirical.metrics.TRAIN_FIELDS`)."""

    compute_s: float = 0.0
    comm_s: float = 0.0
    pull_s: float = 0.0
    wall_s: float = 0.0

    def state_dict(self) -> dict[str, float]:
        """For checkpoints."""
        return asdict(self)

    def load_state_dict(self, state: dict[str, float]) -> None:
        """Inverse of :meth:`state_dict`."""
        for key, val in state.items():
            setattr(self, key, float(val))


class DeviceClock:
    """Adds the duration of timed regions to ``stats[key]`` (seconds).

    ``device`` decides the clock: a CUDA device uses CUDA events on its current stream,
    resolved lazily by :meth:`resolve`; anything else the host clock, added at once.
    ``stats`` is any mutable mapping (the algorithms' statistics dict by default a new one).
    """

    def __init__(
        self, device: torch.device | str = "cpu", stats: MutableMapping[str, Any] | None = None
    ) -> None:
        dev = torch.device(device)
        self.cuda = dev.type == "cuda"
        self.device = dev
        self.stats: MutableMapping[str, Any] = {} if stats is None else stats
        self._pending: list[tuple[str, Any, Any]] = []

    def mark(self) -> Any:
        """A point in time: a recorded CUDA event, or ``time.perf_counter()``."""
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record(torch.cuda.current_stream(self.device))
            return ev
        return time.perf_counter()

    def add(self, key: str, start: Any, end: Any) -> None:
        """Add the time from mark ``start`` to mark ``end`` to ``stats[key]``."""
        if self.cuda:
            self._pending.append((key, start, end))
        else:
            self.stats[key] = self.stats.get(key, 0.0) + (end - start)

    def add_seconds(self, key: str, seconds: float) -> None:
        """Add a host-measured duration (a sleep, for instance) to ``stats[key]`` at once."""
        self.stats[key] = self.stats.get(key, 0.0) + float(seconds)

    @contextlib.contextmanager
    def region(self, key: str) -> Iterator[None]:
        """Time the block into ``stats[key]``."""
        start = self.mark()
        try:
            yield
        finally:
            self.add(key, start, self.mark())

    @property
    def pending(self) -> int:
        """Number of recorded intervals not yet read (always 0 on the CPU)."""
        return len(self._pending)

    def resolve(self) -> None:
        """Wait for the recorded events and add their intervals to ``stats`` (CUDA only)."""
        if not self._pending:
            return
        self._pending[-1][2].synchronize()
        for key, start, end in self._pending:
            self.stats[key] = self.stats.get(key, 0.0) + start.elapsed_time(end) / 1000.0
        self._pending.clear()
