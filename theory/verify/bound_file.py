"""A user's bound from a YAML or JSON file (``palsgd verify --bound-file F``).

The file holds one bound, or a list of them under ``bounds:``, each a mapping::

    name: my_sgd                       # required, a new name
    expression: 2*F0/(alpha*T) + L*alpha*sigma**2/K   # required
    conditions: ["alpha*L <= 1"]       # a list, or a mapping name -> inequality
    algorithm: sgd                     # a name of the algorithm table (theory.algorithm)
    coins: independent                 # independent | shared (an algorithm with pull steps)
    outer: average                     # the outer update(s) it covers: a name or a list
    assumptions: [A1, A2, A4]          # keys of theory.assumptions; A3iid for i.i.d. data
    recommended_step: sqrt(K/T)/L      # optional
    measured: iterates                 # iterates (default) | anchors
    kind: upper                        # upper (default) | lower
    provenance: my notes, eq. 3        # optional

``measured: anchors`` states the bound for ``(1/R) sum_{r<R} E||grad f(z_r)||^2`` over the
anchors of the ``R = T/H`` full rounds (an algorithm with rounds), which the verifier then
measures (:attr:`theory.bound.Bound.measured`). ``kind: lower`` states a lower bound on the
worst case over the class (:mod:`theory.verify.bound_file_lower`: its fields, and how it is
verified).

A bound is stated for one algorithm (the verifier simulates exactly that spec, with the
coin model ``coins`` and the outer update(s) ``outer``, default the algorithm's own); the
assumption of its coin model (``S3``, ``S3s``) is added for an algorithm with pull steps.
Formulas are read by :mod:`theory.safe_parse` (never evaluated as Python). Two bounds of
one name in a file are refused. A relative path that does not exist in the working
directory is looked up in the toolkit's own directory (where ``docs/examples/`` lives), so
the README's ``--bound-file docs/examples/my_bound.yaml`` runs from any directory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from core.errors import UserInputError
from core.files import read_mapping_file, resolve_input_path
from theory.algorithm import AlgorithmSpec
from theory.assumptions import ALL_ASSUMPTIONS, COIN_ASSUMPTIONS
from theory.bound import Bound
from theory.verify.bound_file_lower import LOWER_FIELDS, FileLowerBound, lower_from_entry
from theory.verify.records import BoundEntry

__all__ = ["load_bound_file"]

_KEYS = {a.key: a for a in ALL_ASSUMPTIONS}
_FIELDS = {
    "name", "expression", "conditions", "algorithm", "coins", "outer", "assumptions",
    "recommended_step", "provenance", "title", "notes", "measured", "kind",
} | LOWER_FIELDS  # fmt: skip
#: what a bound may average (:attr:`theory.bound.Bound.measured`) and the kinds of statement
MEASURED = ("iterates", "anchors")
KINDS = ("upper", "lower")


def resolve_bound_file(path: str | os.PathLike) -> Path:
    """``path``, or the same path under the toolkit's directory
    (:func:`core.files.resolve_input_path`)."""
    return resolve_input_path(path, "--bound-file (argument 'path')")


def load_bound_file(path: str | os.PathLike) -> list[Bound | FileLowerBound]:
    """The bounds defined in ``path`` (:func:`resolve_bound_file`), upper bounds as
    :class:`~theory.bound.Bound` and lower bounds (``kind: lower``) as
    :class:`~theory.verify.bound_file_lower.FileLowerBound`; errors name the file, the
    bound and the field. Two bounds of one name are refused."""
    path = resolve_bound_file(path)
    data = read_mapping_file(path, "--bound-file")
    entries = data.get("bounds", [data]) if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise UserInputError(f"--bound-file '{path}': expected a bound or a list 'bounds:'")
    bounds = [_one(e, f"--bound-file '{path}'", str(path)) for e in entries]
    names = [b.name for b in bounds]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserInputError(f"--bound-file '{path}': bound name(s) {twice} given twice")
    return bounds


def _one(entry: Any, where: str, path: str) -> Bound | FileLowerBound:
    if not isinstance(entry, dict):
        raise UserInputError(f"{where}: each bound must be a mapping, got {type(entry).__name__}")
    unknown = sorted(set(entry) - _FIELDS)
    if unknown:
        raise UserInputError(f"{where}: unknown field(s) {unknown}; known: {sorted(_FIELDS)}")
    for need in ("name", "expression"):
        if not isinstance(entry.get(need), str) or not entry[need].strip():
            raise UserInputError(f"{where}: field '{need}' (text) is required")
    name = entry["name"].strip()
    where = f"{where}, bound {name!r}"
    kind = _choice(entry, "kind", KINDS, where)
    measured = _choice(entry, "measured", MEASURED, where)
    if kind == "lower":
        return lower_from_entry(entry, where, path)
    if "attained_on" in entry:
        raise UserInputError(f"{where}: 'attained_on' is a field of a lower bound (kind: lower)")
    spec, outers = _algorithm(entry, where)
    if measured == "anchors" and not spec.definition.rounds:
        raise UserInputError(
            f"{where}: 'measured: anchors' needs an algorithm with rounds (anchors); "
            f"{spec.kind!r} has none"
        )
    keys = entry.get("assumptions", ["A1", "A2", "A3", "A4"])
    if not isinstance(keys, list):
        raise UserInputError(f"{where}: 'assumptions' must be a list of keys")
    missing = [k for k in keys if k not in _KEYS]
    if missing:
        raise UserInputError(f"{where}: unknown assumption(s) {missing}; known: {sorted(_KEYS)}")
    coin_keys = {a.key for a in COIN_ASSUMPTIONS.values()}
    assumptions = [_KEYS[k] for k in keys if k not in coin_keys]
    if spec.definition.pulls:
        assumptions.append(COIN_ASSUMPTIONS[spec.coins])
    conds = entry.get("conditions", [])
    if not isinstance(conds, list | dict):
        raise UserInputError(f"{where}: 'conditions' must be a list or a mapping")
    kw: dict[str, object] = {
        "algorithm": spec,
        "outers": outers,
        "assumptions": tuple(assumptions),
        "provenance": str(entry.get("provenance", f"user bound from {where}")),
        "title": str(entry.get("title", name)),
        "notes": str(entry.get("notes", "")),
        "measured": measured,
    }
    if entry.get("recommended_step") is not None:
        kw["recommended_step"] = str(entry["recommended_step"])
    return Bound.from_strings(name, entry["expression"], conds, **kw)


def _choice(entry: BoundEntry, key: str, allowed: tuple[str, ...], where: str) -> str:
    """``entry[key]`` (default the first of ``allowed``), one of ``allowed``."""
    value = entry.get(key, allowed[0])
    if not isinstance(value, str) or value not in allowed:
        raise UserInputError(f"{where}: '{key}' must be one of {list(allowed)}, got {value!r}")
    return value


def _algorithm(entry: BoundEntry, where: str) -> tuple[AlgorithmSpec, tuple[str, ...]]:
    """The spec a bound of the file is stated for (``algorithm``, ``coins``, ``outer``),
    validated against the algorithm table, and the outer updates it covers."""
    name = entry.get("algorithm", "palsgd")
    if isinstance(name, list) and len(name) == 1:
        name = name[0]
    if not isinstance(name, str):
        raise UserInputError(
            f"{where}: 'algorithm' must be one name of the algorithm table (a bound is stated "
            "for one algorithm; the p = 0 case of PALSGD is local_sgd)"
        )
    outers = entry.get("outer", [])
    outers = [outers] if isinstance(outers, str) else outers
    if not isinstance(outers, list) or not all(isinstance(o, str) for o in outers):
        raise UserInputError(f"{where}: 'outer' must be an outer update or a list of them")
    first = {"outer": outers[0]} if outers else {}
    try:
        spec = AlgorithmSpec.of(name, coins=entry.get("coins", "independent"), **first)
    except UserInputError as exc:
        raise UserInputError(f"{where}: {exc}") from None
    return spec, tuple(outers)
