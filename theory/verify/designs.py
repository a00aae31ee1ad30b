"""The design space of a bound and the term-isolating designs.

A design (see :mod:`theory.verify.oracle`) is coded as a point ``x`` of a box in
unit-free coordinates (:data:`COORDS`), with the set of active sources as a separate mask.
:func:`decode` turns points into a batch of designs; the step is a fraction of the largest
step the bound's own conditions allow at the other parameters (``alpha_frac = 1``: the
largest), so a design is inside the conditions by construction wherever a step exists. A
bound stated at one step (:mod:`theory.verify.pinned`) takes that step instead, and a design
counts where every condition holds there.

:func:`isolating` builds the designs of the term-isolating plan: each source alone (start
at the optimum for the noise and heterogeneity terms, no noise for the heterogeneity
terms, no heterogeneity for the noise terms), the largest allowed step and a small one,
short and long horizons, ``H`` from 1 to 1024, ``p`` near 0 and near 1, the pull rate
from tiny to its limit, ``K = 1`` and large ``K``, ill-conditioned spectra (source on an
eigenvalue ``1e-3 L``) and a final partial round. :func:`random_points` samples the whole
box.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from theory.bound import Bound
from theory.verify.oracle import Family, bound_params, max_steps
from theory.verify.pinned import pinned_values

__all__ = ["COORDS", "SOURCES", "Space", "space_of", "decode", "isolating", "random_points"]

#: (name, low, high) of each coordinate of the design box
COORDS = (
    ("log10_L", -2.0, 2.0),
    ("log10_lamF", -3.0, 0.0),
    ("log10_lams", -3.0, 0.0),
    ("log10_lamz", -3.0, 0.0),
    ("log10_F0", -3.0, 3.0),
    ("log10_sigma2", -3.0, 3.0),
    ("log10_zeta2", -3.0, 3.0),
    ("log2_K", 0.0, 7.0),
    ("log2_H", 0.0, 10.0),
    ("log2_R", 0.0, 24.0),
    ("rem", 0.0, 1.0),
    ("logit_p", -6.0, 6.0),
    ("log10_eta", -3.0, 4.0),
    ("log10_afrac", -3.0, 0.0),
    ("log10_gamma", -2.0, 2.0),
    ("log10_1m_mu", -3.0, 0.0),  # mu = 1 - 10**x in [0, 0.999], log-uniform near 1
    ("heavy_ball", 0.0, 1.0),
)
IDX = {name: i for i, (name, _, _) in enumerate(COORDS)}
LOW = np.array([c[1] for c in COORDS])
HIGH = np.array([c[2] for c in COORDS])
#: the three sources; a mask row says which are active
SOURCES = ("F0", "sigma2", "zeta2")
#: the longest horizon; the exact oracle costs O(H + log(T/H)) per design (round maps,
#: repeated squaring), so long horizons stay cheap
T_MAX = 2**24


@dataclass(frozen=True)
class Space:
    """The coordinates a bound's designs may vary (others stay at their neutral values)
    and the source masks it can be tested with."""

    free: np.ndarray  # bool (n_coords,)
    masks: np.ndarray  # (n_masks, 3) bool
    family: Family


def space_of(fam: Family) -> Space:
    free = np.ones(len(COORDS), dtype=bool)
    if not fam.uses_p:
        free[[IDX["logit_p"], IDX["log10_eta"]]] = False
    if not fam.uses_gamma:
        free[IDX["log10_gamma"]] = False
    if not fam.uses_mu or fam.outer in ("heavy_ball", "nesterov"):
        free[IDX["heavy_ball"]] = False
    if not fam.uses_mu:
        free[IDX["log10_1m_mu"]] = False
    if fam.full_rounds:  # measured over (or at the anchors of) full rounds only
        free[IDX["rem"]] = False
    if fam.minibatch:
        free[[IDX["log2_H"], IDX["rem"]]] = False
    if fam.pinned:  # the step is the bound's own
        free[IDX["log10_afrac"]] = False
    zeta = fam.heterogeneous
    n_src = 3 if zeta else 2
    if not zeta:
        free[[IDX["log10_zeta2"], IDX["log10_lamz"]]] = False
    masks = [m for m in itertools.product((False, True), repeat=3) if any(m[:n_src])]
    masks = [m for m in masks if zeta or not m[2]]
    return Space(free=free, masks=np.array(masks, dtype=bool), family=fam)


def neutral() -> np.ndarray:
    """The neutral point: L = 1, sources on L, K = H = 1, p = 1/2, eta = L, largest step."""
    x = np.zeros(len(COORDS))
    x[IDX["rem"]] = 0.0
    return x


def clip(x: np.ndarray, space: Space) -> np.ndarray:
    x = np.clip(x, LOW, HIGH)
    x[..., ~space.free] = neutral()[~space.free]
    return x


def decode(
    bound: Bound, space: Space, x: np.ndarray, masks: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Designs of the points ``x`` (N, n_coords) with active sources ``masks`` (N, 3).

    Returns the batch and a boolean array: True where the bound's conditions admit a step
    (the step is then ``alpha_frac`` times the largest one)."""
    x = clip(np.atleast_2d(np.asarray(x, dtype=float)), space)
    masks = np.atleast_2d(masks)
    g = {name: x[:, i] for name, i in IDX.items()}
    L = 10.0 ** g["log10_L"]
    K = np.round(2.0 ** g["log2_K"])
    fam = space.family
    H = np.ones_like(L) if fam.minibatch else np.round(2.0 ** g["log2_H"])
    R = np.floor(2.0 ** g["log2_R"])
    if fam.full_rounds:  # T a multiple of H below T_MAX
        R = np.maximum(np.minimum(R, np.floor(T_MAX / H)), 1)
    rem = np.floor(g["rem"] * H)
    T = np.minimum(R * H + rem, T_MAX)
    T = np.maximum(T, 1)
    p = 1.0 / (1.0 + np.exp(-g["logit_p"])) if fam.uses_p else np.zeros_like(L)
    eta = L * 10.0 ** g["log10_eta"] if fam.uses_p else np.zeros_like(L)
    zeta_on = masks[:, 2] & (K > 1) & fam.heterogeneous
    d = {
        "L": L,
        "lam_F": L * 10.0 ** g["log10_lamF"],
        "lam_s": L * 10.0 ** g["log10_lams"],
        "lam_z": L * 10.0 ** g["log10_lamz"],
        "F0": np.where(masks[:, 0], 10.0 ** g["log10_F0"], 0.0),
        "sigma2": np.where(masks[:, 1], 10.0 ** g["log10_sigma2"], 0.0),
        "zeta2": np.where(zeta_on, 10.0 ** g["log10_zeta2"], 0.0),
        "K": K,
        "H": H,
        "T": T,
        "p": p,
        "eta": eta,
        "gamma": 10.0 ** g["log10_gamma"] if fam.uses_gamma else np.ones_like(L),
        "mu": 1.0 - 10.0 ** g["log10_1m_mu"] if fam.uses_mu else np.zeros_like(L),
        "heavy_ball": _heavy_ball(fam, g["heavy_ball"]),
    }
    if fam.pinned:
        return _at_pinned_step(bound, d)
    amax = max_steps(bound, d)
    top = np.where(np.isfinite(amax), amax, 1.0 / L)  # no limit at all: 1/L
    d["alpha"] = top * 10.0 ** g["log10_afrac"]
    ok = ~np.isnan(amax) & (amax > 0)
    d["alpha"] = np.where(ok, d["alpha"], 1e-300)
    return d, ok


