"""Checkpoints of a distributed run: per-rank files, a rank-0 manifest, atomic writes.

Layout under the checkpoint directory::

    step_00000040/
        rank_00000.pt   per-rank state (torch.save of a dict, see below)
        rank_00001.pt
        manifest.json   written by rank 0 after every rank file is on disk

A checkpoint is *complete* when its ``manifest.json`` exists; the manifest is the commit
point. Every file is written to a temporary name in the same directory and moved into
place with :func:`os.replace` (atomic on POSIX), so a crash leaves either the old or the
new file, never half of one. The manifest lists each rank file with its size and SHA-256,
which are checked on load, so a truncated or altered file is reported, not loaded.

What a rank file holds is up to the trainer; :mod:`empirical.train` stores everything
needed to continue bit for bit: the rank's model and inner-optimizer state (they differ
between syncs), the algorithm state (anchor, outer optimizer, counters, position in the
round), the data-stream state, the random-number states (:func:`capture_rng`) and the
metrics-writer position.

Errors a user can cause (missing, corrupt or mismatched checkpoint) raise
:class:`theory.validation.UserInputError` naming the file and what differs.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from empirical.metrics import atomic_write_bytes
from theory.validation import UserInputError

__all__ = [
    "CHECKPOINT_FORMAT",
    "MANIFEST",
    "step_dir",
    "rank_file",
    "atomic_write_bytes",
    "save_rank_state",
    "write_manifest",
    "read_manifest",
    "list_checkpoints",
    "latest_complete",
    "verify_checkpoint",
    "intact_checkpoints",
    "resolve_resume",
    "check_compatible",
    "check_rank_files",
    "load_rank_state",
    "prune",
    "remove_after",
    "capture_rng",
    "restore_rng",
]

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
    manifest: Mapping[str, Any], expected: Mapping[str, Any], where: str | os.PathLike = ""
) -> None:
    """Raise UserInputError listing every key of ``expected`` whose value differs."""
    diffs = []
    for key, want in expected.items():
        have = manifest.get(key, "<missing>")
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


def capture_rng(
    generators: Mapping[str, np.random.Generator | torch.Generator] | None = None,
) -> dict[str, Any]:
    """States of the global RNGs (python, numpy legacy, torch CPU and CUDA) and of named
    generators.

    The trainer draws no randomness from global state itself; the global states are
    saved because library code (dropout, for instance) draws from torch's default
    generator.
    """
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy_global": _plain(np.random.get_state(legacy=False)),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "generators": {},
    }
    for name, gen in (generators or {}).items():
        if isinstance(gen, np.random.Generator):
            state["generators"][name] = ("numpy", _plain(gen.bit_generator.state))
        elif isinstance(gen, torch.Generator):
            state["generators"][name] = ("torch", gen.get_state())
        else:
            raise TypeError(f"generator {name!r} is neither numpy nor torch: {type(gen)}")
    return state


def restore_rng(
    state: Mapping[str, Any],
    generators: Mapping[str, np.random.Generator | torch.Generator] | None = None,
) -> None:
    """Inverse of :func:`capture_rng` (the same named generators must be passed)."""
    random.setstate(_as_tuple(state["python"]))
    np.random.set_state(_unplain(state["numpy_global"]))
    torch.set_rng_state(state["torch"].cpu())
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
    saved = state.get("generators", {})
    for name, gen in (generators or {}).items():
        if name not in saved:
            raise UserInputError(f"checkpoint holds no state for the random generator {name!r}")
        kind, s = saved[name]
        if kind == "numpy":
            gen.bit_generator.state = _unplain(s)
        else:
            gen.set_state(s.cpu())


def _plain(x: Any) -> Any:
    """numpy arrays inside an RNG state -> tagged lists (loadable with ``weights_only``)."""
    if isinstance(x, np.ndarray):
        return {"__ndarray__": x.tolist(), "dtype": str(x.dtype)}
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def _unplain(x: Any) -> Any:
    if isinstance(x, dict) and "__ndarray__" in x:
        return np.asarray(x["__ndarray__"], dtype=x["dtype"])
    if isinstance(x, dict):
        return {k: _unplain(v) for k, v in x.items()}
    return x


def _as_tuple(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_as_tuple(v) for v in x)
    return x
