"""How a training run ends: the exit codes of ``palsgd train``, the exceptions the loop
stops with, and the rank tag of its messages."""

from __future__ import annotations

import os
from pathlib import Path

from core import exitcodes

__all__ = [
    "EXIT_OK",
    "EXIT_USER_ERROR",
    "EXIT_DIVERGED",
    "EXIT_NO_RESOURCES",
    "InjectedFailure",
    "CheckpointFailed",
    "Diverged",
    "rank_tag",
]

EXIT_OK = exitcodes.OK
EXIT_USER_ERROR = exitcodes.BAD_INPUT
EXIT_DIVERGED = exitcodes.DIVERGED
EXIT_NO_RESOURCES = exitcodes.OUT_OF_RESOURCES


class InjectedFailure(RuntimeError):
    """Raised by ``crash_at_step`` (fault injection for restart tests)."""


class CheckpointFailed(Exception):
    """A checkpoint could not be written (disk full, permissions); raised on every rank."""

    def __init__(self, step: int, why: str, last: Path | None):
        super().__init__(step, why)
        self.step, self.why, self.last = step, why, last


class Diverged(Exception):
    """The loss or the parameters became non-finite at ``step`` (``where``: which)."""

    def __init__(self, step: int, where: str):
        super().__init__(step, where)
        self.step, self.where = step, where


def rank_tag() -> str:
    """`` (rank R)`` inside a job of several ranks, else empty."""
    ws = os.environ.get("WORLD_SIZE")
    return f" (rank {os.environ.get('RANK', '?')})" if ws and ws != "1" else ""