def _heavy_ball(fam: Family, coord: np.ndarray) -> np.ndarray:
    """1 for heavy-ball outer momentum, 0 for Nesterov (or no momentum)."""
    if fam.outer == "heavy_ball":
        return np.ones_like(coord)
    return np.round(coord) if fam.uses_mu and fam.outer == "momentum" else np.zeros_like(coord)


def _at_pinned_step(
    bound: Bound, d: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Designs at the bound's own step (a bound stated at one step: its recommended step or
    the root of its pinning conditions, :func:`theory.verify.pinned.pinned_values`);
    admitted where every condition holds there."""
    vals = bound_params(bound, {**d, "alpha": d["L"]})
    with np.errstate(all="ignore"):
        rec = pinned_values(bound, vals, len(d["L"]))
        good = np.isfinite(rec) & (rec > 0)
        d["alpha"] = np.where(good, rec, 1e-300)
        vals[bound.step_name] = d["alpha"]
        ok = good & np.asarray(bound.conditions_hold(**vals), dtype=bool)
    return d, ok


def isolating(space: Space, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points of the term-isolating plan (a seeded sample of its grid, extremes first).

    Each point takes one value per free coordinate from a short list of extremes and
    typical values, and one source alone (or all of them)."""
    levels = {
        "log10_L": [0.0, -2.0, 2.0],
        "log10_lamF": [0.0, -1.0, -3.0],
        "log10_lams": [0.0, -1.0, -3.0],
        "log10_lamz": [0.0, -1.0, -3.0],
        "log10_F0": [0.0],
        "log10_sigma2": [0.0],
        "log10_zeta2": [0.0],
        "log2_K": [0.0, 2.0, 6.0, 1.0],
        "log2_H": [0.0, 3.0, 10.0, 1.0, 6.0],
        "log2_R": [0.0, 13.0, 3.0, 7.0, 24.0],
        "rem": [0.0, 0.5],
        "logit_p": [-4.0, 0.0, 4.0, -6.0, 6.0],
        "log10_eta": [-3.0, 0.0, 1.0, 4.0],
        "log10_afrac": [0.0, -1.0, -3.0],
        "log10_gamma": [0.0, -0.7, 0.25, 1.0, 2.0],
        "log10_1m_mu": [0.0, -1.0, -0.3010299956639812, -2.0, -3.0],  # mu 0, 0.9, 0.5, 0.99, 0.999
        "heavy_ball": [0.0, 1.0],
    }
    pure = [m for m in space.masks if m.sum() == 1] + [space.masks[-1]]
    xs = np.tile(neutral(), (n, 1))
    for name, j in IDX.items():
        if space.free[j]:
            lv = np.asarray(levels[name])
            xs[:, j] = lv[rng.integers(len(lv), size=n)]
            xs[: len(lv), j] = lv  # the first points visit every level of every coordinate
    ms = np.array([pure[i % len(pure)] for i in range(n)], dtype=bool)
    return clip(xs, space), ms


def random_points(space: Space, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uniform points of the box; the step at its largest value for half of them."""
    x = rng.uniform(LOW, HIGH, size=(n, len(COORDS)))
    top = rng.random(n) < 0.5
    x[top, IDX["log10_afrac"]] = 0.0
    x[rng.random(n) < 0.5, IDX["rem"]] = 0.0
    masks = space.masks[rng.integers(len(space.masks), size=n)]
    # half of them with the horizon and the momentum drawn as in the box before it grew
    # (at most 2^13 rounds, mu uniform in [0, 0.99]), so that region keeps its share
    old = np.flatnonzero(rng.random(n) < 0.5)
    x[old, IDX["log2_R"]] = rng.uniform(0.0, 13.0, old.size)
    x[old, IDX["log10_1m_mu"]] = np.log10(1.0 - rng.uniform(0.0, 0.99, old.size))
    return clip(x, space), masks
