"""Resume checks of the trainer: what a checkpoint must share with the run that resumes
it, which hyperparameters changed, and how the ranks settle on one checkpoint.

A manifest records the fields of :data:`~empirical.config.MATCH_FIELDS` (model, data,
algorithm, sync schedule and coins: a different value is a different run) and, since this
format, the whole configuration. The fields of :data:`~empirical.config.CHANGE_FIELDS`
are hyperparameters: a resume that changes one is refused with its name unless the run
names it in ``allow_changed``
(:func:`check_resume`); the trainer then applies the new value and records the change.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from core.errors import UserInputError
from empirical.checkpoint import check_compatible, check_rank_files
from empirical.checkpoint.verify import _norm
from empirical.config import (
    CHANGE_FIELDS,
    MATCH_DEFAULTS,
    MATCH_FIELDS,
    TrainConfig,
    allowed_changes,
)

__all__ = ["checkpoint_meta", "changed_hyperparameters", "check_resume", "common_resume_step"]


def checkpoint_meta(cfg: TrainConfig, world_size: int) -> dict[str, Any]:
    meta = {k: getattr(cfg, k) for k in MATCH_FIELDS}
    meta["world_size"] = world_size
    return meta


def changed_hyperparameters(
    cfg: TrainConfig, manifest: dict[str, Any]
) -> dict[str, tuple[Any, Any]]:
    """``{field: (checkpoint's value, this run's value)}`` for every hyperparameter (a field
    of :data:`~empirical.config.CHANGE_FIELDS`) that differs from the configuration
    recorded in the checkpoint's manifest (a field it lacks counts as its default)."""
    saved = manifest.get("config")
    if not isinstance(saved, dict):
        return {}
    out: dict[str, tuple[Any, Any]] = {}
    for f in fields(TrainConfig):
        if f.name not in CHANGE_FIELDS:
            continue
        old, new = saved.get(f.name, f.default), getattr(cfg, f.name)
        if _norm(old) != _norm(new):
            out[f.name] = (old, new)
    return out


def check_resume(
    cfg: TrainConfig, directory: Path, manifest: dict[str, Any], world_size: int
) -> dict[str, tuple[Any, Any]]:
    """Every check of a checkpoint against this run; returns the allowed changes."""

    check_compatible(manifest, checkpoint_meta(cfg, world_size), directory, MATCH_DEFAULTS)
    check_rank_files(directory, manifest)
    if int(manifest["step"]) > cfg.T:
        raise UserInputError(
            f"checkpoint '{directory}' is at step {manifest['step']}, beyond T = {cfg.T}"
        )
    changed = changed_hyperparameters(cfg, manifest)
    allowed = set(allowed_changes(cfg))
    refused = {k: v for k, v in changed.items() if k not in allowed}
    if refused:
        text = "; ".join(f"{k}: checkpoint {o!r}, this run {n!r}" for k, (o, n) in refused.items())
        raise UserInputError(
            f"checkpoint '{directory}' was written with other hyperparameters ({text}): "
            "resume with the checkpoint's values, or pass --allow-changed "
            f"{','.join(refused)} to apply the new values from step {manifest['step']} on "
            "(the change is recorded in metrics.jsonl and summary.json)"
        )
    return changed


def common_resume_step(notes: list[dict[str, Any]]) -> int | None:
    """The step every rank resumes from under ``--resume auto``: the newest step in every
    rank's list of intact checkpoints (``notes[r]["candidates"]``), ``None`` when no rank
    has one; :class:`UserInputError` when some have one but no step is common to all."""
    common = set(notes[0]["candidates"] or [])
    for n in notes[1:]:
        common &= set(n["candidates"] or [])
    if common:
        return max(common)
    if any(n["candidates"] for n in notes):
        seen = {n["rank"]: (n["candidates"] or [])[:3] for n in notes}
        raise UserInputError(
            "--resume auto: no checkpoint is intact on every rank (newest intact steps by "
            f"rank: {seen}); the checkpoint directory must be visible to every rank"
        )
    return None
