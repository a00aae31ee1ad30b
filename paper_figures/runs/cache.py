"""The run cache: a run's resolved config, its key, its directory and its status record."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from empirical.config import TrainConfig, config_to_dict, resolve_config
from paper_figures.runs.device import current_device_kind
from paper_figures.runs.specs import RunSpec

__all__ = ["STATUS_FILE", "resolve_spec", "run_key", "run_directory", "cached"]

#: TrainConfig fields that do not change what is trained (excluded from the cache key)
_NOT_IN_KEY = frozenset(
    {
        "output_dir",
        "progress",
        "nproc",
        "overwrite",
        "checkpoint_dir",
        "max_restarts",
        "resume",
        "max_steps_this_run",
        "crash_at_step",
        "tensorboard",
    }
)

#: a run's status record in its directory
STATUS_FILE = "figrun.json"


def resolve_spec(spec: RunSpec, backend: str | None = None) -> dict[str, Any]:
    """The complete, validated TrainConfig of a run as a dict (output_dir not yet set);
    ``backend``: its process-group backend when given (the placement's:
    :attr:`paper_figures.runs.placement.Placement.config_backend`; part of the key)."""
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    ov = {k: v for k, v in spec.overrides.items() if k in known}
    if backend is not None:
        ov["backend"] = backend
    cfg = resolve_config(overrides=ov)
    return config_to_dict(cfg)


def run_key(config: Mapping[str, Any], nproc: int, device_kind: str | None = None) -> str:
    """Hash of what determines a run's results (16 hex digits). ``nproc``: the run's
    workers ``K`` (processes x ``workers_per_process``); a stacked run
    (``workers_per_process > 1``) has its own key, a run of one worker per process the key
    it had before the option existed."""
    payload = {k: v for k, v in sorted(config.items()) if k not in _NOT_IN_KEY}
    if payload.get("workers_per_process", 1) == 1:  # the keys of runs made before the field
        payload.pop("workers_per_process", None)
    payload["__world_size__"] = int(nproc)
    payload["__device_kind__"] = device_kind or current_device_kind()
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_directory(runs_dir: Path, spec: RunSpec, key: str) -> Path:
    """``RUNS_DIR/<task>-<algorithm>-<key>``: runs with the same key share one directory
    (a sweep point equal to the main run is the main run)."""
    slug = f"{spec.task}-{spec.algorithm}".replace("/", "-").replace(" ", "_")
    return Path(runs_dir) / f"{slug}-{key[:12]}"


def cached(directory: Path, key: str) -> dict[str, Any] | None:
    """The run's status record if it is complete and belongs to ``key``, else None."""
    status = Path(directory) / STATUS_FILE
    if not status.is_file() or not (Path(directory) / "metrics.jsonl").is_file():
        return None
    try:
        rec = json.loads(status.read_text())
    except (OSError, ValueError):
        return None
    if rec.get("key") != key or rec.get("status") not in ("finished", "diverged"):
        return None
    return rec
