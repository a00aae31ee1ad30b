"""The declaration machinery of the commands' options (core.options, theory.options)."""

from __future__ import annotations

import argparse

import pytest

from core.options import Group, declare, option, option_names, ranged
from core.validation import ParamSpec
from theory.options import notation_names, notation_option
from theory.validation import ALIASES, PARAMS


def _parser(*items) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cmd", exit_on_error=False)
    declare(parser, items)
    return parser


def test_declared_options_parse_like_argparse():
    parser = _parser(
        Group("cells", (option("--n", type=int, default=3, help="count"),)),
        option("--json", action="store_true", help="JSON"),
        option("path", help="a file"),
    )
    args = parser.parse_args(["x.txt", "--n", "5", "--json"])
    assert (args.path, args.n, args.json) == ("x.txt", 5, True)
    assert parser.parse_args(["y"]).n == 3


def test_an_option_declared_twice_is_refused():
    """Negative control: a second declaration of a flag (even as an alias) is an error."""
    with pytest.raises(ValueError, match="--H is declared twice"):
        _parser(option("--H", type=int), option("--sync", "--H", type=int))


def test_a_value_outside_the_range_is_refused_naming_the_flag(capsys):
    parser = argparse.ArgumentParser(prog="cmd")
    declare(parser, [notation_option("p")])
    assert parser.parse_args(["--p", "0.5"]).p == 0.5
    for bad in ("1.5", "1", "-0.1", "nan", "x"):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(["--prob_no_grad", bad])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "--p/--prob_no_grad" in err and bad in err


def test_integer_ranges_convert_and_refuse_fractions():
    parse = ranged(ParamSpec("H", "sync interval", 1, float("inf"), integer=True))
    assert parse("8") == 8 and isinstance(parse("8"), int)
    for bad in ("0", "2.5", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(bad)


def test_every_notation_parameter_has_its_aliases():
    for name in PARAMS:
        names = notation_names(name)
        assert names[0] == f"--{name}"
        assert {f"--{a}" for a, t in ALIASES.items() if t == name} == set(names[1:])
    parser = argparse.ArgumentParser(prog="cmd")
    declare(parser, [notation_option(n) for n in ("H", "K", "alpha")])
    assert parser.parse_args(["--sync_interval", "8"]).H == 8
    assert parser.parse_args(["--world_size", "4"]).K == 4
    assert parser.parse_args(["--lr", "0.1"]).alpha == pytest.approx(0.1)
    assert {"--num_gpus", "--world_size", "--lr"} <= set(option_names(parser))


def test_a_narrower_range_and_the_command_settings():
    gt0 = ParamSpec("eta", "pull rate", 0, float("inf"), low_open=True)
    opt = notation_option("eta", range=gt0, nargs="+", default=[1.0], help="(default 1)")
    parser = _parser(opt)
    assert parser.parse_args(["--eta", "2", "3"]).eta == [2.0, 3.0]
    assert "(0, inf)" in opt.help and "(default 1)" in opt.help
    with pytest.raises(argparse.ArgumentError):
        parser.parse_args(["--eta", "0"])


def test_unknown_notation_parameter_is_refused():
    with pytest.raises(KeyError, match="not a parameter"):
        notation_option("learning_rate")
