"""The options of the theory commands (``palsgd check``, ``bounds``, ``verify``,
``worst-case``), declared once as :class:`core.options.Option` records: no option string
twice, the notation's flags range-checked when parsed (exit 2, the flag named), an authors'
alias the same flag as the project's name."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from core import exitcodes
from core.options import Group, Option, option_names
from palsgd.cli import build_parser, main
from theory import check_bounds_cmd
from theory.check import command as check_command
from theory.verify import options as verify_options
from theory.worstcase import cli as worstcase_cli

ROOT = Path(__file__).resolve().parents[1]

#: command -> the module-level declaration its add_arguments hands to declare()
DECLARED = {
    "check": check_command.OPTIONS,
    "bounds": check_bounds_cmd.OPTIONS,
    "verify": verify_options.OPTIONS,
    "worst-case": worstcase_cli.OPTIONS,
}

#: the files of these commands: none of them calls argparse's add_argument itself
FILES = (
    "theory/check/command.py",
    "theory/check/__init__.py",
    "theory/check_bounds_cmd.py",
    "theory/verify/options.py",
    "theory/verify/cli.py",
    "theory/worstcase/cli.py",
)

#: the smallest valid command line of each (worst-case requires --algorithm and --alpha)
BASE = {
    "check": ["check"],
    "verify": ["verify"],
    "worst-case": ["worst-case", "--algorithm", "local_sgd", "--alpha", "0.1"],
}


def _records(items: tuple[Option | Group, ...]) -> list[Option]:
    out: list[Option] = []
    for item in items:
        out += item.options if isinstance(item, Group) else [item]
    return out


@pytest.mark.parametrize("cmd", sorted(DECLARED))
def test_no_option_string_is_declared_twice(cmd):
    names = [n for opt in _records(DECLARED[cmd]) for n in opt.names if n.startswith("-")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    parser = build_parser(cmd)
    strings = option_names(parser)
    assert len(strings) == len(set(strings))
    # the parser holds exactly the declared options (and -h/--help)
    assert set(strings) - {"-h", "--help"} == set(names)


@pytest.mark.parametrize("path", FILES)
def test_no_add_argument_call_outside_declare(path):
    text = (ROOT / path).read_text()
    assert not re.search(r"\badd_argument\s*\(", text), f"{path} calls add_argument"
    assert "add_argument_group" not in text, path


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["check", "--p", "1.5"], "argument --p/--prob_no_grad: 1.5 is not in [0, 1)"),
        (["check", "--prob_no_grad", "-0.1"], "argument --p/--prob_no_grad: -0.1 is not"),
        (["check", "--H", "0"], "argument --H/--sync_interval: 0 is not an integer in [1, inf)"),
        (["check", "--lr", "0"], "argument --alpha/--lr: 0 is not in (0, inf)"),
        (["check", "--mu", "1"], "argument --mu/--outer_momentum: 1 is not in [0, 1)"),
        (["verify", "--sigma", "-1"], "argument --sigma: -1 is not in [0, inf)"),
        (["verify", "--K", "2", "0"], "argument --K/--world_size/--num_gpus: 0 is not"),
        (["verify", "--T", "x"], "argument --T/--steps: expected an integer, got 'x'"),
        ([*BASE["worst-case"], "--p", "1.5"], "argument --p/--prob_no_grad: 1.5 is not"),
        ([*BASE["worst-case"], "--sync_interval", "0"], "argument --H/--sync_interval: 0 is"),
        ([*BASE["worst-case"], "--zeta", "-1"], "argument --zeta: -1 is not in [0, inf)"),
    ],
)
def test_notation_flag_out_of_range_exits_2_naming_the_flag(argv, needle, capsys):
    assert main(argv) == exitcodes.BAD_INPUT
    err = capsys.readouterr().err
    assert needle in err, err
    assert err.startswith(f"palsgd {argv[0]}: error: ") and err.count("\n") == 1, err


def _parse(cmd: str, *extra: str) -> argparse.Namespace:
    return build_parser(cmd).parse_args([*BASE[cmd][1:], *extra])


@pytest.mark.parametrize("cmd", ["check", "worst-case"])
def test_authors_alias_sets_the_same_value(cmd):
    assert _parse(cmd, "--sync_interval", "8").H == _parse(cmd, "--H", "8").H == 8
    assert _parse(cmd, "--lr", "0.25").alpha == _parse(cmd, "--alpha", "0.25").alpha == 0.25
    assert _parse(cmd, "--prob_no_grad", "0.5").p == _parse(cmd, "--p", "0.5").p == 0.5
    assert _parse(cmd, "--outer_lr", "0.7").gamma == 0.7
    assert _parse(cmd, "--world_size", "3").K == _parse(cmd, "--num_gpus", "3").K == 3


def test_verify_aliases_of_its_lists():
    assert _parse("verify", "--steps", "8", "16").T == _parse("verify", "--T", "8", "16").T
    assert _parse("verify", "--world_size", "2", "4").K == [2, 4]


def test_check_reads_parameters_as_floats():
    """``palsgd check`` reads every parameter as a float (its JSON report shows ``4.0``) and
    accepts ``--T 1e5``; an integer parameter must still be whole."""
    args = _parse("check", "--T", "1e5", "--K", "4")
    assert args.T == 100000.0 and isinstance(args.K, float)
    assert all(getattr(args, name) is None for name in ("L", "sigma", "eps"))


def test_worst_case_defaults_are_kept():
    args = _parse("worst-case")
    assert (args.K, args.H, args.L, args.zeta, args.F0) == (2, 1, 1.0, 0.0, 1.0)
    assert isinstance(args.K, int) and args.p is None and args.R is None
