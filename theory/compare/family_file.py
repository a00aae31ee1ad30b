"""Users' own problems for the Monte-Carlo map: a declarative file, or any Python object that
builds a problem per heterogeneity.

The protocol (:class:`ProblemFamily`): ``build(zeta)`` returns a
:class:`theory.problems.Problem` (``zeta = None``: the family's own heterogeneity) and
``describe()`` a JSON-ready mapping of what the map states about it. Anything with these two
methods can be given to :func:`theory.compare.run_mc.run_mc_map` as ``family``; a
:class:`~theory.problems.Problem` must implement ``local_fs`` and ``local_grads`` (and
declare ``L``, ``sigma2``, ``zeta2``, ``f_star``, :mod:`theory.problems.base`).

The declarative form (``palsgd map --engine montecarlo --family-file FILE``; YAML, or JSON
with a ``.json`` suffix), worker ``k`` minimising

    f_k(x) = sum_i [ eigenvalues[k][i] (x_i - minimisers[k][i])^2 / 2 + c cos(w x_i) ]

with keys ``eigenvalues`` (``K >= 2`` lists of ``d`` positive numbers), ``minimisers`` (``K``
lists of ``d``), ``x0`` (``d``, default zeros), ``sigma2`` (the total variance of one worker's
gradient noise, isotropic Gaussian; default 0), ``name`` and an optional common nonconvex
term ``cosine: {c: C, w: W}`` (``f`` is nonconvex when ``c w^2 > min_i lbar_i``). The
toolkit computes the constants and states them in the map's JSON: ``L = max l + |c| w^2``
(exact), ``sigma2`` (exact), ``zeta2`` the supremum of ``(1/K) sum_k ||grad f_k - grad f||^2``
over the declared region (exact; the cosine is common, so it cancels), ``zeta2_star`` its
value at the quadratic part's minimiser, ``f_star`` (exact: a global 1-D search per
coordinate, :mod:`theory.problems.hetero_cosine`) and ``F0 = f(x0) - f_star``. A cell's
``--zeta`` rescales the minimisers about that minimiser (as ``--problem`` does); without
``--zeta`` the file's own heterogeneity is used.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from core.errors import UserInputError
from core.files import read_mapping_file, resolve_input_path
from core.records import Json, JsonRow
from theory.problems.base import Problem
from theory.problems.hessians import HeteroHessianQuadratic, hetero_hessian_from, with_zeta
from theory.problems.hetero_cosine import HeteroCosine

__all__ = ["ProblemFamily", "FileFamily", "FamilyDescription", "CosineTerm", "load_family_file"]


@runtime_checkable
class ProblemFamily(Protocol):
    """What the Monte-Carlo map needs of a user's problem (see the module docstring)."""

    def build(self, zeta: float | None) -> Problem: ...

    def describe(self) -> Mapping[str, Json]: ...


@dataclass(frozen=True)
class FileFamily:
    """The declarative family of a file: its quadratic part and optional common cosine."""

    path: str
    quadratic: HeteroHessianQuadratic
    c: float = 0.0
    w: float = 1.0

    def build(self, zeta: float | None) -> Problem:
        q = self.quadratic if zeta is None else with_zeta(self.quadratic, zeta)
        if self.c == 0.0:
            return q
        return HeteroCosine(
            c=self.c, w=self.w, eigenvalues=q.eigenvalues, minimisers=q.minimisers,
            x0=q.x0(), sigma2=q.sigma2, name=q.name,
        )  # fmt: skip

    def describe(self) -> FamilyDescription:
        """What the map states about the family (``problems["source"]`` of ``map.json``)."""
        p = self.build(None)
        return FamilyDescription(
            family_file=self.path, name=p.name, K=p.K, d=p.d,
            cosine=CosineTerm(self.c, self.w) if self.c else None, L=p.L, sigma2=p.sigma2,
            zeta2_region=p.zeta2, zeta2_star=getattr(p, "zeta2_star", None), f_star=p.f_star,
            F0=p.F0,
        )  # fmt: skip


@dataclass(frozen=True)
class CosineTerm(JsonRow):
    """The common nonconvex term ``c cos(w x_i)`` of every coordinate (``w``: a frequency
    in inverse units of ``x``; ``c``: in units of ``f``)."""

    c: float
    w: float


@dataclass(frozen=True)
class FamilyDescription(JsonRow):
    """A family file's problem as the map states it: the resolved ``family_file`` path,
    its ``name``, ``K`` workers, dimension ``d``, the ``cosine`` term (``None``: a
    quadratic), and its exact constants: ``L`` the smoothness, ``sigma2`` one worker's
    gradient-noise variance (total), ``zeta2_region`` the heterogeneity over the declared
    region and ``zeta2_star`` at the quadratic part's minimiser (``None``: not defined),
    ``f_star`` the minimum of ``f`` and ``F0 = f(x0) - f_star``."""

    family_file: str
    name: str
    K: int
    d: int
    cosine: CosineTerm | None
    L: float
    sigma2: float
    zeta2_region: float
    zeta2_star: float | None
    f_star: float
    F0: float


def load_family_file(path: str | os.PathLike[str], flag: str = "--family-file") -> FileFamily:
    """The :class:`FileFamily` of a YAML/JSON family file; every problem is refused with the
    file and the key named (``flag``: the option that named the file)."""
    resolved = resolve_input_path(path, flag)
    data = dict(read_mapping_file(resolved, f"family file ({flag})"))
    where = f"{flag} '{resolved}'"
    cos = data.pop("cosine", None)
    c, w = 0.0, 1.0
    if cos is not None:
        if not isinstance(cos, dict) or set(cos) - {"c", "w"} or "c" not in cos:
            raise UserInputError(f"{where}: 'cosine' must be a mapping {{c: C, w: W}}")
        try:
            c, w = float(cos["c"]), float(cos.get("w", 1.0))
        except (TypeError, ValueError):
            raise UserInputError(f"{where}: 'cosine' c and w must be numbers") from None
        if not (math.isfinite(c) and math.isfinite(w) and w > 0):
            raise UserInputError(f"{where}: 'cosine' needs a finite c and w > 0, got {cos}")
    quad = hetero_hessian_from(data, where)
    if quad.K < 2:
        raise UserInputError(
            f"{where}: one worker (K = 1): the map compares methods on heterogeneous workers "
            "and needs at least two"
        )
    return FileFamily(path=str(resolved), quadratic=quad, c=c, w=w)
