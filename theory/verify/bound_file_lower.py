"""A user's lower bound from a bound file (``kind: lower``, :mod:`theory.verify.bound_file`).

A lower bound claims that the worst case of ``(1/T) sum_{t<T} E||grad f(xbar_t)||^2`` over
its assumption class is at least its formula, wherever its conditions hold::

    name: my_floor
    kind: lower
    expression: L*alpha*sigma**2/(2*K)      # in the project's symbols
    conditions: ["alpha*L <= 1"]            # optional: the claim is made only there
    algorithm: [sgd, local_sgd]             # sgd and/or local_sgd (default: both)
    attained_on: quadratic                  # optional: the instance that proves it
    measured: iterates                      # the only choice for a lower bound

It is verified like a registered lower bound (:mod:`theory.verify.lower`), on the quadratic
designs (:mod:`theory.verify.lower_designs`: no heterogeneity, no pulls, outer averaging):
the known worst case of the class (the descent lemma without noise; 0 at a minimiser)
refutes a claim above it, and with ``attained_on: quadratic`` the exact value of the
isotropic quadratic ``f_k = (L/2)||x||^2`` (the instance the file says proves it) refutes
a claim above that. Designs outside its conditions are not tested. The formula may use
``alpha, L, sigma, F0, zeta, K, H, T, p, eta, gamma, mu`` and ``R = T/H``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.errors import UserInputError
from theory.algorithm import lookup
from theory.bounds.lower import LowerBound
from theory.verify.records import BoundEntry

__all__ = ["FileLowerBound", "LOWER_FIELDS", "lower_from_entry"]

#: the fields a lower bound of a file may have
LOWER_FIELDS = {
    "name", "expression", "conditions", "kind", "algorithm", "attained_on", "measured",
    "provenance", "title", "notes",
}  # fmt: skip
#: the algorithms the quadratic designs run (minibatch SGD at H = 1, Local SGD otherwise)
ALGORITHMS = ("sgd", "local_sgd")
#: instances a file's lower bound may say it is attained on
ATTAINED_ON = ("quadratic",)
#: the parameters a lower bound's design determines (``R`` is ``T/H``)
_DESIGN = ("alpha", "L", "sigma", "F0", "zeta", "K", "H", "T", "p", "eta", "gamma", "mu")


@dataclass(frozen=True, eq=False)
class FileLowerBound:
    """A lower bound of a bound file: the statement ``formula`` (a
    :class:`~theory.bounds.lower.LowerBound`: expression and conditions), the algorithms it
    is stated for and the instances it says it is attained on (``""``: none, then only the
    known worst case of the class can refute it). :meth:`evaluate` is ``nan`` where a
    condition fails (no claim there)."""

    formula: LowerBound
    algorithms: tuple[str, ...]
    attained_on: str = ""
    bound_file: str | None = None
    measured: str = "iterates"
    kind: str = "lower"
    derived_here: bool = False
    parameters: tuple[str, ...] = field(init=False)
    terms: tuple[tuple[str, None], ...] = field(init=False)

    def __post_init__(self) -> None:
        used = set(self.formula.parameters)
        if "R" in used:
            used = (used - {"R"}) | {"T", "H"}
        bad = sorted(used - set(_DESIGN))
        if bad:
            raise UserInputError(
                f"lower bound {self.name!r}: 'expression' uses {bad}, which a design of a lower "
                f"bound does not determine (allowed: {[*_DESIGN, 'R']})"
            )
        object.__setattr__(self, "parameters", tuple(p for p in _DESIGN if p in used))
        object.__setattr__(self, "terms", tuple((str(t), None) for t in self.formula.terms))

    @property
    def name(self) -> str:
        return self.formula.name

    @property
    def title(self) -> str:
        return self.formula.title

    @property
    def provenance(self) -> str:
        return self.formula.provenance

    @property
    def notes(self) -> str:
        return self.formula.notes

    def _values(self, values: dict[str, object]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The formula's arguments (``R = T/H``) and where its conditions hold."""
        v = {k: np.asarray(values[k], dtype=float) for k in self.parameters}
        if "R" in self.formula.parameters:
            v["R"] = v["T"] / v["H"]
        args = {k: v[k] for k in self.formula.parameters}
        with np.errstate(all="ignore"):
            holds = np.asarray(self.formula.conditions_hold(**args), dtype=bool)
        return args, holds

    def evaluate(self, **values: Any) -> np.ndarray:
        """The claim at ``values`` (``nan`` where a condition fails)."""
        args, holds = self._values(values)
        with np.errstate(all="ignore"):
            claim = np.asarray(self.formula.evaluate(**args), dtype=float)
        return np.where(holds, claim, np.nan)

    def term_values(self, **values: Any) -> list[np.ndarray]:
        """Each additive term of the formula at ``values`` (``nan`` where a condition fails)."""
        args, holds = self._values(values)
        shape = np.broadcast_shapes(*(np.shape(a) for a in args.values()), np.shape(holds))
        with np.errstate(all="ignore"):
            parts = self.formula.compiled.f_terms(args, shape)
        return [np.where(holds, np.asarray(p, dtype=float), np.nan) for p in parts]


def _algorithms(entry: BoundEntry, where: str) -> tuple[str, ...]:
    names = entry.get("algorithm", list(ALGORITHMS))
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise UserInputError(f"{where}: 'algorithm' must be a name or a list of names")
    out = []
    for n in names:
        try:
            row = lookup(n, "algorithm")
        except UserInputError as exc:
            raise UserInputError(f"{where}: 'algorithm': {exc}") from None
        if row.name not in ALGORITHMS:
            raise UserInputError(
                f"{where}: 'algorithm' {n!r}: a lower bound of a file is verified on runs of "
                f"{list(ALGORITHMS)} only (no pulls, outer averaging)"
            )
        out.append(row.name)
    return tuple(dict.fromkeys(out))


def lower_from_entry(entry: BoundEntry, where: str, bound_file: str) -> FileLowerBound:
    """The lower bound of one entry of a bound file (``kind: lower``); errors name the field."""
    unknown = sorted(set(entry) - LOWER_FIELDS)
    if unknown:
        raise UserInputError(
            f"{where}: field(s) {unknown} do not apply to a lower bound (kind: lower); "
            f"its fields: {sorted(LOWER_FIELDS)}"
        )
    if entry.get("measured", "iterates") != "iterates":
        raise UserInputError(
            f"{where}: 'measured' of a lower bound must be 'iterates' (its designs are "
            f"measured at the iterates), got {entry['measured']!r}"
        )
    attained = entry.get("attained_on", "")
    if attained not in ("", *ATTAINED_ON):
        raise UserInputError(
            f"{where}: 'attained_on' must be one of {list(ATTAINED_ON)} (or left out), "
            f"got {attained!r}"
        )
    conds = entry.get("conditions", [])
    if not isinstance(conds, list | dict):
        raise UserInputError(f"{where}: 'conditions' must be a list or a mapping")
    name = entry["name"].strip()
    formula = LowerBound.from_strings(
        name,
        entry["expression"],
        conds,
        provenance=str(entry.get("provenance", f"user lower bound from {where}")),
        title=str(entry.get("title", name)),
        notes=str(entry.get("notes", "")),
    )
    return FileLowerBound(formula, _algorithms(entry, where), str(attained), bound_file)
