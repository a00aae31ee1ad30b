"""The one place that maps a command's failures to the exit codes of :mod:`core.exitcodes`.

:func:`guarded` runs a command: bad input (:class:`core.errors.UserInputError`, or an
OS error on a path the user named) prints one line and exits with 2; Ctrl-C exits with 130;
a MemoryError or a full disk with 71; a broken pipe on stdout ends quietly with 141;
anything else is a bug: its traceback is printed and the exit code is 70.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
from collections.abc import Callable

from core import exitcodes
from core.errors import UserInputError

__all__ = ["guarded"]


_DISK_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def guarded(prog: str, func: Callable[[], int | None]) -> int:
    """Run ``func`` and return its exit code, mapping every failure to :mod:`core.exitcodes`.

    ``prog`` (e.g. ``"palsgd check"``) prefixes the one-line messages, written to stderr.
    """
    try:
        code = int(func() or 0)
        sys.stdout.flush()
        return code
    except UserInputError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return exitcodes.INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return exitcodes.BROKEN_PIPE
    except MemoryError:
        print(
            f"{prog}: error: out of memory; ask for smaller sizes (K, T, R, d, replicas)",
            file=sys.stderr,
        )
        return exitcodes.OUT_OF_RESOURCES
    except OSError as exc:
        where = f" '{exc.filename}'" if exc.filename else ""
        if exc.errno in _DISK_FULL:
            what = where or " an output file (the system did not say which)"
            print(f"{prog}: error: out of disk space writing{what}", file=sys.stderr)
            return exitcodes.OUT_OF_RESOURCES
        if exc.errno == errno.ENOMEM:
            print(f"{prog}: error: out of memory{where}", file=sys.stderr)
            return exitcodes.OUT_OF_RESOURCES
        if exc.filename:  # a path the user named: missing, read-only, a directory, ...
            print(f"{prog}: error: cannot use{where}: {exc.strerror}", file=sys.stderr)
            return exitcodes.BAD_INPUT
        return _internal(prog)
    except Exception:
        return _internal(prog)


def _internal(prog: str) -> int:
    traceback.print_exc()
    print(
        f"{prog}: internal error (a bug in the toolkit; please report it with the traceback above)",
        file=sys.stderr,
    )
    return exitcodes.INTERNAL_ERROR
