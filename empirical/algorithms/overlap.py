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
  the new anchor. The consensus statistic (of the models that were sent; kept on the
  device until :meth:`~empirical.algorithms.sync.Sync.resolve_consensus` reads it, as for
  the blocking sync) and the buffer policy are applied then.

The work buffer holds the reduction while it is in flight (the warm-up, which also uses
it, ends before the first sync), so the overlap costs no memory beyond the anchor, which
the overlapped sync needs even for plain Local SGD. ``finish()`` lands an update still in
flight (the trainer calls it after the last step). A checkpoint taken inside the window
waits for the reduction and stores its sum with the step it lands after; the resumed run
lands it at that step, so resume stays bitwise.
"""

from __future__ import annotations

from typing import Any

import torch

from core.errors import UserInputError
from empirical.algorithms.base import PendingReduce
from empirical.algorithms.sync import Sync, SyncInFlight, sq_norm

__all__ = ["OverlappedSync"]


class OverlappedSync(Sync):
    """The overlapped sync (module docstring): :meth:`run` starts it, :meth:`finish` lands
    it (after step ``land_after``, or at the end of training)."""

    def lands_after(self, s: int) -> bool:
        """True when the sync in flight lands after local step ``s``."""
        return self.in_flight is not None and s == self.in_flight.land_after

    def run(self, s: int) -> None:
        """The sync after step ``s``: start the all-reduce of ``Delta_k``, ``x_k <- z``."""
        with self.clock.region("time_sync_s"):
            self._start(s)

    @torch.no_grad()
    def _start(self, s: int) -> None:
        due = self.consensus_due()
        buf = self.fill_buffer(True, due)
        reduce = self.comm.all_reduce_sum_async(buf)
        self.in_flight = SyncInFlight(reduce, s + self.config.sync_delay, due)
        self.anchor.reset_workers()
        self.stats["syncs"] += 1

    @torch.no_grad()
    def _land(self) -> None:
        """The outer step of the sync in flight (module docstring)."""
        flight, self.in_flight = self.in_flight, None
        fm, anchor = self.model, self.anchor
        assert flight is not None and anchor.z is not None
        flight.reduce.wait()
        buf = fm.work()[: fm.n_sync]
        if self.comm.size > 1:
            buf.div_(self.comm.size)
        delta, mean_sq = buf[: fm.n], buf[fm.n_sync - 1]
        if flight.consensus_due:
            # a device scalar, as the blocking sync keeps it: read by resolve_consensus()
            # when the statistics are logged, so a landing never waits for the device
            self.consensus_pending = (mean_sq - sq_norm(delta)).clamp_min(0.0)
        elif not self.comm.active:
            self.consensus_pending = None
            self.stats["last_consensus"] = 0.0
        fm.shift(anchor.z, anchor.z_views, -1.0)
        if anchor.outer is None:  # averaging: z <- z - Delta = mean_k x_k
            anchor.z.sub_(delta)
            self.stats["outer_steps"] += 1
        else:
            self.stats["outer_steps"] += anchor.outer.step(delta)
        fm.shift(anchor.z, anchor.z_views, 1.0)
        anchor.apply_buffer_policy(buf)

    def finish(self) -> bool:
        """Land the update in flight now; ``True`` if one landed."""
        if self.in_flight is None:
            return False
        with self.clock.region("time_sync_s"):
            self._land()
        return True

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any] | None:
        """The sync in flight for a checkpoint: its reduced sum (waited for here), the step
        it lands after, whether its consensus is due."""
        flight = self.in_flight
        if flight is None:
            return None
        flight.reduce.wait()
        return {
            "land_after": flight.land_after,
            "consensus_due": flight.consensus_due,
            "sum": self.model.work()[: self.model.n_sync].detach().clone(),
        }

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        self.consensus_pending = None
        self.in_flight = None
        if state is None:
            return
        fm = self.model
        if state["sum"].numel() != fm.n_sync:
            raise UserInputError(
                f"checkpoint's sync in flight holds {state['sum'].numel()} values, this "
                f"model's sync buffer {fm.n_sync}"
            )
        fm.work()[: fm.n_sync].copy_(state["sum"].to(fm.device))
        done = PendingReduce(None, 0.0, self.comm)
        self.in_flight = SyncInFlight(done, int(state["land_after"]), bool(state["consensus_due"]))
