"""Checks of what a user names on disk and of the memory a request plans to use: the
bounded file readers (:func:`read_mapping_file`, :func:`read_input_bytes`), the output-path
checks (:func:`check_output_dir`, :func:`check_output_file`, :func:`output_file_target`) and
:func:`check_memory`. Each raises :class:`~core.errors.UserInputError` naming the flag
or file.

Inputs: every file a command reads on a user's word (a config, a bound file, a profiles
file, a run's records) must be a regular file of at most :data:`MAX_INPUT_BYTES`; both are
checked before a byte is read, so ``/dev/zero``, ``/dev/urandom`` or a FIFO is refused at
once instead of being read for ever.

Outputs: a file is only ever replaced if it is a regular file. The rule for a symbolic
link: it is followed (to its final target) and the target is replaced, the link itself is
kept; the target is then held to the same rule as a plain path. A device, a FIFO, a socket
or a directory where a file is expected is refused (:func:`output_file_target`), both by the
up-front checks and by the atomic writer of :mod:`core.io`.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from core.errors import UserInputError

__all__ = [
    "TOOLKIT_DIR",
    "resolve_input_path",
    "MAX_INPUT_BYTES",
    "MEMORY_FRACTION",
    "check_memory",
    "check_output_dir",
    "check_input_file",
    "check_output_file",
    "file_kind",
    "missing_reason",
    "output_file_target",
    "read_input_bytes",
    "read_mapping_file",
]

#: the largest input file (a config, a bound file, a profiles file, a run record) a command
#: reads: 4 MiB, a thousand times the largest file the project ships; larger ones are refused
#: before reading (a YAML parser needs about a minute for 60 MB)
MAX_INPUT_BYTES = 4 * 2**20

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


#: the toolkit's own directory (the parent of the ``theory`` package), where ``docs/examples``
#: lives
TOOLKIT_DIR = Path(__file__).resolve().parents[1]


def resolve_input_path(path: Any, flag: str) -> Path:
    """``path``, or, when it is relative and missing here, the same path under
    :data:`TOOLKIT_DIR` if that is a file (so the README's examples run from any directory).
    ``None``, an empty string or a non-path raises :class:`UserInputError` naming ``flag``."""
    if not isinstance(path, str | os.PathLike) or not str(path).strip():
        raise UserInputError(f"{flag} must be a file path, got {type(path).__name__}")
    p = Path(path)
    if not p.is_absolute() and not os.path.lexists(p) and (TOOLKIT_DIR / p).is_file():
        return TOOLKIT_DIR / p
    return p


def file_kind(mode: int) -> str:
    """``"a regular file"``, ``"a directory"``, ``"a character device"``, ... for an
    ``st_mode``."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def missing_reason(path: str | os.PathLike) -> str:
    """Why ``path`` cannot be reached, for a path that ``os.path.exists`` says is missing:
    ``"does not exist"``, ``"is a symbolic-link loop ..."`` or ``"is a broken symbolic link
    (to 'TARGET', ...)"``."""
    if not os.path.islink(path):
        return "does not exist"
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic-link loop (the link never reaches a file)"
    return f"is a broken symbolic link (to '{os.readlink(path)}', which does not exist)"


def _cannot_read(path: Path, what: str, exc: OSError) -> UserInputError:
    reason = f"it {missing_reason(path)}" if not os.path.exists(path) else exc.strerror
    return UserInputError(f"cannot read {what} '{path}': {reason}")


def _regular_and_small(st: os.stat_result, path: Path, what: str, limit: int) -> int:
    if not stat.S_ISREG(st.st_mode):
        raise UserInputError(
            f"cannot read {what} '{path}': it is {file_kind(st.st_mode)}, not a regular file"
        )
    if st.st_size > limit:
        raise UserInputError(
            f"{what} '{path}' is {st.st_size / 2**20:.3g} MiB: larger than the "
            f"{limit / 2**20:.3g} MiB it may have"
        )
    return st.st_size


def check_input_file(path: str | os.PathLike, what: str, *, limit: int = MAX_INPUT_BYTES) -> int:
    """The size of the input file ``path`` if it is a regular file of at most ``limit``
    bytes; otherwise :class:`UserInputError` naming ``what`` and the path (nothing is read).

    For readers that parse a file themselves (``numpy.load`` of a coins file): a device, a
    FIFO or a socket is refused here instead of being read without end or waited on.
    """
    path = Path(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise _cannot_read(path, what, exc) from None
    return _regular_and_small(st, path, what, limit)


def read_input_bytes(path: str | os.PathLike, what: str, *, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the input file ``path``, read only if it is a regular file of at most
    ``limit`` bytes (checked on the open file, before reading).

    A missing path, a directory, a device (``/dev/zero``, ``/dev/urandom``), a FIFO, a socket
    or a larger file raises :class:`UserInputError` naming ``what`` and the path. The FIFO is
    opened without blocking, so nothing waits for a writer.
    """
    path = Path(path)
    check_input_file(path, what, limit=limit)  # a socket cannot even be opened: say so first
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise _cannot_read(path, what, exc) from None
    try:
        _regular_and_small(os.fstat(fd), path, what, limit)  # replaced since the first look?
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise _cannot_read(path, what, exc) from None
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while being read
        raise UserInputError(f"{what} '{path}' is larger than {limit / 2**20:.3g} MiB")
    return data


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

    An empty file gives ``{}``. A missing or unreadable file, a directory, a device or FIFO,
    a file larger than :data:`MAX_INPUT_BYTES`, a binary file (not UTF-8 text), a parse
    error, a key given twice or a top level that is not a mapping raises :class:`UserInputError` naming ``what`` and the path.
    """
    path = Path(path)
    raw = read_input_bytes(path, what)
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
    that is an existing file (a device, a FIFO, a socket included), a parent that is a file,
    or a read-only location raises :class:`UserInputError` naming ``flag`` (the option the
    user typed, e.g. ``"--out"``). A symbolic link to a directory is followed.
    """
    path = Path(path)
    if os.path.lexists(path) and not path.is_dir():
        try:
            kind = file_kind(os.stat(path).st_mode)
        except OSError as exc:  # a dangling link or a link loop
            kind = f"a symbolic link that cannot be followed ({exc.strerror})"
        article = "an existing file" if kind == "a regular file" else kind
        raise UserInputError(f"{flag} '{path}' is {article}, not a directory")
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


def output_file_target(path: str | os.PathLike, flag: str | None = None) -> Path:
    """The file a write to ``path`` replaces, or :class:`UserInputError` naming ``flag``.

    The rule (the module docstring): ``path`` itself when it is not a symbolic link; when it
    is one, its final target (the link is kept, the target replaced). The path or target
    must be a regular file or not exist yet; a directory, a character or block device
    (``/dev/null``, ``/dev/full``), a FIFO, a socket, a link loop, or a link whose target's
    directory does not exist is refused. Nothing is created or opened here.
    """
    path = Path(path)
    label = f"{flag} '{path}'" if flag else f"output file '{path}'"
    target = path
    if path.is_symlink():
        target = Path(os.path.realpath(path))
        if not target.parent.is_dir():
            raise UserInputError(
                f"{label} is a symbolic link to '{target}', whose directory does not exist"
            )
        label += f" (a symbolic link to '{target}')"
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as exc:  # ELOOP, EACCES on a parent, ...
        raise UserInputError(f"{label}: cannot use it: {exc.strerror}") from None
    if stat.S_ISDIR(mode):
        raise UserInputError(f"{label} is a directory; give a file name")
    if not stat.S_ISREG(mode):
        raise UserInputError(
            f"{label} is {file_kind(mode)}, not a regular file: refusing to replace it; "
            "give a file name"
        )
    return target


def check_output_file(path: str | Path, flag: str) -> Path:
    """Make sure the file ``path`` can be written, before any work starts.

    Everything :func:`output_file_target` refuses (a directory, a device, a FIFO, a socket,
    a bad symbolic link), a parent that is a file, a read-only parent or a read-only
    existing file raises :class:`UserInputError` naming ``flag``. The parent directory is
    created; the file itself is not touched. Returns ``path``.
    """
    path = Path(path)
    target = output_file_target(path, flag)
    parent = target.parent if str(target.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise UserInputError(f"{flag} '{path}': '{parent}' is a file, not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserInputError(f"{flag} '{path}': cannot create '{parent}': {exc.strerror}") from None
    reason = _probe_writable(parent)
    if reason is None and target.exists() and not os.access(target, os.W_OK):
        reason = "permission denied"
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
