"""``palsgd map`` and ``palsgd cost``: every option declared once, as data (:mod:`core.options`).

Both commands list their options as :class:`~core.options.Option` records
(:mod:`empirical.map_options`, :mod:`empirical.cost.options`); the notation's parameters are
:func:`theory.options.notation_option` flags, their aliases and ranges from the notation's
table, the range checked when the command line is parsed (exit 2, the flag named)."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from core.exitcodes import BAD_INPUT
from core.options import Group, Option, option_names
from empirical.cost.options import ACTIONS
from empirical.map_options import OPTIONS as MAP_OPTIONS
from palsgd.cli import build_parser, main
from theory.options import notation_names

ROOT = Path(__file__).resolve().parents[1]
FILES = ["empirical/map_cli.py", "empirical/map_options.py", "empirical/cost/cli.py",
         "empirical/cost/options.py", "empirical/cost/__init__.py"]  # fmt: skip


def _flat(items) -> list[Option]:
    out: list[Option] = []
    for item in items:
        out += list(item.options) if isinstance(item, Group) else [item]
    return out


def _declared() -> list[tuple[str, argparse.ArgumentParser, list[Option]]]:
    """(name, parser, its declared options) for ``map`` and each action of ``cost``."""
    cost = build_parser("cost")
    (sub,) = [a for a in cost._actions if isinstance(a, argparse._SubParsersAction)]
    return [("map", build_parser("map"), _flat(MAP_OPTIONS))] + [
        (f"cost {a.name}", sub.choices[a.name], _flat(a.options)) for a in ACTIONS
    ]


DECLARED = _declared()
IDS = [d[0] for d in DECLARED]


@pytest.mark.parametrize("name, parser, options", DECLARED, ids=IDS)
def test_no_option_string_is_declared_twice(name, parser, options):
    strings = [n for o in options for n in o.names]
    assert len(strings) == len(set(strings)), name
    flags = option_names(parser)
    assert len(flags) == len(set(flags)), name
    assert set(flags) == set(strings) | {"-h", "--help"}, name


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["map", "--p", "1.5"], "--p"),
        (["map", "--eta", "0"], "--eta"),
        (["map", "--prob_no_grad", "0"], "--p"),
        (["map", "--H", "8", "0"], "--H"),
        (["map", "--K", "1"], "--K"),
        (["map", "--mu", "1"], "--mu"),
        (["map", "--sync-delay", "-1"], "--sync-delay"),
        (["map", "--seed", "-1"], "--seed"),
        (["cost", "predict", "--p", "1"], "--p"),
        (["cost", "predict", "--sync_interval", "0"], "--H"),
        (["cost", "predict", "--steps", "0"], "--steps"),
    ],
)
def test_a_value_outside_the_range_exits_2_naming_the_flag(argv, flag, capsys):
    assert main(argv) == BAD_INPUT
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and "is not" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "cmd, alias, canonical, value, dest, parsed",
    [
        (["map"], "--sync_interval", "--H", "8", "H", [8]),
        (["map"], "--prob_no_grad", "--p", "0.25", "p", [0.25]),
        (["map"], "--world_size", "--K", "3", "K", 3),
        (["map"], "--outer_momentum", "--mu", "0.5", "mu", 0.5),
        (["cost", "predict"], "--sync_interval", "--H", "8", "H", 8),
        (["cost", "predict"], "--prob_no_grad", "--p", "0.1", "p", 0.1),
        (["cost", "predict"], "--local_sgd_start_iter", "--T0", "5", "T0", 5),
        (["cost", "predict"], "--T", "--steps", "100", "steps", 100),
    ],
)
def test_an_alias_sets_what_its_flag_sets(cmd, alias, canonical, value, dest, parsed):
    parser = build_parser(cmd[0])
    a = parser.parse_args([*cmd[1:], alias, value])
    b = parser.parse_args([*cmd[1:], canonical, value])
    assert getattr(a, dest) == getattr(b, dest) == parsed
    assert vars(a) == vars(b)


def test_the_notation_flags_carry_every_alias():
    map_flags = set(option_names(build_parser("map")))
    for name in ("H", "eta", "p", "zeta", "eps", "K", "d", "L", "sigma", "F0", "mu"):
        assert set(notation_names(name)) <= map_flags, name
    (_, predict, _) = next(d for d in DECLARED if d[0] == "cost predict")
    for name in ("p", "H", "T0", "T"):
        assert set(notation_names(name)) <= set(option_names(predict)), name


@pytest.mark.parametrize("name, parser, options", DECLARED, ids=IDS)
def test_help_lists_every_declared_option(name, parser, options):
    text = parser.format_help()
    for opt in options:
        for flag in opt.names:
            assert flag in text, f"{name}: {flag} missing from --help"
        assert opt.help and opt.help.split()[0] in text, f"{name}: {opt.names[0]}'s help"


def test_help_through_the_cli(capsys):
    assert main(["map", "--help"]) == 0
    out = capsys.readouterr().out
    assert all(f in out for o in _flat(MAP_OPTIONS) for f in o.names)
    for action in ACTIONS:
        assert main(["cost", action.name, "--help"]) == 0
        out = capsys.readouterr().out
        assert all(f in out for o in _flat(action.options) for f in o.names)


def test_the_defaults_are_the_specs():
    from theory.compare import Grid, MapSpec

    args = build_parser("map").parse_args([])
    spec, grid = MapSpec(), Grid()
    assert (tuple(args.H), tuple(args.eta), tuple(args.p), tuple(args.eps)) == (
        spec.H, spec.eta, spec.p, spec.eps)  # fmt: skip
    assert args.zeta is None and args.sync_delay == 0 and args.criterion == spec.criterion
    assert (args.n_alpha, args.n_outer, args.span, args.max_extend, args.mu) == (
        grid.n_alpha, grid.n_outer, grid.span, grid.max_extend, grid.mu)  # fmt: skip


@pytest.mark.parametrize("path", FILES)
def test_the_options_are_data(path):
    """No ``add_argument`` in the commands' files; no function over 80 lines, no file over
    400 lines."""
    source = (ROOT / path).read_text()
    assert "add_argument(" not in source
    assert len(source.splitlines()) <= 400
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno - node.lineno + 1 <= 80, f"{path}: {node.name}"
