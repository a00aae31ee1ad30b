"""Designs on quadratics, their exact measured value and the bound's value.

A *design* is one configuration of a bound on a heterogeneous quadratic with the fewest
moving parts: one eigendirection with eigenvalue ``L`` that only fixes the smoothness
constant, and up to three eigendirections that each carry one *source* of the measured
``(1/T) sum_t E||grad f(xbar_t)||^2``: the initial gap (``F0`` on eigenvalue ``lam_F``),
the gradient noise (``sigma2`` on ``lam_s``) and the heterogeneity (``zeta2`` on
``lam_z``). This loses nothing. The exact moments are linear in the sources of every
eigendirection (``y0^2``, noise variance, mean squared offset) and directions do not
interact, so on any quadratic of the toolkit's class (common Hessian ``A``, spectrum in
``[0, L]``) the measured value is a sum of single-source, single-direction contributions;
a bound that is linear in ``F0``, ``sigma^2``, ``zeta^2`` at fixed hyperparameters is the
same sum, and by the mediant inequality the worst ratio measured/bound over all such
quadratics is attained by a single source on a single direction. Mixed designs are kept
for bounds that are not linear in the sources.

All arrays have shape ``(N,)``: a batch of designs shares the bound, the algorithm, the
coins and the outer optimizer.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from core.errors import UserInputError
from theory.bound import Bound
from theory.verify import pipeline
from theory.verify.family import ALL_REDUCE_ALGORITHMS, EXACT_ALGORITHMS, Family, family_of
from theory.verify.oracle_exact import measure_batch as measure  # noqa: F401 (re-export)
from theory.verify.pinned import pinned_step
from theory.verify.pipeline import Design

__all__ = [
    "FIELDS",
    "EXACT_ALGORITHMS",
    "Family",
    "family_of",
    "pinned_step",
    "ALL_REDUCE_ALGORITHMS",
    "bound_params",
    "max_steps",
    "Evaluation",
    "evaluate",
    "design_text",
    "parse_design",
]

#: the fields of a design (one array each in a batch)
FIELDS = (
    "L", "lam_F", "lam_s", "lam_z", "F0", "sigma2", "zeta2",
    "K", "H", "T", "p", "eta", "gamma", "mu", "heavy_ball", "alpha",
)  # fmt: skip
_INT_FIELDS = ("K", "H", "T", "heavy_ball")

#: relative tolerance of the exact comparison (the oracle agrees with the step-by-step
#: recursion to ~1e-12 relative; a ratio above 1 + REL_TOL is a violation)
REL_TOL = 1e-6

#: a bound at least this multiple of 2 L F0 + sigma^2 + zeta^2 (the scale of the squared
#: gradient at the start, of one noisy gradient's error and of the heterogeneity) says
#: nothing a user could not have guessed: the design is labelled vacuous
VACUOUS_FACTOR = 1.0


def bound_params(bound: Bound, d: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The bound's parameter values on a batch of designs (``R = T/H``, ``beta = mu = 0``)."""
    pool = {
        "L": d["L"],
        "sigma": np.sqrt(d["sigma2"]),
        "zeta": np.sqrt(d["zeta2"]),
        "F0": d["F0"],
        "K": d["K"],
        "H": d["H"],
        "T": d["T"],
        "p": d["p"],
        "eta": d["eta"],
        "gamma": d["gamma"],
        "alpha": d["alpha"],
        "R": d["T"] / d["H"],
        "beta": np.zeros_like(d["L"]),
        "mu": d.get("mu", np.zeros_like(d["L"])),
    }
    missing = [n for n in bound.parameters if n not in pool]
    if missing:
        raise UserInputError(
            f"bound {bound.name!r} depends on {missing}, which a design does not determine"
        )
    return {n: np.asarray(pool[n], dtype=float) for n in bound.parameters}


def max_steps(bound: Bound, d: Mapping[str, np.ndarray]) -> np.ndarray:
    """The largest step meeting the bound's conditions per design (NaN: none; inf: no limit).

    The search of :meth:`theory.bound.Bound.max_step` (feasible at ``1e-14``; the largest
    feasible decade up to ``1e12``; then the feasible end of a bracket), with 32 geometric
    bisections (relative precision 1e-9) instead of its finer grid refinement, on the
    bound's own compiled conditions (:meth:`theory.bound.numeric.CompiledBound.feasible`):
    about ten times faster on a search batch, and the returned step meets every condition
    exactly (``tests/test_verify_exact.py`` checks it against ``Bound.max_step``)."""
    comp = bound.compiled
    n = len(d["L"])
    if comp.f_conditions is None:
        return np.full(n, np.inf)
    vals = bound_params(bound, {**d, "alpha": d["L"]})
    step = comp.step_name

    def ok(a: np.ndarray) -> np.ndarray:
        v = {k: (x[:, None] if a.ndim == 2 else x) for k, x in vals.items()}
        v[step] = a
        with np.errstate(all="ignore"):
            return comp.feasible(v, a.shape)

    tiny = ok(np.full(n, 1e-14))
    decades = 10.0 ** np.arange(-14, 13, dtype=float)  # from 1e-14: mu near 1 needs it
    feas = ok(np.broadcast_to(decades, (n, decades.size)).copy())
    # the largest feasible decade of the contiguous run from the smallest one
    k = np.cumprod(feas, axis=1).astype(bool).sum(axis=1)
    lo = np.where(k > 0, decades[np.maximum(k - 1, 0)], 1e-300)
    hi = np.where(k < decades.size, decades[np.minimum(k, decades.size - 1)], np.inf)
    active = np.isfinite(hi)
    for _ in range(32):
        mid = np.sqrt(lo * np.where(active, hi, lo))
        good = ok(mid)
        lo = np.where(active & good, mid, lo)
        hi = np.where(active & ~good, mid, hi)
    out = np.where(np.isfinite(hi), lo, np.inf)
    return np.where(tiny, out, np.nan)


