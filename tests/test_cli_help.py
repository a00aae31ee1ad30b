"""``--help`` of every command: each flag has a description and its default; a numeric flag
states its range; a flag with a fixed set of values takes them as argparse choices. Also
the length of ``palsgd check``'s default answer (the full terms behind ``--verbose``)."""

from __future__ import annotations

import argparse
import importlib
import re

import pytest

from palsgd.cli import SUBCOMMANDS, build_parser, main

#: a range such as [0, 1), (0, inf) or [1, 8]
RANGE = re.compile(r"[\[(]\s*-?[\w.+-]+\s*,\s*-?[\w.+-]+\s*[\])]")


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command's parser, and each sub-action's (``palsgd cost predict``, ...)."""
    out = []
    for name in SUBCOMMANDS:
        parser = build_parser(name)
        out.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                out += [(f"{name} {sub}", p) for sub, p in action.choices.items()]
    return out


def _options() -> list[tuple[str, argparse.Action, str]]:
    rows = []
    for name, parser in _parsers():
        formatter = parser._get_formatter()
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            text = formatter._expand_help(action) if action.help else ""
            flag = action.option_strings[0] if action.option_strings else action.dest
            rows.append((f"{name} {flag}", action, text))
    return rows


OPTIONS = _options()


def test_every_command_is_covered():
    names = {row[0].split()[0] for row in OPTIONS}
    assert names == set(SUBCOMMANDS)
    assert len(OPTIONS) > 150


@pytest.mark.parametrize("key, action, text", OPTIONS, ids=[r[0] for r in OPTIONS])
def test_flag_has_description_default_range_choices(key, action, text):
    assert len(text) > 10, f"{key}: no description"
    assert "default" in text, f"{key}: no default in {text!r}"
    typ = getattr(action.type, "__name__", "")
    if typ in ("int", "float") and not action.choices:
        assert RANGE.search(text), f"{key}: no range in {text!r}"
    if " | " in text:
        assert action.choices, f"{key}: alternatives in prose, not argparse choices: {text!r}"


def test_help_exits_0_for_every_command(capsys):
    for name in SUBCOMMANDS:
        assert main([name, "--help"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: palsgd " + name)


def test_cost_subcommands_have_descriptions(capsys):
    for action in ("predict", "check", "calibrate", "profiles"):
        assert main(["cost", action, "--help"]) == 0
        out = capsys.readouterr().out
        assert len(out.splitlines()) > 3


def test_modules_are_the_registered_ones():
    for module, _ in SUBCOMMANDS.values():
        assert hasattr(importlib.import_module(module), "add_arguments")
