"""The ``palsgd`` console entry point, above the three packages it dispatches to.

``palsgd SUBCOMMAND [options]``. Each package registers the subcommands it owns in its
``commands`` module (:mod:`theory.commands`, :mod:`empirical.commands`,
:mod:`paper_figures.commands`): a name, the module that implements it, a one-line help.
Each implementing module provides ``add_arguments(parser)``, which hands its options
(:class:`~core.options.Option` records) to :func:`core.options.declare`, and ``run(args)
-> int``, and is imported only when its subcommand runs: ``palsgd check`` does not import
torch (about 1 s of start-up), and ``palsgd --help`` imports neither numpy nor sympy. The
parser is built and the flags parsed before torch or sympy is imported: a module's
``add_arguments`` needs neither (its package re-exports lazily, :mod:`core.lazy`; the heavy
imports happen in ``run``), so ``palsgd SUB --help`` and a bad flag answer in about 0.2 s
(``tests/test_cli_startup.py``). Every subcommand runs inside :func:`core.guard.guarded`,
which maps failures to the exit codes of :mod:`core.exitcodes`; Ctrl-C before that (imports,
parser) ends with the same line and 130 (:mod:`palsgd.startup`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from core import exitcodes
from core.guard import guarded
from empirical import commands as empirical_commands
from palsgd import startup
from paper_figures import commands as figures_commands
from theory import commands as theory_commands

__all__ = ["main", "entry", "build_parser", "HelpFormatter", "Parser", "SUBCOMMANDS", "version"]

#: name -> (module, one-line help), in the order ``palsgd --help`` lists them
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    **theory_commands.COMMANDS,
    **empirical_commands.COMMANDS,
    **figures_commands.COMMANDS,
}

#: subcommands that import torch: it is imported after the parse and before the command
#: runs, while Ctrl-C still ends the process at once (:mod:`palsgd.startup`): a
#: KeyboardInterrupt raised inside torch's C++ initialisation can abort the process
#: ("terminate called after throwing ... pybind11::error_already_set") or end it with the
#: signal instead of 130
_IMPORTS_TORCH = ("train", "probe", "figures", "cost")

#: subcommands that do no linear algebra: numpy's BLAS starts one thread for them (its
#: thread pool costs tens of ms of start-up on a busy machine); a user's setting wins
_NO_BLAS = theory_commands.NO_BLAS


def _usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = ["usage: palsgd SUBCOMMAND [options]", "", "subcommands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in SUBCOMMANDS.items()]
    lines += ["", "Run 'palsgd SUBCOMMAND --help' for the options of one subcommand."]
    lines += ["'palsgd --version' prints the toolkit's version."]
    return "\n".join(lines)


def version() -> str:
    """The installed version of the toolkit (the distribution ``palsgd-toolkit``)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("palsgd-toolkit")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown (not installed)"


class HelpFormatter(argparse.HelpFormatter):
    """``--help`` with every flag's default: a help text that does not state its default
    gets ``(default: VALUE)``, ``(default: off)`` for a switch."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if not text or "default" in text or action.default is argparse.SUPPRESS:
            return text
        if action.nargs == 0:  # store_true / store_false
            return f"{text} (default: {'on' if action.default else 'off'})"
        if action.default is None or isinstance(action, argparse._SubParsersAction):
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (the flag and what is wrong),
    like every other bad input, instead of the usage block and the error."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(exitcodes.BAD_INPUT, f"{self.prog}: error: {message} (--help: the options)\n")


def build_parser(cmd: str) -> argparse.ArgumentParser:
    """The argument parser of ``palsgd CMD`` (its module imported, its options declared by
    the module's ``add_arguments``)."""
    module_name, text = SUBCOMMANDS[cmd]
    # stays lazy: the subcommand's module is named by its package's table, imported only
    # for the subcommand that runs (`palsgd --help` imports neither numpy nor torch)
    module = importlib.import_module(module_name)
    parser = Parser(prog=f"palsgd {cmd}", description=text, formatter_class=HelpFormatter)
    module.add_arguments(parser)
    for action in parser._actions:  # sub-commands (palsgd cost ACTION) format alike
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.formatter_class = HelpFormatter
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``palsgd`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print(_usage(), file=sys.stderr)
        return exitcodes.BAD_INPUT
    if argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    if argv[0] in ("-V", "--version"):
        print(f"palsgd {version()}")
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in SUBCOMMANDS:
        print(f"palsgd: error: unknown subcommand {cmd!r}\n\n{_usage()}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    if cmd in _NO_BLAS and "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    parser = build_parser(cmd)
    module = importlib.import_module(SUBCOMMANDS[cmd][0])  # lazy: see build_parser
    try:
        args = parser.parse_args(rest)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)

    def run() -> int | None:
        if cmd in _IMPORTS_TORCH:
            importlib.import_module("torch")
        # Ctrl-C is a KeyboardInterrupt again (guarded: one line, 130, the command's own
        # clean-up); `module.run` may import sympy or more modules here, after the parse
        startup.end()
        return module.run(args)

    return guarded(f"palsgd {cmd}", run)


def entry() -> None:
    """The ``palsgd`` console script and ``python -m palsgd``: :func:`main`, then exit.

    An interrupted command (130) ends with ``os._exit`` once its line is printed and its
    clean-up has run: a Ctrl-C that landed while a C extension ran Python code through
    ``PyRun_String`` (during an import) leaves CPython's "unhandled KeyboardInterrupt" flag
    set even though the command caught it, and the interpreter would then end itself with
    the signal (exit status -2) instead of 130."""
    code = main()
    if code == exitcodes.INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
