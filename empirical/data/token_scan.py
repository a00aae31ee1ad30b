"""The checks of a token file (``--dataset tokens``) before training reads it.

* :func:`stat_token_file`: the file exists and is a regular file (a FIFO, a device such
  as ``/dev/zero``, a directory or a symbolic-link loop each named as what it is);
* :func:`check_not_wider`: 32-bit little-endian ids read as 16-bit (a zero at every odd
  position) are refused, from eight ids on;
* :func:`scan_file`: the smallest and largest id of the whole file, read in blocks with
  ``numpy.fromfile`` (a file truncated during the scan ends the read early instead of
  raising SIGBUS, as a memory map would), with a progress line on stderr every few seconds
  once the scan has taken more than :data:`PROGRESS_AFTER_S`.

A scan is done once per process for a file of a given path, size, modification time and
dtype; its result is also handed to the launched ranks through the environment variable
:data:`ENV_SCANS` (the launcher checks the file before any rank starts, and the ranks do
not read the whole file again).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time

import numpy as np

from core.errors import UserInputError
from core.files import file_kind, missing_reason

__all__ = [
    "ENV_SCANS",
    "PROGRESS_AFTER_S",
    "check_not_wider",
    "scan_file",
    "scan_token_ids",
    "stat_token_file",
]

#: ids per block of the range scan (32 MiB of uint16)
SCAN_BLOCK = 1 << 24
#: ids inspected by the 32-read-as-16-bit check
PROBE_IDS = 1 << 16
#: a scan that has run this long prints its progress (then every PROGRESS_EVERY_S)
PROGRESS_AFTER_S = 2.0
PROGRESS_EVERY_S = 5.0
#: the scans done by the launcher, for its ranks: a JSON list of
#: ``[path, size, mtime_ns, dtype, lowest, highest, position of the highest]``
ENV_SCANS = "PALSGD_TOKEN_SCANS"

_Key = tuple[str, int, int, str]
_SCANS: dict[_Key, tuple[int, int, int]] = {}


def stat_token_file(path: str) -> os.stat_result:
    """``os.stat`` of the token file ``path`` if it is a regular file; otherwise a
    :class:`UserInputError` saying what it is (naming ``--data-path``)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        why = missing_reason(path) if not os.path.exists(path) else exc.strerror or str(exc)
        raise UserInputError(f"token file '{path}' (--data-path) cannot be read: {why}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UserInputError(
            f"token file '{path}' (--data-path) is {file_kind(st.st_mode)}, not a regular "
            "file: give a flat binary file of token ids"
        )
    return st


def scan_token_ids(tokens: np.ndarray) -> tuple[int, int, int]:
    """``(smallest id, largest id, position of the first largest)`` of a 1-D id array,
    read in blocks of :data:`SCAN_BLOCK` ids."""
    lo, hi, where = None, None, 0
    for start in range(0, len(tokens), SCAN_BLOCK):
        block = np.asarray(tokens[start : start + SCAN_BLOCK])
        bmin, bmax = int(block.min()), int(block.max())
        lo = bmin if lo is None else min(lo, bmin)
        if hi is None or bmax > hi:
            hi, where = bmax, start + int(np.argmax(block))
    if lo is None or hi is None:
        raise UserInputError("the token file holds no ids")
    return lo, hi, where


def check_not_wider(path: str, dtype: str) -> None:
    """Refuse 32-bit little-endian ids read as 16-bit: their high halves land on every odd
    position as zeros (checked on the first :data:`PROBE_IDS` ids, from 8 ids on)."""
    if np.dtype(dtype).itemsize != 2:
        return
    probe = np.fromfile(path, dtype=dtype, count=PROBE_IDS)
    if len(probe) >= 8 and not probe[1::2].any() and probe[0::2].any():
        raise UserInputError(
            f"token file '{path}' read as {dtype} has a zero at every odd position of its first "
            f"{len(probe)} ids: it looks like 32-bit ids; pass --token-dtype uint32 (or int32)"
        )


def _key(path: str, st: os.stat_result, dtype: str) -> _Key:
    return (os.path.realpath(path), int(st.st_size), int(st.st_mtime_ns), dtype)


def _recall(key: _Key) -> tuple[int, int, int] | None:
    if key in _SCANS:
        return _SCANS[key]
    try:
        for *k, lo, hi, where in json.loads(os.environ.get(ENV_SCANS, "[]")):
            if tuple(k) == key:
                return int(lo), int(hi), int(where)
    except (ValueError, TypeError):
        return None
    return None


def _remember(key: _Key, found: tuple[int, int, int]) -> None:
    _SCANS[key] = found
    try:
        known = json.loads(os.environ.get(ENV_SCANS, "[]"))
    except ValueError:
        known = []
    os.environ[ENV_SCANS] = json.dumps([*known, [*key, *found]][-16:])


def _main_process() -> bool:
    return os.environ.get("RANK", "0") == "0"


class _Progress:
    """Progress lines of a long scan on stderr (none for a scan under
    :data:`PROGRESS_AFTER_S`)."""

    def __init__(self, path: str, size: int):
        self.path, self.size = path, size
        self.start = time.monotonic()
        self.next = self.start + PROGRESS_AFTER_S
        self.shown = False

    def update(self, done: int) -> None:
        now = time.monotonic()
        if now < self.next or not _main_process():
            return
        self.next, self.shown = now + PROGRESS_EVERY_S, True
        print(
            f"scanning token file '{self.path}': {100 * done / max(self.size, 1):.0f}% of "
            f"{self.size / 2**30:.2f} GiB ({now - self.start:.0f} s)",
            file=sys.stderr,
            flush=True,
        )

    def end(self) -> None:
        if self.shown:
            print(
                f"scanned token file '{self.path}' in {time.monotonic() - self.start:.0f} s",
                file=sys.stderr,
                flush=True,
            )


def scan_file(path: str, dtype: str, st: os.stat_result) -> tuple[int, int, int]:
    """``(smallest id, largest id, position of the first largest)`` of the token file
    ``path`` (``st``: its :func:`stat_token_file`), scanned once per process (and once per
    launch: :data:`ENV_SCANS`)."""
    key = _key(path, st, dtype)
    found = _recall(key)
    if found is not None:
        return found
    width = np.dtype(dtype).itemsize
    n = st.st_size // width
    progress = _Progress(path, st.st_size)
    lo, hi, where, pos = None, None, 0, 0
    with open(path, "rb") as fh:
        while pos < n:
            block = np.fromfile(fh, dtype=dtype, count=min(SCAN_BLOCK, n - pos))
            if len(block) == 0:
                raise UserInputError(
                    f"token file '{path}' (--data-path) was truncated while it was scanned "
                    f"(it had {st.st_size} bytes): give a file that is not being written"
                )
            bmin, bmax = int(block.min()), int(block.max())
            lo = bmin if lo is None else min(lo, bmin)
            if hi is None or bmax > hi:
                hi, where = bmax, pos + int(np.argmax(block))
            pos += len(block)
            progress.update(pos * width)
    progress.end()
    if lo is None or hi is None:
        raise UserInputError(f"token file '{path}' holds no ids")
    _remember(key, (lo, hi, where))
    return lo, hi, where
