"""Reading a finished run directory as the figures use it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import UserInputError
from empirical.metrics import read_jsonl
from paper_figures.runs.specs import ALGORITHM_LABELS, RunSpec, figure_method

__all__ = ["RunData", "load_run"]


@dataclass
class RunData:
    """A finished run as the figures read it.

    ``train``/``eval``: the ``"train"`` and ``"eval"`` records of ``metrics.jsonl``
    (:data:`empirical.metrics.TRAIN_FIELDS`, :data:`empirical.metrics.EVAL_FIELDS`);
    ``summary``: ``summary.json``; ``config``: the run's resolved TrainConfig dict.
    """

    name: str
    task: str
    algorithm: str
    label: str
    config: dict[str, Any]
    train: list[dict[str, Any]]
    eval: list[dict[str, Any]]
    summary: dict[str, Any]
    status: str = "finished"
    directory: str | None = None
    group: str = "main"
    x: Any = None

    @property
    def world_size(self) -> int:
        return int(self.summary.get("world_size") or self.config.get("nproc") or 1)

    @property
    def parameters(self) -> int | None:
        v = self.summary.get("totals", {}).get("parameters")
        return int(v) if v is not None else None


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def load_run(directory: str | os.PathLike, spec: RunSpec | None = None) -> RunData:
    """Read a run directory (metrics.jsonl, summary.json, config.json)."""
    d = Path(directory)
    if not (d / "metrics.jsonl").is_file():
        raise UserInputError(f"run directory '{d}' has no metrics.jsonl")
    recs = read_jsonl(d / "metrics.jsonl")
    summary = _read_json(d / "summary.json")
    config = summary.get("config") or _read_json(d / "config.json")
    alg = figure_method(spec.algorithm if spec else config.get("algorithm", "?"))
    return RunData(
        name=spec.name if spec else d.name,
        task=spec.task if spec else config.get("model", "?"),
        algorithm=alg,
        label=(spec.label if spec else "") or ALGORITHM_LABELS.get(alg, alg),
        config=config,
        train=[r for r in recs if r.get("kind") == "train"],
        eval=[r for r in recs if r.get("kind") == "eval"],
        summary=summary,
        status=summary.get("status", "finished"),
        directory=str(d),
        group=spec.group if spec else "main",
        x=spec.x if spec else None,
    )
