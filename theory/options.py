"""The notation's command-line flags, declared once for every command.

``--eta``, ``--p``, ``--H``, ``--alpha``, ... are the parameters of the table
:data:`theory.validation.PARAMS`; :func:`notation_option` makes the flag of one of them from
that table: its names (the project's, then every authors'-code alias of
:data:`theory.validation.ALIASES`: ``--H`` is also ``--sync_interval``), its meaning and its
allowed range, checked when the command line is parsed (:func:`core.options.ranged`). A
command states only what is its own: the default, ``nargs``, a narrower range.
"""

from __future__ import annotations

from typing import Any

from core.options import Option, option
from core.validation import ParamSpec
from theory.validation import ALIASES, PARAMS

__all__ = ["notation_option", "notation_names"]


def notation_names(name: str) -> tuple[str, ...]:
    """The option strings of the parameter ``name``: ``--name`` and its authors' aliases."""
    if name not in PARAMS:
        raise KeyError(f"{name!r} is not a parameter of the notation ({', '.join(PARAMS)})")
    return (f"--{name}", *(f"--{a}" for a, target in ALIASES.items() if target == name))


def notation_option(
    name: str,
    *,
    help: str | None = None,  # noqa: A002
    range: ParamSpec | None = None,  # noqa: A002
    aliases: bool = True,
    **settings: Any,
) -> Option:
    """The flag of the notation's parameter ``name`` (:data:`~theory.validation.PARAMS`).

    ``help``: the text after the parameter's meaning (the default, what a list means);
    without it, the meaning and the range. ``range``: a narrower range than the table's (a
    command that needs ``eta > 0``). ``aliases``: include the authors'-code names.
    ``settings``: argparse keywords (``nargs``, ``default``, ``metavar``, ``dest``, ...);
    ``type`` is ``int`` for an integer parameter, ``float`` otherwise.
    """
    names = notation_names(name) if aliases else notation_names(name)[:1]
    spec = PARAMS[name]
    rng = range or spec
    settings.setdefault("type", int if rng.integer else float)
    settings.setdefault("metavar", name)
    text = f"{spec.meaning}, {rng.allowed}" + (f"; {help}" if help else "")
    return option(*names, help=text, range=rng, **settings)
