"""The options of ``palsgd train``, ``palsgd probe`` and ``palsgd figures`` are declared once,
as :class:`~core.options.Option` records handed to :func:`core.options.declare`: no option
string twice, every parser option comes from a declaration, a value outside a flag's range
exits 2 naming the flag, and an authors'-code alias sets what the project's name sets."""

from __future__ import annotations

import argparse
import math
from dataclasses import fields
from pathlib import Path

import pytest

from core import exitcodes
from core.options import Group, Option, declare
from empirical.config import TRAINER_PARAMS, TrainConfig
from empirical.probe.options import OPTIONS as PROBE_OPTIONS
from empirical.train.options import _CLI_ALIASES, config_from_args
from empirical.train.options import OPTIONS as TRAIN_OPTIONS
from palsgd.cli import build_parser, main
from paper_figures.cli.options import OPTIONS as FIGURES_OPTIONS
from theory.validation import PARAMS

ROOT = Path(__file__).resolve().parents[1]

#: command -> the module-level declaration its add_arguments hands to declare()
DECLARED = {"train": TRAIN_OPTIONS, "probe": PROBE_OPTIONS, "figures": FIGURES_OPTIONS}

#: the files of these commands (and of their helper entry points): none of them calls
#: argparse's add_argument itself
FILES = (
    "palsgd/cli.py",
    "empirical/train/options.py",
    "empirical/train/cli.py",
    "empirical/probe/options.py",
    "empirical/probe/cli.py",
    "empirical/probe/__main__.py",
    "paper_figures/cli/options.py",
    "paper_figures/runs/launch.py",
    "tests/battery.py",
)


def _options(items) -> list[Option]:
    """The options of ``items``, groups flattened."""
    out: list[Option] = []
    for item in items:
        out += item.options if isinstance(item, Group) else [item]
    return out


def _flags(items) -> list[str]:
    """Every option string ``items`` declare (a switch's ``--no-NAME`` included)."""
    out = []
    for opt in _options(items):
        names = [n for n in opt.names if n.startswith("-")]
        if dict(opt.settings).get("action") is argparse.BooleanOptionalAction:
            names += ["--no-" + n[2:] for n in names if n.startswith("--")]
        out += names
    return out


# ------------------------------------------------------------------ (a) declared once
@pytest.mark.parametrize("cmd", sorted(DECLARED))
def test_no_option_string_is_declared_twice(cmd):
    flags = _flags(DECLARED[cmd])
    twice = sorted({f for f in flags if flags.count(f) > 1})
    assert not twice, f"palsgd {cmd}: declared twice: {twice}"
    parser = build_parser(cmd)
    strings = [s for action in parser._actions for s in action.option_strings]
    assert len(strings) == len(set(strings))
    # every option of the parser is a declaration (argparse's -h/--help aside)
    assert set(strings) - {"-h", "--help"} == set(flags)


@pytest.mark.parametrize("path", FILES)
def test_no_file_of_these_commands_calls_add_argument(path):
    assert ".add_argument(" not in (ROOT / path).read_text(), path


def test_declare_refuses_a_second_declaration_of_a_flag():
    parser = argparse.ArgumentParser()
    declare(parser, PROBE_OPTIONS)
    with pytest.raises(ValueError, match="declared twice"):
        declare(parser, [_options(PROBE_OPTIONS)[0]])


# ------------------------------------------------------------------ (b) ranges
def _refused(argv: list[str], capsys) -> str:
    """Run ``palsgd ARGV``; it must exit 2 (bad input): its stderr."""
    assert main(argv) == exitcodes.BAD_INPUT, argv
    return capsys.readouterr().err


def _outside(spec) -> float | int:
    """A value outside the range ``spec`` (below it when its lower end is finite)."""
    value = spec.low - 1 if math.isfinite(spec.low) else spec.high + 1
    return int(value) if spec.integer else value


_FIELDS = {f.name: f for f in fields(TrainConfig)}
#: the train fields with a range: the theory's parameters and the trainer's own
_RANGED = sorted(n for n in _FIELDS if n in PARAMS or n in TRAINER_PARAMS)


@pytest.mark.parametrize("name", _RANGED)
def test_train_refuses_a_value_outside_a_fields_range(name, capsys):
    spec = PARAMS.get(name) or TRAINER_PARAMS[name]
    flag = "--" + name.replace("_", "-")
    err = _refused(["train", flag, str(_outside(spec)), "--print-config"], capsys)
    assert f"'{name}'" in err and spec.allowed in err and "Traceback" not in err


@pytest.mark.parametrize("alias", sorted(_CLI_ALIASES))
def test_train_refuses_an_alias_outside_its_range_naming_the_alias(alias, capsys):
    target = _CLI_ALIASES[alias]
    spec = PARAMS.get(target) or TRAINER_PARAMS[target]
    err = _refused(["train", f"--{alias}", str(_outside(spec)), "--print-config"], capsys)
    assert f"--{alias}" in err and spec.allowed in err


#: (argv, the flag its message names): a value below the range its --help states
_PROBE_FIGURES = [
    ("probe --points 0", "--points"),
    ("probe --samples 1", "--samples"),
    ("probe --max-samples 1", "--max-samples"),
    ("probe --hvp-tol 0", "--hvp-tol"),
    ("probe --confidence 1", "--confidence"),
    ("probe --seed -1", "--seed"),
    ("probe --sweep H=1,2,4 --sweep-seeds 2", "--sweep-seeds"),
    ("figures --nproc 0", "--nproc"),
    ("figures --seed -1", "--seed"),
    ("figures --scale paper --gpus 0 --dry-run", "--gpus"),
    ("figures --scale paper --smoke-runs 0 --dry-run", "--smoke-runs"),
]


@pytest.mark.parametrize("argv, flag", _PROBE_FIGURES, ids=[a for a, _ in _PROBE_FIGURES])
def test_probe_and_figures_refuse_a_value_outside_the_range_naming_the_flag(argv, flag, capsys):
    err = _refused(argv.split(), capsys)
    assert flag in err and "Traceback" not in err


@pytest.mark.parametrize("cmd", sorted(DECLARED))
def test_a_declared_range_is_checked_when_parsed(cmd):
    """An option declared with ``range=`` refuses a value outside it at parse time."""
    parser = build_parser(cmd)
    for opt in _options(DECLARED[cmd]):
        if opt.range is not None:
            with pytest.raises(SystemExit) as exc:
                parser.parse_args([opt.names[0], str(_outside(opt.range))])
            assert exc.value.code == exitcodes.BAD_INPUT, opt.names


# ------------------------------------------------------------------ (c) aliases
def _other_value(name: str) -> str:
    """A valid value of the field ``name`` other than its default."""
    default = _FIELDS[name].default
    if str(_FIELDS[name].type).startswith("int"):
        return str(2 * default if default else 2)
    return str(default / 2 if default else 0.5)


@pytest.mark.parametrize("alias", sorted(_CLI_ALIASES))
def test_an_alias_sets_what_the_projects_flag_sets(alias):
    target = _CLI_ALIASES[alias]
    value = _other_value(target)
    parser = build_parser("train")
    by_alias = config_from_args(parser.parse_args([f"--{alias}", value]))
    by_name = config_from_args(parser.parse_args([f"--{target.replace('_', '-')}", value]))
    assert getattr(by_alias, target) == getattr(by_name, target) != _FIELDS[target].default
    assert by_alias == by_name


def test_the_authors_names_of_train_include_sync_interval():
    assert _CLI_ALIASES["sync_interval"] == "H" and _CLI_ALIASES["prob_no_grad"] == "p"
