"""The trainer's monitoring part (:class:`Monitor`): the finiteness check before records
and checkpoints, the evaluation of the global model (the anchor), the step times and the
train records."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from empirical import models
from empirical.distributed import barrier
from empirical.timing import DeviceClock
from empirical.train.outcomes import Diverged
from empirical.train.records import Records
from empirical.train.state import RunState

__all__ = ["Monitor"]

#: evaluation results that are not reported as ``eval_*`` fields
_EVAL_INTERNAL = ("loss_sum", "count", "batches")


class Monitor:
    """What the run in ``state`` measures, written through ``records``.

    ``clock`` times the steps (``wall_s``); ``eval_model`` and ``eval_loader`` (rank 0,
    with an evaluation split; else ``None``) evaluate the global model. Build it after a
    resume: the algorithm's communication and pull times counted so far are the baseline
    of the next time totals.
    """

    def __init__(
        self,
        state: RunState,
        records: Records,
        clock: DeviceClock,
        eval_model: nn.Module | None,
        eval_loader: Any,
    ) -> None:
        self.state, self.records, self.clock = state, records, clock
        self.eval_model, self.eval_loader = eval_model, eval_loader
        device = state.device
        self._bad_pending = torch.full((), math.inf, dtype=torch.float64, device=device)
        stats = state.algo.stats
        self._seen = {k: float(stats[k]) for k in ("time_comm_s", "time_pull_s")}
        self.samples_per_seq = state.cfg.seq_len if state.prep.task == "lm" else 1

    def check_finite(self, step: int, params: bool) -> None:
        """Collective: raise Diverged (on every rank) if any rank saw a non-finite loss
        or, with ``params``, holds non-finite parameters. Runs before every train record and
        every checkpoint, so no checkpoint ever holds a diverged state."""
        inf = torch.tensor(math.inf, dtype=torch.float64, device=self.state.device)
        bad = torch.stack([self._bad_pending.clone(), inf])
        st = self.state  # stacked workers: their (K, n) parameters and the anchor
        tensors = st.algo.params if st.stacked else st.model.parameters()
        if params and not all(bool(torch.isfinite(p).all()) for p in tensors):
            bad[1] = float(step)
        dist.all_reduce(bad, op=dist.ReduceOp.MIN)
        loss_step, param_step = float(bad[0].item()), float(bad[1].item())
        if math.isfinite(loss_step):
            raise Diverged(int(loss_step), "loss")
        if math.isfinite(param_step):
            raise Diverged(int(param_step), "parameters")

    def note_loss(self, loss: torch.Tensor, step: int, count: int = 1) -> None:
        """Add a step's loss to the window (``count`` > 1: the sum of that many workers'
        losses, stacked workers); remember the first non-finite step. Device kernels only:
        the step number enters as a kernel argument, nothing is copied to or read from the
        device (no host synchronisation)."""
        counters = self.state.counters
        counters.loss_sum += loss
        counters.loss_count += count
        first_bad = ~torch.isfinite(loss) & ~torch.isfinite(self._bad_pending)
        self._bad_pending.masked_fill_(first_bad, float(step))

    # ------------------------------------------------------------------ evaluation
    def global_state(self, device: torch.device | str | None = None) -> tuple[dict[str, Any], str]:
        """Collective: the state of the global model (on ``device`` if given, else on the
        model's), and what it is.

        With an anchor (PALSGD, DiLoCo, outer SGD; DDP, where ranks agree) that is the
        anchor. Local SGD with plain averaging keeps no anchor copy, so between syncs the
        global model is the workers' average, formed here with one all-reduce per
        floating-point tensor (with ``device`` elsewhere, through a copy of that tensor
        alone on the model's device) that is not counted in the training statistics.
        """
        st = self.state
        state = st.algo.anchor_state_dict(device=device)
        if st.stacked:  # one process: the anchor, or the workers' average formed there
            return state, st.algo.evaluated()
        if not st.algo.anchorless() or st.world == 1:
            return state, "anchor"
        for val in state.values():
            if val.is_floating_point():
                work = val.to(st.device)  # the tensor itself when it is on the device
                dist.all_reduce(work)
                work.div_(st.world)
                if work is not val:
                    val.copy_(work)
        return state, "average"

    def evaluate(self, step: int) -> None:
        """Collective: evaluate the global model on rank 0 and write an eval record."""
        st = self.state
        state, evaluated = self.global_state()
        if self.eval_model is not None:
            self.eval_model.load_state_dict(state)
            with torch.random.fork_rng(devices=[]):
                res = models.evaluate(
                    self.eval_model,
                    self.eval_loader,
                    st.prep.task,
                    max_batches=st.cfg.eval_batches,
                )
            rec: dict[str, Any] = {"step": step}
            rec.update({f"eval_{k}": v for k, v in res.items() if k not in _EVAL_INTERNAL})
            rec["evaluated"] = evaluated
            rec["eval_samples"] = res.get("count")
            rec["wall_s"] = st.counters.totals.wall_s
            st.counters.last_eval = self.records.write("eval", rec)
        barrier(st.world)

    # ------------------------------------------------------------------ times and records
    def resolve_times(self) -> None:
        """Fold the step times recorded since the last call into the time totals (one wait
        for the GPU's CUDA events; nothing to wait for on the CPU)."""
        algo, totals = self.state.algo, self.state.counters.totals
        algo.resolve_timings()
        self.clock.resolve()
        wall = float(self.clock.stats.pop("wall_s", 0.0))
        comm = float(algo.stats["time_comm_s"]) - self._seen["time_comm_s"]
        pull = float(algo.stats["time_pull_s"]) - self._seen["time_pull_s"]
        self._seen = {k: float(algo.stats[k]) for k in ("time_comm_s", "time_pull_s")}
        totals.wall_s += wall
        totals.comm_s += comm
        totals.pull_s += pull
        totals.compute_s += max(wall - comm - pull, 0.0)

    def window_loss(self) -> float | None:
        """Collective: the mean loss over every rank's steps since the last record."""
        st, counters = self.state, self.state.counters
        count = torch.tensor(float(counters.loss_count), dtype=torch.float64, device=st.device)
        window = torch.stack([counters.loss_sum.to(torch.float64), count])
        dist.all_reduce(window)
        total, steps = float(window[0].item()), int(window[1].item())
        counters.loss_sum.zero_()
        counters.loss_count = 0
        counters.tokens += steps * st.cfg.A * st.cfg.batch_size * self.samples_per_seq
        return total / steps if steps else None

    def log(self, step: int) -> None:
        """Collective: write the train record of ``step``."""
        st, counters = self.state, self.state.counters
        self.resolve_times()
        loss = self.window_loss()
        if loss is not None:
            counters.last_loss = loss
        s = dict(st.algo.stats)
        totals = counters.totals
        rec = {
            "step": step,
            "loss": loss,
            "grad_steps": s.get("grad_steps"),
            "pull_steps": s.get("pull_steps"),
            "syncs": s.get("syncs"),
            "allreduce_calls": s.get("allreduce_calls"),
            "bytes_communicated": s.get("bytes_communicated"),
            "time_compute_s": totals.compute_s,
            "time_comm_s": totals.comm_s,
            "time_pull_s": totals.pull_s,
            "wall_s": totals.wall_s,
            "consensus": s.get("last_consensus"),
            "lr": st.lr,
            "tokens": counters.tokens,
        }
        self.records.write("train", rec)
        if loss is not None:
            self.records.show(loss=f"{loss:.4f}", syncs=s.get("syncs"))
