"""How a command's options are declared: once, as data.

Every command of the project lists its options as :class:`Option` records (grouped by
:class:`Group`) and hands them to :func:`declare`, the one place that calls argparse's
``add_argument``. A declaration is a value: it can be listed, tested, rendered in the docs
and checked for duplicates without building a parser, and an option shared by several
commands (the notation's ``--eta``, ``--p``, ``--H``: :mod:`theory.options`) is one record
that each of them includes.

A numeric option may carry its allowed range, a :class:`~core.validation.ParamSpec`: the
value is then checked when the command line is parsed, and a value outside the range is
refused with a message that names the flag as typed and the range, exit code 2 (argparse's
usage error).

Example::

    OPTIONS = (
        Group("output", (
            option("--out", metavar="DIR", help="output directory (default: none)"),
            option("--json", action="store_true", help="print JSON (default: text)"),
        )),
    )
    declare(parser, OPTIONS)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy: imported when a ranged value is parsed, not with the parser
    from core.validation import ParamSpec

__all__ = ["Option", "Group", "option", "declare", "ranged", "option_names", "SUPPRESS"]

#: argparse's marker for "no attribute unless given" (a default or a help text)
SUPPRESS = argparse.SUPPRESS

_UNSET: Any = object()


@dataclass(frozen=True)
class Option:
    """One command-line option (or positional argument), declared once.

    ``names``: the option strings, the canonical one first (``("--H", "--sync_interval")``),
    or one name without dashes for a positional argument. ``help``: what it sets, ending with
    its default. ``range``: the allowed values of a number (checked at parse time, see
    :func:`ranged`). ``settings``: any other keyword of ``add_argument`` (``type``,
    ``nargs``, ``choices``, ``metavar``, ``dest``, ``action``, ``required``, ``default``),
    stored as a sorted tuple of pairs so that the record stays hashable.
    """

    names: tuple[str, ...]
    help: str | None = None
    range: ParamSpec | None = None
    settings: tuple[tuple[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.names:
            raise ValueError("an option needs at least one name")
        positional = not self.names[0].startswith("-")
        if positional and len(self.names) > 1:
            raise ValueError(f"positional argument {self.names[0]!r} takes one name")
        if any(n.startswith("-") == positional for n in self.names[1:]):
            raise ValueError(f"option {self.names[0]!r}: mixed positional and flag names")

    @property
    def kwargs(self) -> dict[str, Any]:
        """The keywords of ``add_argument`` (help and the range's type included)."""
        kw = dict(self.settings)
        if self.help is not None:
            kw["help"] = self.help
        if self.range is not None:
            kw["type"] = ranged(self.range, kw.get("type", float))
        return kw

    @property
    def dest(self) -> str:
        """The attribute the parsed value lands in (argparse's rule)."""
        kw = dict(self.settings)
        if "dest" in kw:
            return kw["dest"]
        if not self.names[0].startswith("-"):
            return self.names[0]
        longs = [n for n in self.names if n.startswith("--")]
        return (longs or self.names)[0].lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Group:
    """A titled group of options (argparse's argument group); ``exclusive`` makes the options
    mutually exclusive (one of them at most; ``required``: exactly one)."""

    title: str | None
    options: tuple[Option, ...]
    description: str | None = None
    exclusive: bool = False
    required: bool = False


def option(
    *names: str, help: str | None = None, range: ParamSpec | None = None, **settings: Any
) -> Option:  # noqa: A002
    """An :class:`Option` from argparse's vocabulary: ``option("--out", metavar="DIR",
    help=...)``. ``range`` checks a number when it is parsed (``type`` converts it first:
    ``float`` unless given)."""
    return Option(tuple(names), help, range, tuple(sorted(settings.items())))


def declare(parser: argparse.ArgumentParser, items: Iterable[Option | Group]) -> None:
    """Add the options ``items`` to ``parser`` (groups as argparse argument groups): the one
    call of ``add_argument`` of the project's commands. Refuses an option string declared
    twice (argparse would only notice at the second ``add_argument``)."""
    seen = set(option_names(parser))
    for item in items:
        if isinstance(item, Group):
            if item.exclusive:
                target: Any = parser.add_mutually_exclusive_group(required=item.required)
                if item.title is not None:  # an exclusive group has no title of its own
                    target = parser.add_argument_group(item.title, item.description)
                    target = target.add_mutually_exclusive_group(required=item.required)
            else:
                target = parser.add_argument_group(item.title, item.description)
            opts: Sequence[Option] = item.options
        else:
            target, opts = parser, (item,)
        for opt in opts:
            dup = seen.intersection(n for n in opt.names if n.startswith("-"))
            if dup:
                raise ValueError(f"option {sorted(dup)[0]} is declared twice")
            seen.update(n for n in opt.names if n.startswith("-"))
            target.add_argument(*opt.names, **opt.kwargs)


def option_names(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string ``parser`` knows (``-h`` and ``--help`` included)."""
    return [s for action in parser._actions for s in action.option_strings]


def ranged(spec: ParamSpec, convert: Callable[[str], Any] = float) -> Callable[[str], Any]:
    """An argparse ``type`` that converts a value with ``convert`` (``int`` for an integer
    range) and refuses one outside ``spec``'s range with argparse's usage error, which names
    the flag as typed: ``argument --p/--prob_no_grad: 1.5 is not in [0, 1)`` (argparse lists every
    name of the flag)."""
    if spec.integer and convert is float:
        convert = int

    def parse(text: str) -> Any:
        from core.validation import ParameterError, check_spec

        try:
            value = convert(text)
        except (TypeError, ValueError):
            kind = "an integer" if convert is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
        try:
            check_spec(spec, value)
        except ParameterError:
            where = f"an {spec.allowed}" if spec.integer else f"in {spec.allowed}"
            raise argparse.ArgumentTypeError(f"{text} is not {where}") from None
        return value

    parse.__name__ = convert.__name__  # argparse names the type in its own messages
    return parse
