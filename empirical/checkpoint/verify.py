"""Checks of a checkpoint before it is loaded: manifest and rank files intact (sizes and
SHA-256), the newest intact one, the checkpoint a ``--resume`` names, its match with
this run; and the load of a rank's state."""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from core.errors import UserInputError
from empirical.checkpoint.store import (
    _STEP_RE,
    MANIFEST,
    latest_complete,
    list_checkpoints,
    read_manifest,
)


def verify_checkpoint(
    directory: str | os.PathLike,
    rank: int | None = None,
    check: Callable[[dict[str, Any], Path], None] | None = None,
) -> str | None:
    """``None`` if the checkpoint is intact, else why not: its manifest is readable, every
    rank file it lists exists with the recorded size and, for ``rank`` (if given), the file's
    SHA-256 matches the manifest. ``check(manifest, directory)``, if given, runs right after
    the manifest is read and its errors propagate (a checkpoint of another run is a
    mismatch to report, not damage to skip)."""
    directory = Path(directory)
    try:
        manifest = read_manifest(directory)
    except UserInputError as exc:
        return str(exc)
    if check is not None:
        check(manifest, directory)
    try:
        check_rank_files(directory, manifest)
        if rank is not None and rank < int(manifest["world_size"]):
            entry = _file_entry(manifest, rank, directory)
            path = directory / entry["file"]
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest != entry["sha256"]:
                return f"checkpoint file '{path}' is corrupt: its SHA-256 differs from the manifest"
    except UserInputError as exc:
        return str(exc)
    except OSError as exc:
        return f"checkpoint '{directory}' cannot be read: {exc}"
    return None


def intact_checkpoints(
    root: str | os.PathLike,
    rank: int | None = None,
    check: Callable[[dict[str, Any], Path], None] | None = None,
) -> tuple[list[tuple[int, Path]], list[tuple[Path, str]]]:
    """Complete checkpoints under ``root`` that pass :func:`verify_checkpoint` (newest
    first), and the complete ones that do not, with the reason."""
    good: list[tuple[int, Path]] = []
    bad: list[tuple[Path, str]] = []
    for step, directory, complete in reversed(list_checkpoints(root)):
        if not complete:
            continue
        why = verify_checkpoint(directory, rank, check)
        if why is None:
            good.append((step, directory))
        else:
            bad.append((directory, why))
    return good, bad


def resolve_resume(resume: str | None, root: str | os.PathLike) -> Path | None:
    """Checkpoint directory to resume from.

    ``None``: start afresh. ``"auto"``: the latest complete checkpoint under ``root``, or
    None if there is none. A path: a checkpoint directory, its manifest, or a directory of
    checkpoints (then its latest complete one); a path with nothing to resume from is an
    error.
    """
    if resume is None:
        return None
    if resume == "auto":
        return latest_complete(root)
    path = Path(resume)
    if path.is_file() and path.name == MANIFEST:
        path = path.parent
    if not path.exists():
        raise UserInputError(f"resume checkpoint '{resume}' does not exist")
    if path.is_dir() and (path / MANIFEST).is_file():
        return path
    if path.is_dir() and _STEP_RE.match(path.name):
        read_manifest(path)  # raises: incomplete
    found = latest_complete(path) if path.is_dir() else None
    if found is None:
        raise UserInputError(
            f"resume checkpoint '{resume}' is not a checkpoint (no {MANIFEST}) and holds no "
            "complete checkpoint"
        )
    return found


def check_compatible(
    manifest: Mapping[str, Any],
    expected: Mapping[str, Any],
    where: str | os.PathLike = "",
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """Raise UserInputError listing every key of ``expected`` whose value differs.

    ``defaults``: the value of a key that a manifest written before the key existed lacks
    (any other missing key differs)."""
    diffs = []
    for key, want in expected.items():
        have = manifest.get(key, (defaults or {}).get(key, "<missing>"))
        if _norm(have) != _norm(want):
            diffs.append(f"{key}: checkpoint {have!r}, this run {want!r}")
    if diffs:
        raise UserInputError(
            f"checkpoint '{where}' does not match this run ({'; '.join(diffs)}); "
            "resume with the same settings or start a new run in another checkpoint directory"
        )


def _norm(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    return value


def _file_entry(manifest: Mapping[str, Any], rank: int, directory: Path) -> dict[str, Any]:
    entries = [f for f in manifest["files"] if int(f.get("rank", -1)) == rank]
    if len(entries) != 1:
        raise UserInputError(
            f"checkpoint manifest '{directory / MANIFEST}' is corrupt: "
            f"no single entry for rank {rank}"
        )
    return entries[0]


def check_rank_files(directory: str | os.PathLike, manifest: Mapping[str, Any]) -> None:
    """Every rank file listed in the manifest exists with the recorded size (cheap check)."""
    directory = Path(directory)
    for rank in range(int(manifest["world_size"])):
        entry = _file_entry(manifest, rank, directory)
        path = directory / entry["file"]
        if not path.is_file():
            raise UserInputError(f"checkpoint file '{path}' is missing")
        size = path.stat().st_size
        if size != int(entry["size"]):
            raise UserInputError(
                f"checkpoint file '{path}' is corrupt: {size} bytes, the manifest records "
                f"{entry['size']}"
            )


def load_rank_state(
    directory: str | os.PathLike,
    manifest: Mapping[str, Any],
    rank: int,
    map_location: str | torch.device = "cpu",
) -> dict[str, Any]:
    """Load and verify (size, SHA-256) one rank's state; UserInputError if corrupt."""
    directory = Path(directory)
    entry = _file_entry(manifest, rank, directory)
    path = directory / entry["file"]
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserInputError(f"checkpoint file '{path}' cannot be read: {exc}") from None
    digest = hashlib.sha256(data).hexdigest()
    if len(data) != int(entry["size"]) or digest != entry["sha256"]:
        raise UserInputError(
            f"checkpoint file '{path}' is corrupt: its size or SHA-256 differs from the "
            f"manifest ({len(data)} vs {entry['size']} bytes)"
        )
    try:
        state = torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except Exception as exc:  # unpickling errors of every kind
        raise UserInputError(f"checkpoint file '{path}' cannot be loaded: {exc}") from None
    if not isinstance(state, dict) or state.get("rank") != rank:
        raise UserInputError(f"checkpoint file '{path}' does not hold the state of rank {rank}")
    return state
