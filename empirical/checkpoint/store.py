"""The checkpoint store: step directories and rank files, atomic writes of rank files
and the manifest, listing, pruning and removal."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from core.errors import UserInputError
from core.io import atomic_write_bytes

CHECKPOINT_FORMAT = 1
MANIFEST = "manifest.json"
_STEP_RE = re.compile(r"^step_(\d{8,})$")


def step_dir(root: str | os.PathLike, step: int) -> Path:
    """Directory of the checkpoint taken after ``step`` optimizer steps."""
    return Path(root) / f"step_{int(step):08d}"


def rank_file(directory: str | os.PathLike, rank: int) -> Path:
    """Per-rank state file inside a checkpoint directory."""
    return Path(directory) / f"rank_{int(rank):05d}.pt"


def save_rank_state(
    root: str | os.PathLike, step: int, rank: int, state: Mapping[str, Any]
) -> dict[str, Any]:
    """Write one rank's state atomically; return ``{"file", "size", "sha256"}`` for the manifest."""
    buf = io.BytesIO()
    torch.save(dict(state), buf)
    data = buf.getvalue()
    path = atomic_write_bytes(rank_file(step_dir(root, step), rank), data)
    return {
        "rank": int(rank),
        "file": path.name,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def write_manifest(
    root: str | os.PathLike,
    step: int,
    meta: Mapping[str, Any],
    files: Sequence[Mapping[str, Any]],
) -> Path:
    """Rank 0, after every rank file is written: commit the checkpoint of ``step``."""
    directory = step_dir(root, step)
    manifest = {
        "format": CHECKPOINT_FORMAT,
        "step": int(step),
        "world_size": len(files),
        "files": sorted((dict(f) for f in files), key=lambda f: f["rank"]),
        **{k: v for k, v in meta.items() if k not in ("format", "step", "files")},
    }
    data = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    return atomic_write_bytes(directory / MANIFEST, data)


def read_manifest(directory: str | os.PathLike) -> dict[str, Any]:
    """The manifest of a checkpoint directory; UserInputError if absent or unreadable."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise UserInputError(
            f"checkpoint '{directory}' is incomplete: it has no {MANIFEST} "
            "(the run stopped while writing it)"
        )
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserInputError(f"checkpoint manifest '{path}' is corrupt: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != CHECKPOINT_FORMAT:
        raise UserInputError(
            f"checkpoint manifest '{path}' has an unknown format "
            f"(expected format {CHECKPOINT_FORMAT})"
        )
    for key in ("step", "world_size", "files"):
        if key not in manifest:
            raise UserInputError(f"checkpoint manifest '{path}' is corrupt: no '{key}' entry")
    return manifest


def list_checkpoints(root: str | os.PathLike) -> list[tuple[int, Path, bool]]:
    """``(step, directory, complete)`` for every ``step_*`` directory, by step."""
    root = Path(root)
    if not root.is_dir():
        return []
    out = []
    for child in root.iterdir():
        m = _STEP_RE.match(child.name)
        if m and child.is_dir():
            out.append((int(m.group(1)), child, (child / MANIFEST).is_file()))
    return sorted(out)


def latest_complete(root: str | os.PathLike) -> Path | None:
    """The complete checkpoint with the highest step, or None."""
    done = [d for _, d, complete in list_checkpoints(root) if complete]
    return done[-1] if done else None


def prune(root: str | os.PathLike, keep: int) -> list[Path]:
    """Keep the ``keep`` newest complete checkpoints; delete older ones and stale partial ones.

    Partial directories (no manifest) older than the newest complete checkpoint are left
    overs of an interrupted save and are deleted too. Returns the deleted directories.
    """
    entries = list_checkpoints(root)
    complete = [(s, d) for s, d, c in entries if c]
    if not complete:
        return []
    newest = complete[-1][0]
    keep_dirs = {d for _, d in complete[-max(int(keep), 1) :]}
    removed = []
    for step, directory, is_complete in entries:
        stale_partial = not is_complete and step < newest
        if (is_complete and directory not in keep_dirs) or stale_partial:
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    return removed


def remove_after(root: str | os.PathLike, step: int) -> list[Path]:
    """Delete checkpoints taken after ``step`` (a run resumed from ``step`` replaces them)."""
    removed = []
    for s, directory, _ in list_checkpoints(root):
        if s > step:
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    return removed
