"""The overlapped sync of the local algorithms (``AlgorithmConfig.sync_delay = tau >= 1``).

The update, as :mod:`theory.algorithm` writes it (and :mod:`theory.simulate` and
:func:`theory.moments.exact_moments` compute it):

* sync after local step ``s`` (the usual rule, :func:`theory.algorithm.is_sync_step`):
  the sync buffer is filled as for an outer optimizer (``Delta_k = z_r - x_k``, the
  floating-point buffers, the consensus scalar), its SUM all-reduce is started with
  ``async_op=True`` (:meth:`~empirical.algorithms.base.Communicator.all_reduce_sum_async`)
  and the worker restarts from the anchor it has, ``x_k <- z_r``; the outer state is not
  touched;
* steps ``s+1 .. s+tau`` run as usual while the all-reduce (and, on an emulated slow link,
  its delay) proceeds; pulls pull toward ``z_r``;
* right after step ``s + tau`` the update lands: wait for the all-reduce,
  ``Delta = mean_k Delta_k``, then ``x_k <- x_k - z_r``, the outer step
  ``z_r -> z_{r+1}`` on ``Delta`` (averaging: ``z_{r+1} = z_r - Delta``), and
  ``x_k <- x_k + z_{r+1}``: each worker keeps its ``tau`` steps of progress, shifted onto
  the new anchor. The consensus statistic (of the models that were sent) and the buffer
  policy are applied then.

The work buffer holds the reduction while it is in flight (the warm-up, which also uses
it, ends before the first sync), so the overlap costs no memory beyond the anchor, which
the overlapped sync needs even for plain Local SGD. ``finish()`` lands an update still in
flight (the trainer calls it after the last step). A checkpoint taken inside the window
waits for the reduction and stores its sum with the step it lands after; the resumed run
lands it at that step, so resume stays bitwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from empirical.algorithms.base import PendingReduce
from empirical.algorithms.local_comm import sq_norm

__all__ = ["OverlappedSync", "SyncInFlight"]


@dataclass
class SyncInFlight:
    """An overlapped sync between its start and its landing: the reduction, the step it
    lands after, and whether its consensus statistic is due."""

    reduce: PendingReduce
    land_after: int
    consensus_due: bool


class OverlappedSync:
    """Start and landing of the overlapped sync (mixed into
    :class:`~empirical.algorithms.local.LocalAlgorithm`)."""

    in_flight: SyncInFlight | None = None

    @torch.no_grad()
    def _start_sync(self, s: int) -> None:
        """The sync after step ``s``: start the all-reduce of ``Delta_k``, ``x_k <- z``."""
        due = self._consensus_due()
        buf = self._fill_sync_buffer(True, due)
        reduce = self.comm.all_reduce_sum_async(buf)
        self.in_flight = SyncInFlight(reduce, s + self.config.sync_delay, due)
        self._params_to_anchor()
        self.stats["syncs"] += 1

    def _shift_params(self, sign: float) -> None:
        """``x <- x + sign * z`` on every parameter."""
        assert self.z is not None
        if self.flat is not None:
            self.flat[: self.n].add_(self.z, alpha=sign)
            return
        for p, zv in zip(self.local_params, self.z_views, strict=True):
            p.add_(zv.to(p.dtype), alpha=sign)

    @torch.no_grad()
    def _land(self) -> None:
        """The outer step of the sync in flight (module docstring)."""
        flight, self.in_flight = self.in_flight, None
        assert flight is not None and self.z is not None
        flight.reduce.wait()
        buf = self._work_buffer()[: self.n_sync]
        if self.world_size > 1:
            buf.div_(self.world_size)
        delta, mean_sq = buf[: self.n], buf[self.n_sync - 1]
        if flight.consensus_due:
            consensus = float(mean_sq - sq_norm(delta))
            self.stats["last_consensus"] = max(consensus, 0.0)
        elif not self.comm.active:
            self.stats["last_consensus"] = 0.0
        self._shift_params(-1.0)
        if self.outer is None:  # averaging: z <- z - Delta = mean_k x_k
            self.z.sub_(delta)
            self.stats["outer_steps"] += 1
        else:
            self.stats["outer_steps"] += self.outer.step(delta)
        self._shift_params(1.0)
        self._apply_buffer_policy(buf)

    def finish(self) -> bool:
        """Land the update in flight now (after the last step); ``True`` if one landed."""
        if self.in_flight is None:
            return False
        with self.clock.region("time_sync_s"):
            self._land()
        return True

    # ------------------------------------------------------------------ state
    def _in_flight_state(self) -> dict[str, Any] | None:
        """The sync in flight for a checkpoint: its reduced sum (waited for here), the step
        it lands after, whether its consensus is due."""
        flight = self.in_flight
        if flight is None:
            return None
        flight.reduce.wait()
        return {
            "land_after": flight.land_after,
            "consensus_due": flight.consensus_due,
            "sum": self._work_buffer()[: self.n_sync].detach().clone(),
        }

    @torch.no_grad()
    def _load_in_flight(self, state: dict[str, Any] | None) -> None:
        self.in_flight = None
        if state is None:
            return
        total = state["sum"]
        self._work_buffer()[: self.n_sync].copy_(total.to(self.device))
        done = PendingReduce(None, 0.0, self.comm)
        self.in_flight = SyncInFlight(done, int(state["land_after"]), bool(state["consensus_due"]))
