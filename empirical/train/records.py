"""The run's records: ``config.json``, the metrics writer and progress bar, the start,
resume, stop and failure events, ``summary.json`` and the final line, and the export of
the anchor."""

from __future__ import annotations

import contextlib
import os
import platform
import sys
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from empirical.config import config_to_dict
from empirical.export import export_anchor, run_name
from empirical.metrics import MetricsWriter, package_versions
from empirical.train.options import PROG
from empirical.train.outcomes import EXIT_DIVERGED, EXIT_NO_RESOURCES, CheckpointFailed, Diverged
from theory.io import atomic_write_json

__all__ = ["RunRecords"]

#: statuses of a run that ended on an error (no final summary line on stdout)
_FAILED = ("diverged", "no_space", "failed")


class RunRecords:
    """Record keeping of :class:`~empirical.train.trainer.Trainer`."""

    def _open_records(self) -> None:
        """``config.json``, the metrics writer (continuing a resumed run's files) and the
        progress bar; the start or resume event."""
        cfg = self.cfg
        out = Path(cfg.output_dir)
        self.run_id = os.environ.get("PALSGD_RUN_ID")
        if self.main:
            out.mkdir(parents=True, exist_ok=True)
            atomic_write_json(out / "config.json", config_to_dict(cfg))
            if self.prep.stability.status != "ok":
                print(f"{PROG}: warning: {self.prep.stability.message}", file=sys.stderr)
        self.run_name = cfg.run_name or run_name(cfg, self.world // cfg.shards)
        self.writer = MetricsWriter(
            out,
            enabled=self.main,
            tensorboard=cfg.tensorboard,
            resume_position=self.metrics_position,
            start_step=self.start_step + 1 if self.resumed_from else 0,
            wandb_project=cfg.wandb_project,
            run_name=self.run_name,
            run_config=config_to_dict(cfg),
        )
        self.bar = None
        if self.main and cfg.progress:
            self.bar = tqdm(
                total=cfg.T, initial=self.start_step, desc="train", unit="step", dynamic_ncols=True
            )
        if self.resumed_from:
            self._resume_event()
        else:
            self.writer.write("event", {"event": "start", "step": 0, "world_size": self.world})
            if cfg.eval_interval > 0:
                self._evaluate(0)

    def _changes(self) -> dict[str, dict[str, Any]]:
        return {k: {"checkpoint": o, "now": n} for k, (o, n) in self.changed.items()}

    def _resume_event(self) -> None:
        event = {"event": "resume", "step": self.start_step, "checkpoint": self.resumed_from}
        if self.changed:
            event["changed"] = self._changes()
            if self.main:
                text = ", ".join(f"{k} {o!r} -> {n!r}" for k, (o, n) in self.changed.items())
                print(
                    f"{PROG}: resumed at step {self.start_step} with changed "
                    f"hyperparameters (--allow-changed): {text}",
                    file=sys.stderr,
                )
        self.writer.write("event", event)

    # ------------------------------------------------------------------ failures
    def _checkpoint_failed(self, exc: CheckpointFailed) -> tuple[str, int, str]:
        status = "no_space" if "space" in exc.why.lower() else "failed"
        last = str(exc.last) if exc.last else "none"
        message = (
            f"the checkpoint of step {exc.step} could not be written ({exc.why}); its "
            f"partial files were removed; last complete checkpoint: {last} (free "
            "space and continue with --resume auto)"
        )
        with contextlib.suppress(OSError):
            self.writer.write("event", {"event": "checkpoint_failed", "step": exc.step})
        if self.main:
            print(f"{PROG}: error: {message}", file=sys.stderr)
        return status, EXIT_NO_RESOURCES, message

    def _diverged(self, exc: Diverged) -> tuple[str, int, str]:
        last = str(self.last_checkpoint) if self.last_checkpoint else "none"
        found = (
            "first such step over all ranks"
            if exc.where == "loss"
            else "found by the check before writing the checkpoint"
        )
        message = (
            f"training diverged: non-finite {exc.where} at step {exc.step} ({found}; "
            f"stopped at step {int(self.algo.t)}); last good checkpoint: {last}"
        )
        self.writer.write("event", {"event": "diverged", "step": exc.step, "message": message})
        if self.main:
            print(f"{PROG}: error: {message}", file=sys.stderr)
        return "diverged", EXIT_DIVERGED, message

    # ------------------------------------------------------------------ the end
    def _close_records(self, status: str, code: int, message: str, elapsed: float) -> None:
        """``summary.json`` and the final line on rank 0; close the writer."""
        if self.main:
            try:
                self._summary(status, message, elapsed)
            except OSError as exc:
                if code == 0:
                    raise
                print(f"{PROG}: warning: summary.json not written: {exc}", file=sys.stderr)
            if status not in _FAILED:
                loss = "n/a" if self.last_loss is None else f"{self.last_loss:.4f}"
                ev = (self.last_eval or {}).get("eval_loss")
                ev_text = "" if ev is None else f", anchor eval loss {ev:.4f}"
                print(
                    f"{PROG}: {status} at step {int(self.algo.t)}/{self.cfg.T}: train loss "
                    f"{loss}{ev_text}; metrics in {Path(self.cfg.output_dir)}"
                )
        self.writer.close()

    def _totals(self, s: dict[str, Any], elapsed: float) -> dict[str, Any]:
        """The run's counters (``s``: the algorithm's statistics) and times."""
        return {
            **{k: v for k, v in s.items() if isinstance(v, int | float | None)},
            "time_compute_s": self.totals.compute_s,
            "time_comm_s": self.totals.comm_s,
            "time_pull_s": self.totals.pull_s,
            "wall_s": self.totals.wall_s,
            "elapsed_s_this_run": elapsed,
            "tokens": self.tokens,
            "parameters": sum(p.numel() for p in self.model.parameters()),
        }

    def _hardware(self) -> dict[str, Any]:
        cuda = torch.cuda.is_available()
        return {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpu_count": os.cpu_count(),
            "device": str(self.device),
            "cuda": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if cuda
            else [],
            "torch_threads": torch.get_num_threads(),
        }

    def _summary(self, status: str, message: str, elapsed: float) -> None:
        stats = dict(self.algo.stats)
        self._resolve_times()
        summary = {
            "status": status,
            "message": message,
            "run_id": self.run_id,
            "run_name": self.run_name,
            "changed_on_resume": self._changes(),
            "export_dir": self.cfg.export_dir if status == "finished" else None,
            "step": int(self.algo.t),
            "T": self.cfg.T,
            "world_size": self.world,
            "backend": str(self.dist.get_backend()),
            "resumed_from": self.resumed_from,
            "last_checkpoint": str(self.last_checkpoint) if self.last_checkpoint else None,
            "config": config_to_dict(self.cfg),
            "algorithm": self.prep.algorithm.to_dict(),
            "pull_coefficient": self.prep.stability.coefficient,
            "totals": self._totals(stats, elapsed),
            "final": {"train_loss": self.last_loss, "eval": self.last_eval},
            "versions": package_versions(("torch", "transformers", "numpy", "palsgd-toolkit")),
            "hardware": self._hardware(),
        }
        atomic_write_json(Path(self.cfg.output_dir) / "summary.json", summary)

    def _export(self) -> None:
        """Collective: write the anchor (the global model) to ``export_dir`` on rank 0,
        through host memory (no model copy is made on the device)."""
        state, _ = self._global_state(device="cpu")
        if self.main:
            template = self.model if self.plain_model is None else self.plain_model
            path = export_anchor(template, state, self.cfg.export_dir, self.cfg.model)
            print(f"{PROG}: exported the anchor to {path}", file=sys.stderr)
        self._barrier()
