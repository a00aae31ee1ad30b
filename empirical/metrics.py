"""Metrics files of a training run: JSONL (every record), CSV copies, optional TensorBoard.

Files under the run's output directory (written by rank 0 only):

* ``metrics.jsonl``: one JSON object per line with a ``kind``:
  ``"train"`` (one per log interval, fields :data:`TRAIN_FIELDS`),
  ``"eval"`` (fields :data:`EVAL_FIELDS`; the model evaluated is the anchor, i.e. the
  global model at the last sync, recorded as ``"evaluated": "anchor"``),
  ``"event"`` (start, resume, divergence, stop, ...).
* ``train.csv`` and ``eval.csv``: the same train and eval records with fixed columns.
* ``tb/`` (``tensorboard=True`` and the ``tensorboard`` package installed): scalars.

Units: times in seconds (cumulative since the start of the run, resumed runs included),
bytes as counted by the algorithm (payload of its collectives on this rank), ``step`` is
the number of optimizer steps completed (pull steps count). Non-finite floats are written
as ``null``.

Resume without duplicates: :meth:`MetricsWriter.position` (byte sizes of the files) is
stored in every checkpoint; a resumed run truncates the files to that position and
appends, so the files equal those of an uninterrupted run except for the timing fields
(:data:`TIMING_FIELDS`), which measure this machine's clock.
"""

from __future__ import annotations

import csv
import io
import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.io import (
    atomic_write_bytes,
    atomic_write_json,
    from_json_safe,
    json_safe,
    package_versions,
)

__all__ = [
    "TRAIN_FIELDS",
    "EVAL_FIELDS",
    "TIMING_FIELDS",
    "MetricsWriter",
    "read_jsonl",
    "atomic_write_bytes",
    "atomic_write_json",
    "json_safe",
    "package_versions",
]

#: columns of a train record (and of train.csv)
TRAIN_FIELDS: tuple[str, ...] = (
    "step",  # optimizer steps completed (grad + pull)
    "loss",  # mean over ranks of the gradient-step losses since the previous record
    "grad_steps",  # gradient steps of rank 0 so far
    "pull_steps",  # pull steps of rank 0 so far
    "syncs",  # syncs (outer steps on the anchor) so far
    "allreduce_calls",  # collectives issued by the algorithm on rank 0
    "bytes_communicated",  # payload bytes of those collectives on rank 0
    "time_compute_s",  # forward/backward + inner optimizer step, rank 0, cumulative
    "time_comm_s",  # time inside the algorithm's collectives, rank 0, cumulative
    "time_pull_s",  # time in pull updates, rank 0, cumulative
    "wall_s",  # training wall-clock (evaluation and checkpoint time excluded), cumulative
    "consensus",  # consensus distance measured at the last sync (None before the first)
    "lr",  # current inner learning rate alpha (before the 1/(1-p) scaling of grad steps)
    "tokens",  # training tokens (or samples) consumed by all ranks so far
)

#: columns of an eval record (and of eval.csv); metrics not produced by the task stay empty
EVAL_FIELDS: tuple[str, ...] = (
    "step",
    "eval_loss",
    "eval_perplexity",
    "eval_token_accuracy",
    "eval_accuracy",
    "evaluated",
    "wall_s",
)

#: fields that measure time on this machine (they differ between two identical runs)
TIMING_FIELDS: frozenset[str] = frozenset(
    {"time_compute_s", "time_comm_s", "time_pull_s", "wall_s", "elapsed_s"}
)

_CSV_FIELDS = {"train": TRAIN_FIELDS, "eval": EVAL_FIELDS}


def read_jsonl(path: str | os.PathLike, kind: str | None = None) -> list[dict[str, Any]]:
    """All records of a metrics.jsonl file (only those of ``kind`` when given); infinite
    values, written as ``"inf"`` / ``"-inf"`` (:func:`core.io.json_safe`), read as floats."""
    out = []
    with open(path) as fh:
        for line in fh:
            if line.strip():
                rec = from_json_safe(json.loads(line))
                if kind is None or rec.get("kind") == kind:
                    out.append(rec)
    return out


