"""What the trainer measures while it runs: the finiteness check before records and
checkpoints, the evaluation of the global model (the anchor), the step times and the
train records."""

from __future__ import annotations

import math
from typing import Any

import torch

from empirical import models
from empirical.train.outcomes import Diverged

__all__ = ["Monitoring"]

#: evaluation results that are not reported as ``eval_*`` fields
_EVAL_INTERNAL = ("loss_sum", "count", "batches")


class Monitoring:
    """Monitoring steps of :class:`~empirical.train.trainer.Trainer`."""

    def _check_finite(self, step: int, params: bool) -> None:
        """Collective: raise Diverged (on every rank) if any rank saw a non-finite loss
        or, with ``params``, holds non-finite parameters. Runs before every train record and
        every checkpoint, so no checkpoint ever holds a diverged state."""
        inf = torch.tensor(math.inf, dtype=torch.float64, device=self.device)
        bad = torch.stack([self._bad_pending.clone(), inf])
        if params and not all(bool(torch.isfinite(p).all()) for p in self.model.parameters()):
            bad[1] = float(step)
        self.dist.all_reduce(bad, op=self.dist.ReduceOp.MIN)
        loss_step, param_step = float(bad[0].item()), float(bad[1].item())
        if math.isfinite(loss_step):
            raise Diverged(int(loss_step), "loss")
        if math.isfinite(param_step):
            raise Diverged(int(param_step), "parameters")

    def _note_loss(self, loss: torch.Tensor, step: int) -> None:
        """Add a step's loss to the window; remember the first non-finite step. Device
        kernels only: the step number enters as a kernel argument, nothing is copied to or
        read from the device (no host synchronisation)."""
        self.loss_sum += loss
        self.loss_count += 1
        first_bad = ~torch.isfinite(loss) & ~torch.isfinite(self._bad_pending)
        self._bad_pending.masked_fill_(first_bad, float(step))

    # ------------------------------------------------------------------ evaluation
    def _global_state(self, device: torch.device | str | None = None) -> tuple[dict[str, Any], str]:
        """Collective: the state of the global model (on ``device`` if given, else on the
        model's), and what it is.

        With an anchor (PALSGD, DiLoCo, outer SGD; DDP, where ranks agree) that is the
        anchor. Local SGD with plain averaging keeps no anchor copy, so between syncs the
        global model is the workers' average, formed here with one all-reduce per
        floating-point tensor (with ``device`` elsewhere, through a copy of that tensor
        alone on the model's device) that is not counted in the training statistics.
        """
        algo = self.algo
        state = algo.anchor_state_dict(device=device)
        anchorless = (
            hasattr(algo, "z") and algo.z is None and bool(getattr(algo, "local_started", False))
        )
        if not anchorless or self.world == 1:
            return state, "anchor"
        for val in state.values():
            if val.is_floating_point():
                work = val.to(self.device)  # the tensor itself when it is on the device
                self.dist.all_reduce(work)
                work.div_(self.world)
                if work is not val:
                    val.copy_(work)
        return state, "average"

    def _evaluate(self, step: int) -> None:
        """Collective: evaluate the global model on rank 0 and write an eval record."""
        state, evaluated = self._global_state()
        if self.eval_model is not None:
            self.eval_model.load_state_dict(state)
            with torch.random.fork_rng(devices=[]):
                res = models.evaluate(
                    self.eval_model,
                    self.eval_loader,
                    self.prep.task,
                    max_batches=self.cfg.eval_batches,
                )
            rec: dict[str, Any] = {"step": step}
            rec.update({f"eval_{k}": v for k, v in res.items() if k not in _EVAL_INTERNAL})
            rec["evaluated"] = evaluated
            rec["eval_samples"] = res.get("count")
            rec["wall_s"] = self.totals.wall_s
            self.last_eval = self.writer.write("eval", rec)
        self._barrier()

    # ------------------------------------------------------------------ times and records
    def _resolve_times(self) -> None:
        """Fold the step times recorded since the last call into ``totals`` (one wait for
        the GPU's CUDA events; nothing to wait for on the CPU)."""
        self.algo.resolve_timings()
        self.clock.resolve()
        wall = float(self.clock.stats.pop("wall_s", 0.0))
        comm = float(self.algo.stats["time_comm_s"]) - self._seen["time_comm_s"]
        pull = float(self.algo.stats["time_pull_s"]) - self._seen["time_pull_s"]
        self._seen = {k: float(self.algo.stats[k]) for k in ("time_comm_s", "time_pull_s")}
        self.totals.wall_s += wall
        self.totals.comm_s += comm
        self.totals.pull_s += pull
        self.totals.compute_s += max(wall - comm - pull, 0.0)

    def _window_loss(self) -> float | None:
        """Collective: the mean loss over every rank's steps since the last record."""
        count = torch.tensor(float(self.loss_count), dtype=torch.float64, device=self.device)
        window = torch.stack([self.loss_sum.to(torch.float64), count])
        self.dist.all_reduce(window)
        total, steps = float(window[0].item()), int(window[1].item())
        self.loss_sum.zero_()
        self.loss_count = 0
        self.tokens += steps * self.cfg.A * self.cfg.batch_size * self.samples_per_seq
        return total / steps if steps else None

    def _log(self, step: int) -> None:
        """Collective: write the train record of ``step``."""
        self._resolve_times()
        loss = self._window_loss()
        if loss is not None:
            self.last_loss = loss
        s = dict(self.algo.stats)
        rec = {
            "step": step,
            "loss": loss,
            "grad_steps": s.get("grad_steps"),
            "pull_steps": s.get("pull_steps"),
            "syncs": s.get("syncs"),
            "allreduce_calls": s.get("allreduce_calls"),
            "bytes_communicated": s.get("bytes_communicated"),
            "time_compute_s": self.totals.compute_s,
            "time_comm_s": self.totals.comm_s,
            "time_pull_s": self.totals.pull_s,
            "wall_s": self.totals.wall_s,
            "consensus": s.get("last_consensus"),
            "lr": self.lr,
            "tokens": self.tokens,
        }
        self.writer.write("train", rec)
        if self.bar is not None and loss is not None:
            self.bar.set_postfix(loss=f"{loss:.4f}", syncs=s.get("syncs"))
