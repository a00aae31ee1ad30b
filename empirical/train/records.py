"""The trainer's records part (:class:`Records`): ``config.json``, the metrics writer and
progress bar, the start, resume, stop and failure events, ``summary.json`` and the final
line, and the export of the anchor."""

from __future__ import annotations

import contextlib
import os
import platform
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from core.errors import InputChanged
from core.io import atomic_write_json
from empirical.config import config_to_dict
from empirical.distributed import barrier
from empirical.export import export_anchor, run_name
from empirical.metrics import MetricsWriter, package_versions
from empirical.train.options import PROG
from empirical.train.outcomes import (
    EXIT_DIVERGED,
    EXIT_NO_RESOURCES,
    EXIT_USER_ERROR,
    CheckpointFailed,
    Diverged,
    rank_tag,
)
from empirical.train.state import RunState

__all__ = ["Records"]

#: statuses of a run that ended on an error (no final summary line on stdout)
_FAILED = ("diverged", "no_space", "failed", "input_changed")


class Records:
    """The records of the run in ``state`` (rank 0 writes them; the other ranks keep a
    disabled writer). ``plain_model``: the export's template when the model is sharded."""

    def __init__(self, state: RunState, plain_model: torch.nn.Module | None = None) -> None:
        self.state, self.plain_model = state, plain_model
        self.writer: MetricsWriter | None = None
        self.bar: Any = None
        self.run_id: str | None = None
        self.run_name = ""

    def open(self) -> None:
        """``config.json``, the metrics writer (continuing a resumed run's files) and the
        progress bar; the start or resume event."""
        st, cfg = self.state, self.state.cfg
        out = Path(cfg.output_dir)
        self.run_id = os.environ.get("PALSGD_RUN_ID")
        if st.main:
            out.mkdir(parents=True, exist_ok=True)
            atomic_write_json(out / "config.json", config_to_dict(cfg))
            if st.prep.stability.status != "ok":
                print(f"{PROG}: warning: {st.prep.stability.message}", file=sys.stderr)
        self.run_name = cfg.run_name or run_name(cfg, st.world // cfg.shards)
        self.writer = MetricsWriter(
            out,
            enabled=st.main,
            tensorboard=cfg.tensorboard,
            resume_position=st.metrics_position,
            start_step=st.start_step + 1 if st.resumed_from else 0,
            wandb_project=cfg.wandb_project,
            run_name=self.run_name,
            run_config=config_to_dict(cfg),
        )
        self.bar = None
        if st.main and cfg.progress:
            self.bar = tqdm(
                total=cfg.T, initial=st.start_step, desc="train", unit="step", dynamic_ncols=True
            )
        if st.resumed_from:
            self._resume_event()
        else:
            self.write("event", {"event": "start", "step": 0, "world_size": st.world})

    def write(self, kind: str, record: dict[str, Any]) -> dict[str, Any]:
        """Write a record of ``kind`` (``"train"``, ``"eval"``, ``"event"``); the record
        as written."""
        assert self.writer is not None, "Records.open() first"
        return self.writer.write(kind, record)

    def position(self) -> dict[str, int]:
        """Where the metrics files end (a checkpoint's resume point for them)."""
        assert self.writer is not None, "Records.open() first"
        return self.writer.position()

    def advance(self) -> None:
        """One step more on the progress bar."""
        if self.bar is not None:
            self.bar.update(1)

    def show(self, **values: Any) -> None:
        """``values`` next to the progress bar."""
        if self.bar is not None:
            self.bar.set_postfix(**values)

    def _changes(self) -> dict[str, dict[str, Any]]:
        return {k: {"checkpoint": o, "now": n} for k, (o, n) in self.state.changed.items()}

    def _resume_event(self) -> None:
        st = self.state
        event = {"event": "resume", "step": st.start_step, "checkpoint": st.resumed_from}
        if st.changed:
            event["changed"] = self._changes()
            if st.main:
                text = ", ".join(f"{k} {o!r} -> {n!r}" for k, (o, n) in st.changed.items())
                print(
                    f"{PROG}: resumed at step {st.start_step} with changed "
                    f"hyperparameters (--allow-changed): {text}",
                    file=sys.stderr,
                )
        self.write("event", event)

    def stopped(self) -> None:
        """The event of a run stopped by ``max_steps_this_run``."""
        event = {"event": "stopped", "step": int(self.state.algo.t)}
        self.write("event", {**event, "reason": "max_steps_this_run"})

    # ------------------------------------------------------------------ failures
    def checkpoint_failed(self, exc: CheckpointFailed) -> tuple[str, int, str]:
        """Record a checkpoint that could not be written; ``(status, exit code, message)``."""
        status = "no_space" if "space" in exc.why.lower() else "failed"
        last = str(exc.last) if exc.last else "none"
        message = (
            f"the checkpoint of step {exc.step} could not be written ({exc.why}); its "
            f"partial files were removed; last complete checkpoint: {last} (free "
            "space and continue with --resume auto)"
        )
        with contextlib.suppress(OSError):
            self.write("event", {"event": "checkpoint_failed", "step": exc.step})
        if self.state.main:
            print(f"{PROG}: error: {message}", file=sys.stderr)
        return status, EXIT_NO_RESOURCES, message

    def diverged(self, exc: Diverged) -> tuple[str, int, str]:
        """Record a divergence; ``(status, exit code, message)``."""
        st = self.state
        last = str(st.last_checkpoint) if st.last_checkpoint else "none"
        found = (
            "first such step over all ranks"
            if exc.where == "loss"
            else "found by the check before writing the checkpoint"
        )
        message = (
            f"training diverged: non-finite {exc.where} at step {exc.step} ({found}; "
            f"stopped at step {int(st.algo.t)}); last good checkpoint: {last}"
        )
        self.write("event", {"event": "diverged", "step": exc.step, "message": message})
        if st.main:
            print(f"{PROG}: error: {message}", file=sys.stderr)
        return "diverged", EXIT_DIVERGED, message

    def input_changed(self, exc: InputChanged, agreed: bool) -> tuple[str, int, str]:
        """Record an input file that changed under the run (``agreed``: every rank found
        it, else only this one); ``(status, exit code, message)``."""
        st = self.state
        last = str(st.last_checkpoint) if st.last_checkpoint else "none"
        message = f"{exc.line} (stopped at step {int(st.algo.t)}; last checkpoint: {last})"
        with contextlib.suppress(OSError):
            self.write("event", {"event": "input_changed", "step": int(st.algo.t)})
        if st.main or not agreed:
            print(f"{PROG}: error{rank_tag()}: {message}", file=sys.stderr)
        return "input_changed", EXIT_USER_ERROR, message

    # ------------------------------------------------------------------ the end
    def close(
        self, status: str, code: int, message: str, elapsed: float, stats: dict[str, Any]
    ) -> None:
        """``summary.json`` (``stats``: the algorithm's statistics it reports) and the
        final line on rank 0; close the writer."""
        st = self.state
        if st.main:
            try:
                self._summary(status, message, elapsed, stats)
            except OSError as exc:
                if code == 0:
                    raise
                print(f"{PROG}: warning: summary.json not written: {exc}", file=sys.stderr)
            if status not in _FAILED:
                last_loss = st.counters.last_loss
                loss = "n/a" if last_loss is None else f"{last_loss:.4f}"
                ev = (st.counters.last_eval or {}).get("eval_loss")
                ev_text = "" if ev is None else f", anchor eval loss {ev:.4f}"
                print(
                    f"{PROG}: {status} at step {int(st.algo.t)}/{st.cfg.T}: train loss "
                    f"{loss}{ev_text}; metrics in {Path(st.cfg.output_dir)}"
                )
        if self.writer is not None:
            self.writer.close()

    def close_bar(self) -> None:
        """Close the progress bar (the run ended, whichever way)."""
        if self.bar is not None:
            self.bar.close()

    def _totals(self, s: dict[str, Any], elapsed: float) -> dict[str, Any]:
        """The run's counters (``s``: the algorithm's statistics) and times."""
        st, totals = self.state, self.state.counters.totals
        return {
            **{k: v for k, v in s.items() if isinstance(v, int | float | None)},
            "time_compute_s": totals.compute_s,
            "time_comm_s": totals.comm_s,
            "time_pull_s": totals.pull_s,
            "wall_s": totals.wall_s,
            "elapsed_s_this_run": elapsed,
            "tokens": st.counters.tokens,
            "parameters": sum(p.numel() for p in st.model.parameters()),
        }

    def _hardware(self) -> dict[str, Any]:
        cuda = torch.cuda.is_available()
        return {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpu_count": os.cpu_count(),
            "device": str(self.state.device),
            "cuda": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if cuda
            else [],
            "torch_threads": torch.get_num_threads(),
        }

    def _summary(self, status: str, message: str, elapsed: float, stats: dict[str, Any]) -> None:
        st, counters = self.state, self.state.counters
        summary = {
            "status": status,
            "message": message,
            "run_id": self.run_id,
            "run_name": self.run_name,
            "changed_on_resume": self._changes(),
            "export_dir": st.cfg.export_dir if status == "finished" else None,
            "step": int(st.algo.t),
            "T": st.cfg.T,
            "world_size": st.world,
            "backend": str(dist.get_backend()),
            "resumed_from": st.resumed_from,
            "last_checkpoint": str(st.last_checkpoint) if st.last_checkpoint else None,
            "config": config_to_dict(st.cfg),
            "algorithm": st.prep.algorithm.to_dict(),
            "pull_coefficient": st.prep.stability.coefficient,
            "totals": self._totals(stats, elapsed),
            "final": {"train_loss": counters.last_loss, "eval": counters.last_eval},
            "versions": package_versions(("torch", "transformers", "numpy", "palsgd-toolkit")),
            "hardware": self._hardware(),
        }
        atomic_write_json(Path(st.cfg.output_dir) / "summary.json", summary)

    def export(self, anchor: dict[str, torch.Tensor]) -> None:
        """Collective: write ``anchor`` (the global model's state, in host memory) to
        ``export_dir`` on rank 0."""
        st = self.state
        if st.main:
            template = st.model if self.plain_model is None else self.plain_model
            path = export_anchor(template, anchor, st.cfg.export_dir, st.cfg.model)
            print(f"{PROG}: exported the anchor to {path}", file=sys.stderr)
        barrier(st.world)
