"""Parse a user's formula or inequality into sympy without evaluating any Python.

``sympy.sympify`` runs ``eval`` on its input, so text such as ``__import__('os').system(...)``
would execute. :func:`parse_formula` instead reads the text with :mod:`ast` and accepts a
whitelist only: numbers, the project's symbols (:mod:`theory.symbols`), ``+ - * / **``,
unary ``+``/``-``, parentheses, the functions ``sqrt, log, exp, min, max, Abs`` (``abs``),
and, for a condition, one comparison ``<=, <, >=, >``. Anything else is refused with a
message naming the offending token and its column.

Limits, so that no text can make the parser run for ever or a bound be infinite by
construction: at most :data:`MAX_LENGTH` characters and :data:`MAX_DEPTH` levels of nesting;
a power's exponent, nested powers' exponents multiplied included (``(L**8)**16``), at most
:data:`MAX_EXPONENT` in absolute value; every number, written or computed from numbers
(``(2**64)**64``, ``1e308*1e308``), finite and at most :data:`MAX_MAGNITUDE` in absolute
value; no undefined constant (``0/0``, ``log(0)``) or imaginary one (``sqrt(-1)``).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from typing import Any

import sympy as sp

from core.errors import UserInputError
from theory import symbols as S

__all__ = [
    "parse_formula",
    "parse_condition",
    "FUNCTIONS",
    "MAX_LENGTH",
    "MAX_DEPTH",
    "MAX_EXPONENT",
    "MAX_MAGNITUDE",
]

#: the longest formula read
MAX_LENGTH = 10_000
#: the deepest nesting of operations, calls and parentheses
MAX_DEPTH = 64
#: the largest exponent of a power (nested powers: the product of their exponents)
MAX_EXPONENT = 64
#: the largest absolute value of a number in a formula, written or computed from numbers
MAX_MAGNITUDE = 1e300

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
    return UserInputError(f"cannot parse {what} {_short(text)!r}{where}: {_short(why, 160)}")


def _short(text: str, n: int = 80) -> str:
    """``text`` cut to ``n`` characters (a refused formula may be 10000 long)."""
    return text if len(text) <= n else text[: n - 3] + "..."


def _checked_number(value: Any, what: str, text: str, node: ast.AST) -> Any:
    """``value``; refused when it is a number that is undefined, imaginary, infinite or
    larger than :data:`MAX_MAGNITUDE` (symbolic values pass)."""
    if not getattr(value, "is_number", False):
        return value
    seg = ast.get_source_segment(text, node) or type(node).__name__
    if value.has(sp.nan, sp.zoo, sp.oo, -sp.oo) or not value.is_real:
        raise _fail(what, text, node, f"{seg!r} is undefined, infinite or not real")
    if value.is_Number and abs(value) > MAX_MAGNITUDE:
        raise _fail(what, text, node, f"{seg!r} is larger than {MAX_MAGNITUDE:g} in magnitude")
    return value


def _power(left: Any, right: Any, what: str, text: str, node: ast.BinOp) -> Any:
    """``left ** right`` within :data:`MAX_EXPONENT` and :data:`MAX_MAGNITUDE`, checked before
    it is computed (an exact integer power of a large number never ends)."""
    seg = ast.get_source_segment(text, node) or "**"
    if right.is_Number:
        inner = left.exp if left.is_Pow and left.exp.is_Number else sp.Integer(1)
        if abs(float(right) * float(inner)) > MAX_EXPONENT:
            raise _fail(what, text, node, f"exponent of {seg!r} is larger than {MAX_EXPONENT}")
        if left.is_Number and left != 0:
            digits = math.log10(abs(float(left))) * float(right)
            if abs(digits) > math.log10(MAX_MAGNITUDE):
                raise _fail(what, text, node, f"{seg!r} is beyond {MAX_MAGNITUDE:g} in magnitude")
    return left**right


def _convert(node: ast.AST, what: str, text: str, depth: int = 0) -> Any:
    def seg() -> str:
        return ast.get_source_segment(text, node) or type(node).__name__

    if depth > MAX_DEPTH:
        raise _fail(what, text, node, f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise _fail(what, text, node, f"{seg()!r} is not a number")
        big = abs(node.value) > (
            int(MAX_MAGNITUDE) if isinstance(node.value, int) else MAX_MAGNITUDE
        )
        if big or not math.isfinite(node.value if isinstance(node.value, float) else 0.0):
            raise _fail(what, text, node, f"{seg()!r} is infinite or larger than "
                        f"{MAX_MAGNITUDE:g}")  # fmt: skip
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
        left = _convert(node.left, what, text, depth + 1)
        right = _convert(node.right, what, text, depth + 1)
        if isinstance(node.op, ast.Pow):
            return _checked_number(_power(left, right, what, text, node), what, text, node)
        return _checked_number(_BIN[type(node.op)](left, right), what, text, node)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _convert(node.operand, what, text, depth + 1)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Call):
        fname = node.func.id if isinstance(node.func, ast.Name) else None
        if fname not in FUNCTIONS or node.keywords:
            raise _fail(what, text, node, f"call {seg()!r} is not allowed; functions: "
                        f"{sorted(FUNCTIONS)}")  # fmt: skip
        args = [_convert(a, what, text, depth + 1) for a in node.args]
        if not args:
            raise _fail(what, text, node, f"{fname}() needs an argument")
        if fname == "exp" and args[0].is_number and float(args[0]) > math.log(MAX_MAGNITUDE):
            raise _fail(what, text, node, f"{seg()!r} is beyond {MAX_MAGNITUDE:g} in magnitude")
        return _checked_number(FUNCTIONS[fname](*args), what, text, node)
    raise _fail(what, text, node, f"{seg()!r} is not allowed (only numbers, symbols, "
                "+ - * / **, and the listed functions)")  # fmt: skip


def _tree(text: str, what: str) -> ast.AST:
    if not isinstance(text, str):
        raise UserInputError(f"{what} must be text, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise UserInputError(f"{what} is longer than {MAX_LENGTH} characters")
    src = text.replace("^", "**")
    try:
        return ast.parse(src.strip(), mode="eval").body
    except SyntaxError as exc:
        raise UserInputError(f"cannot parse {what} {_short(text)!r}: {exc.msg}") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise UserInputError(f"cannot parse {what}: {exc}") from None
    except (RecursionError, MemoryError):  # the parser's own nesting limit
        raise UserInputError(
            f"cannot parse {what}: nested deeper than {MAX_DEPTH} levels"
        ) from None


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
            f"{what} {_short(text)!r} is not an inequality (one comparison with <=, <, >= or >)"
        )
    lhs = _convert(node.left, what, src)
    rhs = _convert(node.comparators[0], what, src)
    return _CMP[type(node.ops[0])](lhs, rhs, evaluate=False)