@dataclass
class Evaluation:
    """A batch of designs evaluated: ``measured`` (exact), ``bound`` value, ``terms``
    (N, n_terms), ``inside`` (every condition holds and the bound is finite), ``ratio``
    (measured/bound, inf where the exact value overflowed inside the conditions),
    ``vacuous``, ``initial`` (``||grad f(x0)||^2``)."""

    designs: dict[str, np.ndarray]
    measured: np.ndarray
    bound: np.ndarray
    terms: np.ndarray
    inside: np.ndarray
    ratio: np.ndarray
    vacuous: np.ndarray
    initial: np.ndarray

    def __len__(self) -> int:
        return int(self.measured.shape[0])

    def row(self, i: int) -> dict[str, float]:
        return {k: float(v[i]) for k, v in self.designs.items()}


def evaluate(bound: Bound, fam: Family, d: Mapping[str, np.ndarray]) -> Evaluation:
    """Measure a batch exactly (the ``"exact"`` oracle, :mod:`theory.verify.oracle_exact`)
    and judge the bound, its terms and its conditions there (the ``"exact"`` judge,
    :mod:`theory.verify.judge_exact`)."""
    d = {k: np.asarray(v, dtype=float) for k, v in d.items()}
    design = Design(fam.spec, "quadratic", d, bound=bound, family=fam)
    m = pipeline.measure(design, "exact")
    verdict = pipeline.judge(bound, m, "exact")
    B, inside = verdict.value, verdict.inside
    with np.errstate(all="ignore"):
        terms = _term_values(bound, bound_params(bound, d), len(B))
    scale = 2 * d["L"] * d["F0"] + d["sigma2"] + d["zeta2"]
    return Evaluation(
        designs=d,
        measured=m.measured,
        bound=B,
        terms=terms,
        inside=inside,
        ratio=verdict.ratio,
        vacuous=inside & (B >= VACUOUS_FACTOR * scale),
        initial=m.companions["initial"],
    )


def _term_values(bound: Bound, vals: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    """The bound's additive terms (N, n_terms), from its compiled term formulas."""
    out = bound.compiled.f_terms(vals, (n,))
    return np.stack([np.broadcast_to(np.asarray(v, dtype=float), (n,)) for v in out], axis=1)


def design_text(row: Mapping[str, float]) -> str:
    """A design as ``key=value`` pairs (the ``--at`` argument of ``palsgd verify``)."""
    parts = []
    for k in FIELDS:
        v = float(row[k])
        parts.append(f"{k}={int(v)}" if k in _INT_FIELDS else f"{k}={v:.17g}")
    return " ".join(parts)


def reproduce_command(bound_name: str, row: Mapping[str, float], bound_file: str | None) -> str:
    """The one-line command that evaluates this design exactly again."""
    src = f" --bound-file {shlex.quote(bound_file)}" if bound_file else ""
    return f"palsgd verify{src} --bounds {bound_name} --at {shlex.quote(design_text(row))}"


def parse_design(text: str) -> dict[str, np.ndarray]:
    """Parse ``--at 'L=1 lam_F=1 F0=1 ...'`` into a batch of one design (missing fields:
    ``lam_* = L``, sources 0, ``K = H = 1``, ``p = eta = 0``, ``gamma = 1``)."""
    got: dict[str, float] = {}
    for item in text.replace(",", " ").split():
        key, sep, val = item.partition("=")
        if not sep or key not in FIELDS:
            raise UserInputError(
                f"--at: cannot read {item!r}; expected key=value with keys {list(FIELDS)}"
            )
        if key in got:
            raise UserInputError(f"--at: {key} is given twice")
        try:
            got[key] = float(val)
        except ValueError:
            raise UserInputError(f"--at: {key} = {val!r} is not a number") from None
        if not math.isfinite(got[key]) or got[key] < 0:
            raise UserInputError(f"--at: {key} = {val} must be a finite nonnegative number")
    for need in ("L", "T", "alpha"):
        if need not in got:
            raise UserInputError(f"--at: {need} is required")
    L = got["L"]
    full = {"lam_F": L, "lam_s": L, "lam_z": L, "F0": 0.0, "sigma2": 0.0, "zeta2": 0.0}
    full.update({"K": 1.0, "H": 1.0, "p": 0.0, "eta": 0.0, "gamma": 1.0, "mu": 0.0})
    full["heavy_ball"] = 0.0
    full.update(got)
    if full["heavy_ball"] not in (0.0, 1.0):
        raise UserInputError("--at: heavy_ball must be 0 (Nesterov) or 1 (heavy ball)")
    for k in ("p", "mu"):
        if full[k] >= 1:
            raise UserInputError(f"--at: {k} = {full[k]:g} must be below 1")
    for k in ("K", "H", "T"):
        if full[k] < 1 or full[k] != int(full[k]):
            raise UserInputError(f"--at: {k} = {full[k]:g} must be a positive integer")
    for k in ("lam_F", "lam_s", "lam_z"):
        if not 0 < full[k] <= L:
            raise UserInputError(f"--at: {k} = {full[k]:g} must be in (0, L = {L:g}]")
    return {k: np.asarray([full[k]], dtype=float) for k in FIELDS}
