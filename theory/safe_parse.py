"""Parse a user's formula or inequality into sympy without evaluating any Python.

``sympy.sympify`` runs ``eval`` on its input, so text such as ``__import__('os').system(...)``
would execute. :func:`parse_formula` instead reads the text with :mod:`ast` and accepts a
whitelist only: numbers, the project's symbols (:mod:`theory.symbols`), ``+ - * / **``,
unary ``+``/``-``, parentheses, the functions ``sqrt, log, exp, min, max, Abs`` (``abs``),
and, for a condition, one comparison ``<=, <, >=, >``. Anything else is refused with a
message naming the offending token and its column.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

import sympy as sp

from theory import symbols as S
from theory.validation import UserInputError

__all__ = ["parse_formula", "parse_condition", "FUNCTIONS"]

#: the functions a formula may call
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": sp.sqrt,
    "log": sp.log,
    "exp": sp.exp,
    "min": sp.Min,
    "max": sp.Max,
    "Min": sp.Min,
    "Max": sp.Max,
    "Abs": sp.Abs,
    "abs": sp.Abs,
}
_BIN = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}
_CMP = {ast.LtE: sp.Le, ast.Lt: sp.Lt, ast.GtE: sp.Ge, ast.Gt: sp.Gt}
_SYMBOLS = {s.name: s for s in S.ALL} | {"eps": S.eps}


def _fail(what: str, text: str, node: ast.AST | None, why: str) -> UserInputError:
    col = getattr(node, "col_offset", None)
    where = f" at column {col + 1}" if col is not None else ""
    return UserInputError(f"cannot parse {what} {text!r}{where}: {why}")


def _convert(node: ast.AST, what: str, text: str) -> Any:
    def seg() -> str:
        return ast.get_source_segment(text, node) or type(node).__name__

    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise _fail(what, text, node, f"{seg()!r} is not a number")
        return sp.Integer(node.value) if isinstance(node.value, int) else sp.Float(node.value)
    if isinstance(node, ast.Name):
        if node.id in _SYMBOLS:
            return _SYMBOLS[node.id]
        raise _fail(
            what,
            text,
            node,
            f"unknown name {node.id!r}; allowed symbols: {sorted(_SYMBOLS)}, functions: "
            f"{sorted(FUNCTIONS)}",
        )
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        left, right = _convert(node.left, what, text), _convert(node.right, what, text)
        if isinstance(node.op, ast.Pow) and right.is_Number and abs(float(right)) > 64:
            raise _fail(what, text, node, f"exponent of {seg()!r} is larger than 64")
        return _BIN[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _convert(node.operand, what, text)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Call):
        fname = node.func.id if isinstance(node.func, ast.Name) else None
        if fname not in FUNCTIONS or node.keywords:
            raise _fail(what, text, node, f"call {seg()!r} is not allowed; functions: "
                        f"{sorted(FUNCTIONS)}")  # fmt: skip
        args = [_convert(a, what, text) for a in node.args]
        if not args:
            raise _fail(what, text, node, f"{fname}() needs an argument")
        return FUNCTIONS[fname](*args)
    raise _fail(what, text, node, f"{seg()!r} is not allowed (only numbers, symbols, "
                "+ - * / **, and the listed functions)")  # fmt: skip


def _tree(text: str, what: str) -> ast.AST:
    if not isinstance(text, str):
        raise UserInputError(f"{what} must be text, got {type(text).__name__}")
    if len(text) > 10_000:
        raise UserInputError(f"{what} is longer than 10000 characters")
    src = text.replace("^", "**")
    try:
        return ast.parse(src.strip(), mode="eval").body
    except SyntaxError as exc:
        raise UserInputError(f"cannot parse {what} {text!r}: {exc.msg}") from None


def parse_formula(text: str, what: str = "expression") -> sp.Expr:
    """A formula (no comparison) as a sympy expression in the project's symbols."""
    node = _tree(text, what)
    src = text.replace("^", "**").strip()
    if isinstance(node, ast.Compare):
        raise _fail(what, src, node, "a formula may not contain a comparison")
    return sp.sympify(_convert(node, what, src))


def parse_condition(text: str, what: str = "condition") -> sp.core.relational.Relational:
    """An inequality ``lhs OP rhs`` with ``OP`` one of ``<=, <, >=, >``."""
    node = _tree(text, what)
    src = text.replace("^", "**").strip()
    if not isinstance(node, ast.Compare) or len(node.ops) != 1 or type(node.ops[0]) not in _CMP:
        raise UserInputError(
            f"{what} {text!r} is not an inequality (one comparison with <=, <, >= or >)"
        )
    lhs = _convert(node.left, what, src)
    rhs = _convert(node.comparators[0], what, src)
    return _CMP[type(node.ops[0])](lhs, rhs, evaluate=False)
