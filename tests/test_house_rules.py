"""The house rules that keep the code base simple, checked on every product module: no
file over 400 lines, no function over 80 lines, and no ``add_argument`` outside the
declaration machinery of the commands' options (:mod:`core.options`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the product's packages (the tests' shared harness included)
PACKAGES = ("core", "theory", "empirical", "paper_figures", "palsgd", "benchmarks", "tests/harness")
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 80
#: the one module that may call argparse's add_argument
DECLARATION_MACHINERY = "core/options.py"


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def long_functions(source: str) -> list[tuple[str, int]]:
    """(name, lines) of every function of ``source`` longer than the limit."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            n = node.end_lineno - node.lineno + 1
            if n > MAX_FUNCTION_LINES:
                out.append((node.name, n))
    return out


def add_argument_calls(source: str) -> list[int]:
    """Line numbers of the calls ``<anything>.add_argument(...)`` in ``source``."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_argument"
    ]


def test_the_scan_sees_the_product():
    names = {p.relative_to(ROOT).as_posix() for p in _modules()}
    assert DECLARATION_MACHINERY in names and "theory/verify/run.py" in names
    assert len(names) > 300


def test_no_file_over_400_lines():
    big = {
        p.relative_to(ROOT).as_posix(): n
        for p in _modules()
        if (n := p.read_text().count("\n")) > MAX_FILE_LINES
    }
    assert not big, f"files over {MAX_FILE_LINES} lines: {big}"


def test_no_function_over_80_lines():
    long = {
        f"{p.relative_to(ROOT).as_posix()}:{name}": n
        for p in _modules()
        for name, n in long_functions(p.read_text())
    }
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_options_are_declared_only_through_the_machinery():
    calls = {
        p.relative_to(ROOT).as_posix(): lines
        for p in _modules()
        if p.relative_to(ROOT).as_posix() != DECLARATION_MACHINERY
        and (lines := add_argument_calls(p.read_text()))
    }
    assert not calls, f"add_argument outside {DECLARATION_MACHINERY}: {calls}"


@pytest.mark.parametrize(
    "source, found",
    [
        ("p.add_argument('--x')\n", [1]),
        ("g = p.add_argument_group('a')\ng.add_argument('--y', type=int)\n", [2]),
        ("declare(p, [option('--x')])\n", []),
        ("# p.add_argument('--x') in a comment\n", []),
    ],
)
def test_negative_controls_of_the_add_argument_scan(source, found):
    assert add_argument_calls(source) == found


def test_negative_control_of_the_function_scan():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}\n") == [("f", MAX_FUNCTION_LINES + 1)]
    short = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    assert long_functions(f"def g():\n{short}\n") == []