class MetricsWriter:
    """Rank-0 writer of ``metrics.jsonl``, ``train.csv``, ``eval.csv`` (and TensorBoard,
    Weights & Biases).

    ``enabled=False`` (ranks other than 0) makes every method a no-op.
    ``resume_position`` (from :meth:`position` saved in a checkpoint) truncates the files
    to that position and appends; without it the files are started afresh.
    Optional loggers, each skipped with a warning when its package is not installed:
    ``tensorboard=True`` (scalars in ``out_dir/tb/run_name``) and ``wandb_project``
    (``wandb.init(project, name=run_name, config=run_config, dir=out_dir,
    resume="allow")``; numeric fields of every record logged at its ``step``).
    """

    FILES = {"jsonl": "metrics.jsonl", "train": "train.csv", "eval": "eval.csv"}

    def __init__(
        self,
        out_dir: str | os.PathLike,
        *,
        enabled: bool = True,
        tensorboard: bool = False,
        resume_position: Mapping[str, int] | None = None,
        start_step: int = 0,
        wandb_project: str | None = None,
        run_name: str | None = None,
        run_config: Mapping[str, Any] | None = None,
    ):
        self.out_dir = Path(out_dir)
        self.enabled = enabled
        self._fh: dict[str, io.TextIOBase] = {}
        self._tb = None
        self._wandb = None
        if not enabled:
            return
        if wandb_project:
            self._wandb = _open_wandb(wandb_project, run_name, run_config, self.out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for key, name in self.FILES.items():
            path = self.out_dir / name
            if resume_position is not None and path.exists():
                want = int(resume_position.get(key, 0))
                have = path.stat().st_size
                if have < want:
                    warnings.warn(
                        f"metrics file {path} is shorter ({have} bytes) than at the "
                        f"checkpoint ({want} bytes): it was changed after the checkpoint; "
                        "appending to it as it is",
                        stacklevel=2,
                    )
                else:
                    with open(path, "r+b") as raw:
                        raw.truncate(want)
                fh = open(path, "a", newline="")
            else:
                fh = open(path, "w", newline="")
            self._fh[key] = fh
            if key in _CSV_FIELDS and fh.tell() == 0:
                csv.writer(fh).writerow(_CSV_FIELDS[key])
                fh.flush()
        if tensorboard:
            tb_dir = self.out_dir / "tb" / run_name if run_name else self.out_dir / "tb"
            self._tb = _open_tensorboard(tb_dir, start_step)

    @property
    def path(self) -> Path:
        """The JSONL file."""
        return self.out_dir / self.FILES["jsonl"]

    def position(self) -> dict[str, int]:
        """Byte size of every file (flushed); stored in checkpoints for resume."""
        if not self.enabled:
            return {}
        out = {}
        for key, fh in self._fh.items():
            fh.flush()
            out[key] = fh.tell()
        return out

    def write(self, kind: str, record: Mapping[str, Any]) -> dict[str, Any]:
        """Append one record of ``kind`` (train, eval, event); returns what was written."""
        rec = {"kind": kind, **json_safe(dict(record))}
        if not self.enabled:
            return rec
        fh = self._fh["jsonl"]
        fh.write(json.dumps(rec, sort_keys=False, allow_nan=False) + "\n")
        fh.flush()
        if kind in _CSV_FIELDS:
            cols = _CSV_FIELDS[kind]
            row = ["" if rec.get(c) is None else rec.get(c) for c in cols]
            csv.writer(self._fh[kind]).writerow(row)
            self._fh[kind].flush()
        if self._tb is not None and "step" in rec:
            for key, val in rec.items():
                if isinstance(val, int | float) and not isinstance(val, bool) and key != "step":
                    self._tb.add_scalar(f"{kind}/{key}", val, global_step=int(rec["step"]))
        if self._wandb is not None and "step" in rec and kind != "event":
            scalars = {
                f"{kind}/{k}": v
                for k, v in rec.items()
                if isinstance(v, int | float) and not isinstance(v, bool) and k != "step"
            }
            self._wandb.log(scalars, step=int(rec["step"]))
        return rec

    def close(self) -> None:
        """Flush and close every file."""
        for fh in self._fh.values():
            fh.close()
        self._fh = {}
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open_tensorboard(log_dir: Path, start_step: int):
    """A SummaryWriter (``purge_step`` drops events after a resumed step), or None."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        warnings.warn(
            "tensorboard=True but the 'tensorboard' package is not installed "
            "(pip install 'palsgd-toolkit[tensorboard]'); writing JSONL/CSV only",
            stacklevel=3,
        )
        return None
    return SummaryWriter(str(log_dir), purge_step=start_step if start_step > 0 else None)


def _open_wandb(project: str, name: str | None, config: Mapping[str, Any] | None, out_dir: Path):
    """A W&B run, or None (with a warning) when the ``wandb`` package is not installed."""
    try:
        import wandb
    except ImportError:
        warnings.warn(
            f"wandb_project={project!r} but the 'wandb' package is not installed "
            "(pip install wandb); writing JSONL/CSV only",
            stacklevel=3,
        )
        return None
    return wandb.init(
        project=project,
        name=name,
        config=dict(config or {}),
        dir=str(out_dir),
        resume="allow",
    )
