"""Ctrl-C during start-up: one line and exit code 130, never a traceback.

Before a subcommand runs under :func:`core.guard.guarded` (which turns ``KeyboardInterrupt``
into ``palsgd SUB: interrupted`` and 130), the interpreter imports the dispatcher, builds the
parser and imports the subcommand's modules; a SIGINT there would end with a
``KeyboardInterrupt`` traceback through whatever module was being imported. :func:`install`
(called by :mod:`palsgd`'s ``__init__`` when the process is the ``palsgd`` command) replaces
Python's SIGINT handler, for that span only, by one that prints the line and ends the process
at once: nothing has been written yet, so there is nothing to clean up. :func:`end` gives the
handler back to Python just before the subcommand runs, so that its own clean-up
(``finally`` blocks, partial files) happens as before.

A process that inherited SIGINT ignored (started in the background by a non-interactive
shell) keeps ignoring it: :func:`install` only replaces Python's default handler.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType

from core.exitcodes import INTERRUPTED

__all__ = ["install", "end", "launched_as_palsgd", "prog_name"]


def prog_name(argv: list[str] | None = None) -> str:
    """``"palsgd SUB"`` for ``palsgd SUB ...``, ``"palsgd"`` when no subcommand is named."""
    argv = sys.argv if argv is None else argv
    sub = argv[1] if len(argv) > 1 else ""
    return f"palsgd {sub}" if sub and not sub.startswith("-") and sub.isprintable() else "palsgd"


def _interrupted(signum: int, frame: FrameType | None) -> None:
    """The start-up SIGINT handler: one line on stderr, exit 130, no traceback."""
    try:
        os.write(2, f"{prog_name()}: interrupted\n".encode(errors="replace"))
    finally:
        os._exit(INTERRUPTED)


def launched_as_palsgd() -> bool:
    """True when this process is the ``palsgd`` command (the console script or ``python -m
    palsgd``), not a program that imports the package (pytest, a notebook)."""
    argv = list(getattr(sys, "orig_argv", ()))
    if "-m" in argv[:-1]:
        return argv[argv.index("-m") + 1] in ("palsgd", "palsgd.cli")
    return Path(sys.argv[0] if sys.argv else "").name in ("palsgd", "palsgd.exe")


def install() -> None:
    """Replace Python's default SIGINT handler by the start-up one (see the module)."""
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _interrupted)
    except ValueError:  # not the main thread: leave signals alone
        pass


def end() -> None:
    """Give SIGINT back to Python (``KeyboardInterrupt``) if the start-up handler holds it."""
    try:
        if signal.getsignal(signal.SIGINT) is _interrupted:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:
        pass
