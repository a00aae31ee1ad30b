"""``palsgd bounds``: list the encoded bounds, or print one bound's LaTeX.

``palsgd bounds`` lists every registered bound (name, title, published or derived here,
algorithms, assumptions, conditions, provenance), then the lower bounds that ``palsgd
check`` prints beside them (:mod:`theory.lower`); ``palsgd bounds NAME ...`` only those;
``--latex NAME`` prints the statement's LaTeX; ``--json`` prints
:meth:`theory.bound.Bound.describe` (or :func:`theory.lower.describe_lower`) for each.
"""

from __future__ import annotations

import argparse
import json

from core.errors import UserInputError
from core.options import Option, declare, option
from theory.bound import registry as bound_registry

__all__ = ["OPTIONS", "add_arguments", "run", "render"]


#: every option of ``palsgd bounds``
OPTIONS: tuple[Option, ...] = (
    option("names", nargs="*", metavar="NAME", help="bounds to show (default: all)"),
    option(
        "--latex",
        metavar="NAME",
        help="print the LaTeX statement of one bound (default: the text descriptions)",
    ),
    option("--json", action="store_true", help="print the descriptions as JSON"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``palsgd bounds`` (:data:`OPTIONS`)."""
    declare(parser, OPTIONS)


def render(desc: dict) -> str:
    """Human-readable text of one :meth:`Bound.describe` dict."""
    flag = "derived here" if desc["derived_here"] else "published statement"
    lines = [
        f"{desc['name']}: {desc['title']}",
        f"  kind: {flag}; algorithms: {', '.join(desc['algorithms']) or '-'}",
        f"  bound: {desc['expression']}",
        "  conditions:",
    ]
    lines += [
        f"    {c['name']}: {c['relation']}"
        + (f"   ({c['description']})" if c["description"] else "")
        for c in desc["conditions"]
    ] or ["    (none)"]
    lines.append("  assumptions:")
    lines += [f"    {a}" for a in desc["assumptions"]] or ["    (none listed)"]
    if desc["recommended_step"]:
        lines.append(f"  recommended step: alpha = {desc['recommended_step']}")
    lines.append(f"  provenance: {desc['provenance']}")
    if desc["notes"]:
        lines.append(f"  notes: {desc['notes']}")
    return "\n".join(lines)


def render_lower(desc: dict) -> str:
    """Human-readable text of one :func:`theory.lower.describe_lower` dict."""
    flag = "derived here" if desc["derived_here"] else "published statement"
    lines = [
        f"{desc['name']}: {desc['title']}",
        f"  kind: lower bound, {flag}; algorithms: {', '.join(desc['algorithms'])}",
        f"  parameters: {', '.join(desc['parameters'])}"
        + (f" (optional: {', '.join(desc['optional'])})" if desc.get("optional") else ""),
        f"  provenance: {desc['provenance']}",
    ]
    if desc["notes"]:
        lines.append(f"  notes: {desc['notes']}")
    return "\n".join(lines)


def _get(known: dict[str, dict], name: str) -> dict:
    if name not in known:
        raise UserInputError(f"unknown bound {name!r}; known bounds: {sorted(known)}")
    return known[name]


def run(args: argparse.Namespace) -> int:
    """Run ``palsgd bounds``; unknown names raise UserInputError (exit 2).

    The descriptions come from :func:`theory.bound.registry.descriptions` (the on-disk
    registry snapshot: no sympy or numpy once it is written).
    """
    known = {d["name"]: d for d in bound_registry.descriptions()}
    known |= {d["name"]: d for d in bound_registry.lower_descriptions()}
    if args.latex:
        d = _get(known, args.latex)
        if d["latex"] is None:
            raise UserInputError(
                f"--latex {args.latex}: a lower bound evaluated on instances has no closed "
                "form (palsgd bounds NAME describes it)"
            )
        if args.json:
            print(json.dumps({"name": d["name"], "latex": d["latex"]}, indent=2))
        else:
            print(d["latex"])
        return 0
    descs = [_get(known, n) for n in args.names] if args.names else list(known.values())
    if args.json:
        print(json.dumps(descs, indent=2))
        return 0
    upper = [render(d) for d in descs if d.get("kind") != "lower"]
    lower = [render_lower(d) for d in descs if d.get("kind") == "lower"]
    if lower:
        lower[0] = (
            "lower bounds (no valid upper bound is below them inside its conditions; "
            "palsgd check prints them beside each bound):\n\n" + lower[0]
        )
    print("\n\n".join(upper + lower))
    return 0
