"""The ``palsgd`` console entry point.

``palsgd SUBCOMMAND [options]``. Each subcommand lives in its own module, which provides
``add_arguments(parser)`` and ``run(args) -> int``; modules are imported only when their
subcommand runs, so ``palsgd check`` does not import torch, and ``palsgd --help`` and
``palsgd bounds`` (with a warm cache) import neither numpy nor sympy.

Bad input (:class:`theory.validation.UserInputError`) prints one line and exits with 2;
no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

__all__ = ["main", "SUBCOMMANDS"]

#: name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "check": ("theory.check", "check a configuration against every applicable bound"),
    "bounds": (
        "theory.check_bounds_cmd",
        "list the encoded bounds (assumptions, conditions, LaTeX)",
    ),
    "verify": ("theory.verify_cmd", "Monte-Carlo verification of every bound (the main job)"),
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
        return 2
    if argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in SUBCOMMANDS:
        print(f"palsgd: error: unknown subcommand {cmd!r}\n\n{_usage()}", file=sys.stderr)
        return 2
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
    try:
        return int(module.run(args) or 0)
    except _user_errors() as exc:  # UserInputError
        print(f"palsgd {cmd}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"palsgd {cmd}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
