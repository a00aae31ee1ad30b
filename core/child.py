"""``python -m core.child MODULE [ARGS...]``: run ``MODULE`` as ``__main__`` (as
``python -m MODULE ARGS`` does) in a child process of a ``palsgd`` command, quiet on Ctrl-C
while it starts.

A terminal's Ctrl-C reaches the whole process group: the ``palsgd`` command prints its one
line (``palsgd SUB: interrupted``) and exits 130, and each child it launched (torchrun's
agent, the ranks) gets the same SIGINT. A child still importing torch would print a
``KeyboardInterrupt`` traceback through torch's ``__init__`` (or abort inside its C++
initialisation). Here SIGINT ends the child at once with 130 and no output until torch is
imported; then Python's handler is back, so the module's own handling of Ctrl-C (torchrun
stopping its ranks, a rank's clean-up) runs as before, and the ``KeyboardInterrupt`` (or
torchrun's ``SignalException``) it ends with is the exit code 130 (``128 + N`` for another
signal N) without a traceback: the command's own line says it. A SIGINT that the child
inherited as ignored stays ignored.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys

from core.exitcodes import INTERRUPTED

__all__ = ["main"]


def _quiet(signum: int, frame: object) -> None:
    os._exit(INTERRUPTED)


def main(argv: list[str]) -> None:
    """Run ``argv[0]`` as ``__main__`` with ``argv[1:]`` as its arguments (see the module)."""
    if not argv:
        sys.exit("usage: python -m core.child MODULE [ARGS...]")
    quiet = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if quiet:
        signal.signal(signal.SIGINT, _quiet)
    import torch  # noqa: F401  (the import a Ctrl-C must not interrupt)

    if quiet:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    from torch.distributed.elastic.multiprocessing.api import SignalException

    sys.argv = list(argv)
    try:
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
    except KeyboardInterrupt:
        sys.exit(INTERRUPTED)
    except SignalException as exc:  # torchrun's agent, after it stopped its ranks
        sys.exit(128 + int(exc.sigval))


if __name__ == "__main__":  # pragma: no cover - run as a child process
    main(sys.argv[1:])
