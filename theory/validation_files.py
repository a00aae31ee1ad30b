"""Checks of what a user names on disk and of the memory a request plans to use: the
YAML/JSON mapping reader (:func:`read_mapping_file`), the output-path checks
(:func:`check_output_dir`, :func:`check_output_file`) and :func:`check_memory`. Each raises
:class:`~theory.validation.UserInputError` naming the flag or file. Re-exported by
:mod:`theory.validation`.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from theory.errors import UserInputError

__all__ = [
    "MEMORY_FRACTION",
    "check_memory",
    "check_output_dir",
    "check_output_file",
    "read_mapping_file",
]


def _no_duplicate_keys_json(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, val in pairs:
        if key in out:
            raise ValueError(f"key '{key}' appears twice")
        out[key] = val
    return out


def _yaml_loader():
    """A ``yaml.SafeLoader`` that rejects a mapping key given twice (PyYAML keeps the last)."""
    import yaml

    class _StrictLoader(yaml.SafeLoader):
        pass

    def construct_mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key '{key}' appears twice", key_node.start_mark
                )
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    _StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return _StrictLoader


def read_mapping_file(path: str | Path, what: str) -> dict[str, Any]:
    """Read a YAML file (JSON when the suffix is ``.json``) that holds a mapping.

    An empty file gives ``{}``. A missing or unreadable file, a directory, a binary file
    (not UTF-8 text), a parse error, a key given twice or a top level that is not a mapping
    raises :class:`UserInputError` naming ``what`` and the path.
    """
    path = Path(path)
    if path.is_dir():
        raise UserInputError(f"cannot read {what} '{path}': it is a directory, not a file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        reason = "it does not exist" if not path.exists() else exc.strerror
        raise UserInputError(f"cannot read {what} '{path}': {reason}") from None
    try:
        text = raw.decode("utf-8")
        if "\x00" in text:
            raise UnicodeDecodeError("utf-8", raw, text.index("\x00"), text.index("\x00") + 1, "")
    except UnicodeDecodeError as exc:
        raise UserInputError(
            f"{what} '{path}' is not a text file (byte {exc.start} is not UTF-8 text); "
            "expected YAML or JSON"
        ) from None
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text, object_pairs_hook=_no_duplicate_keys_json)
        else:
            import yaml

            data = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 - a SafeLoader subclass
    except Exception as exc:  # json.JSONDecodeError, yaml.YAMLError, a duplicate key
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserInputError(f"{what} '{path}' is malformed: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserInputError(f"{what} '{path}' must hold a mapping, not {type(data).__name__}")
    return data


def _probe_writable(directory: Path) -> str | None:
    """``None`` when a file can be created in ``directory``, else the reason."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def check_output_dir(path: str | Path, flag: str) -> Path:
    """Make sure ``path`` is (or can become) a writable directory, before any work starts.

    Creates the directory (and its parents) and writes a temporary file into it. A path
    that is an existing file, a parent that is a file, or a read-only location raises
    :class:`UserInputError` naming ``flag`` (the option the user typed, e.g. ``"--out"``).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserInputError(f"{flag} '{path}' is an existing file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserInputError(
            f"{flag} '{path}': cannot create the directory: {exc.strerror}"
        ) from None
    reason = _probe_writable(path)
    if reason:
        raise UserInputError(f"{flag} '{path}': the directory is not writable: {reason}")
    return path


def check_output_file(path: str | Path, flag: str) -> Path:
    """Make sure the file ``path`` can be written, before any work starts.

    An existing directory, a parent that is a file, a read-only parent or a read-only
    existing file raises :class:`UserInputError` naming ``flag``. The parent directory is
    created; the file itself is not touched.
    """
    path = Path(path)
    if path.is_dir():
        raise UserInputError(f"{flag} '{path}' is a directory; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise UserInputError(f"{flag} '{path}': '{parent}' is a file, not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserInputError(f"{flag} '{path}': cannot create '{parent}': {exc.strerror}") from None
    reason = _probe_writable(parent)
    if reason is None and path.exists():
        try:
            with open(path, "ab"):
                pass
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
    if reason:
        raise UserInputError(f"{flag} '{path}': cannot write the file: {reason}")
    return path


#: fraction of the machine's memory a request may plan to use before it is refused
MEMORY_FRACTION = 0.8


def _available_memory() -> int | None:
    """Bytes of memory available to this process (Linux ``MemAvailable``), or ``None``."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(nbytes: float, what: str, *, available: int | None = None) -> None:
    """Refuse up front a request whose arrays would take more than
    :data:`MEMORY_FRACTION` of the available memory.

    ``nbytes``: the estimate (e.g. ``8 * K * d * replicas`` for float64 iterates); ``what``
    names the sizes the user chose (``"K = 10^9 workers x d = 10 x R = 64 replicas"``), so
    the message says which flag to lower. Raises :class:`UserInputError`.
    """
    avail = _available_memory() if available is None else available
    if math.isfinite(nbytes) and (avail is None or nbytes <= MEMORY_FRACTION * avail):
        return
    have = "an unknown amount" if avail is None else f"{avail / 2**30:.3g} GiB"
    need = f"{nbytes / 2**30:.3g} GiB" if math.isfinite(nbytes) else "an unbounded amount"
    raise UserInputError(
        f"{what} needs about {need} of memory, but {have} is available: ask for smaller sizes"
    )
