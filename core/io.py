"""Writing results: one JSON cleaner, one CSV writer, one atomic writer for every command.

* :func:`json_safe`: values made JSON-ready, recursively. NaN becomes ``null``, +-inf the
  strings ``"inf"`` / ``"-inf"`` (a bound that is infinite stays readable as such), numpy
  and torch scalars and arrays become Python numbers and lists, mapping keys strings.
* :func:`atomic_write_bytes` / :func:`atomic_write_text` / :func:`atomic_write_json`: a temp
  file next to the target, fsync, ``os.replace``; a crash or a full disk leaves the old file
  (or none), never a partial one, and no temp file behind. Only a regular file is ever
  replaced: a device, a FIFO, a socket or a directory at the path is refused with a
  :class:`~core.errors.UserInputError` before anything is written, and a symbolic link is
  followed (its target replaced, the link kept), by the rule of
  :func:`core.files.output_file_target`.
* :func:`write_csv`: rows of mappings as CSV (cleaned as for JSON, ``None`` as an empty
  cell), written atomically.
* :func:`package_versions`: installed versions, the provenance every report records.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import math
import os
import platform
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.files import output_file_target

__all__ = [
    "json_safe",
    "from_json_safe",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_json",
    "emit_json",
    "write_csv",
    "package_versions",
]


def json_safe(value: Any) -> Any:
    """``value`` with JSON-ready values (see the module docstring for the conventions)."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if not isinstance(value, bool | int | float | str) and callable(getattr(value, "item", None)):
        if getattr(value, "ndim", 1) == 0:
            value = value.item()
        elif callable(getattr(value, "tolist", None)):
            return json_safe(value.tolist())
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def from_json_safe(value: Any) -> Any:
    """The inverse of :func:`json_safe` for the infinities: ``"inf"`` / ``"-inf"`` -> floats."""
    if isinstance(value, Mapping):
        return {k: from_json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json_safe(v) for v in value]
    if value == "inf" or value == "-inf":
        return float(value)
    return value


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, flag: str | None = None) -> Path:
    """Write ``data`` to ``path`` atomically (temp file, fsync, ``os.replace``); return ``path``.

    ``path`` must be a regular file or not exist (a symbolic link is followed to its
    target); anything else raises :class:`~core.errors.UserInputError` naming ``flag``
    (or the path) before a byte is written. If writing fails (a full disk, for instance)
    the temp file is removed and the error re-raised: the old file, if any, is untouched.
    """
    path = Path(path)
    target = output_file_target(path, flag)
    if target == path:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp, fd = _new_temp_file(target)
    try:
        with open(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        output_file_target(path, flag)  # still a regular file (or none) at the last moment
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


def _new_temp_file(target: Path) -> tuple[Path, int]:
    """A new file next to ``target`` (``.NAME.tmpPID``, or a random suffix when that name is
    taken), created exclusively: never an existing file, link or FIFO of that name."""
    names = [f".{target.name}.tmp{os.getpid()}"]
    names += [f".{target.name}.tmp{os.getpid()}-{secrets.token_hex(4)}" for _ in range(8)]
    for name in names:
        tmp = target.with_name(name)
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", str(target))


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any, *, indent: int = 2) -> Path:
    """``obj`` as JSON (:func:`json_safe`, sorted keys, final newline), written atomically."""
    text = json.dumps(json_safe(obj), indent=indent, sort_keys=True, allow_nan=False) + "\n"
    return atomic_write_text(path, text)


def emit_json(target: str | os.PathLike | None, obj: Any, *, indent: int = 2) -> None:
    """``obj`` as JSON (keys in their order) to standard output when ``target`` is ``"-"``,
    written atomically to the file ``target`` otherwise, nowhere when ``target`` is empty or
    ``None`` (a benchmark's ``--json`` option)."""
    if not target:
        return
    text = json.dumps(obj, indent=indent)
    if str(target) == "-":
        print(text)
    else:
        atomic_write_text(target, text + "\n")


def write_csv(
    path: str | os.PathLike,
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
) -> Path:
    """Write ``rows`` as CSV with a header, atomically.

    ``columns``: the columns in order (keys not named are left out); ``None``: every key in
    order of first appearance. Values are cleaned by :func:`json_safe`; ``None`` and missing
    keys are written as empty cells.
    """
    cols = list(columns) if columns is not None else list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        clean = {k: json_safe(r.get(k)) for k in cols}
        w.writerow({k: "" if v is None else v for k, v in clean.items()})
    return atomic_write_text(path, buf.getvalue())


def package_versions(names: Sequence[str]) -> dict[str, str]:
    """``{"python": ..., name: installed version or "not installed"}`` for the
    distributions ``names`` (provenance for summaries and manifests)."""
    import importlib.metadata  # lazy: ~15 ms (email parsing), for provenance only

    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out
