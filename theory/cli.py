"""The ``palsgd`` console entry point.

``palsgd SUBCOMMAND [options]``. Each subcommand lives in its own module, which provides
``add_arguments(parser)`` and ``run(args) -> int``; modules are imported only when their
subcommand runs, so ``palsgd check`` does not import torch, and ``palsgd --help`` and
``palsgd bounds`` (with a warm cache) import neither numpy nor sympy.

Every subcommand runs inside :func:`guarded`, the one place that maps failures to the exit
codes of :mod:`theory.exitcodes`: bad input (:class:`theory.validation.UserInputError`, or
an OS error on a path the user named) prints one line and exits with 2; Ctrl-C exits with
130; a MemoryError or a full disk with 71; a broken pipe on stdout ends quietly with 141;
anything else is a bug: its traceback is printed and the exit code is 70.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from theory import exitcodes

__all__ = ["main", "guarded", "SUBCOMMANDS"]

#: name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "check": ("theory.check", "check a configuration against every applicable bound"),
    "bounds": (
        "theory.check_bounds_cmd",
        "list the encoded bounds (assumptions, conditions, LaTeX)",
    ),
    "verify": ("theory.verify.cli", "Monte-Carlo verification of every bound (the main job)"),
    "train": (
        "empirical.train",
        "distributed training: DDP, Local SGD, Post-Local SGD, DiLoCo, PALSGD",
    ),
    "probe": (
        "empirical.probe",
        "estimate L, sigma^2, zeta^2, F0 on a real model and check the run",
    ),
    "figures": ("paper_figures.cli", "regenerate the paper's figures"),
    "cost": (
        "empirical.costmodel",
        "cost model: calibrate links, predict wall-clock and gains over DDP",
    ),
}


#: subcommands that do no linear algebra: numpy's BLAS starts one thread for them (its
#: thread pool costs tens of ms of start-up on a busy machine); a user's setting wins
_NO_BLAS = ("check", "bounds")


def _usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = ["usage: palsgd SUBCOMMAND [options]", "", "subcommands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in SUBCOMMANDS.items()]
    lines += ["", "Run 'palsgd SUBCOMMAND --help' for the options of one subcommand."]
    return "\n".join(lines)


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
    """Run ``func`` and return its exit code, mapping every failure to :mod:`theory.exitcodes`.

    ``prog`` (e.g. ``"palsgd check"``) prefixes the one-line messages, written to stderr.
    """
    try:
        code = int(func() or 0)
        sys.stdout.flush()
        return code
    except _user_errors() as exc:  # UserInputError, once theory.validation is loaded
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
            print(f"{prog}: error: out of disk space writing{where}", file=sys.stderr)
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


def _user_errors() -> tuple[type[Exception], ...]:
    """``(UserInputError,)`` once theory.validation is loaded; ``()`` before (nothing raised
    one then). Keeps numpy, which theory.validation imports, out of ``--help`` and ``bounds``."""
    mod = sys.modules.get("theory.validation")
    return (mod.UserInputError,) if mod is not None else ()


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``palsgd`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print(_usage(), file=sys.stderr)
        return exitcodes.BAD_INPUT
    if argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in SUBCOMMANDS:
        print(f"palsgd: error: unknown subcommand {cmd!r}\n\n{_usage()}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    module_name, text = SUBCOMMANDS[cmd]
    if cmd in _NO_BLAS and "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"palsgd {cmd}", description=text)
    module.add_arguments(parser)
    try:
        args = parser.parse_args(rest)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    return guarded(f"palsgd {cmd}", lambda: module.run(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
