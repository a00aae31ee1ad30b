"""Designs on the two-curvature instances: random, long-horizon, and moves of the search.

A design holds, per entry of its arrays, ``L``, ``zeta``, ``K``, ``H``, ``T``, ``sigma``,
``F0``, ``p``, ``eta``, ``gamma``, ``mu``, the step ``alpha`` (``frac`` times the largest
the bound's conditions allow) and the instance's shape: ``b``, the second group's curvature
as a fraction of ``L`` (``-1 < b <= 1``), and, for the instances of
:mod:`theory.verify.joint`, ``start = x0/c`` and ``noise = s/c``.

Where the family is worst (measured with :func:`theory.lower.hetero.instance_value`, in
units of ``alpha^2 L^2 H (H - 1) zeta^2``): at long horizons, small steps and ``b`` near
``-L``: 0.152 at ``b = -0.8 L``, ``alpha = 0.00313``, ``K = 2``, ``H = 16``, ``T = 48,000``;
0.195 at ``b = -0.89 L``, ``H = 256``, ``T = 2^22``; about 0.24 at ``b = -0.99 L`` and
``T`` near ``10^9``. The grid ``b/L in (-0.9, -0.5, 0, 0.5)`` of the registered lower bound
and horizons up to ``2^15`` reach 0.085. So ``b`` is drawn freely, ``1 + b/L``
log-uniform in ``[0.005, 1.9]`` for a third of the designs, uniform in ``(-1, 1]`` for a
third (PALSGD's worst is near ``b = L``) and the registered grid's largest for the rest, and a block of **long-horizon** designs takes ``K`` in
``2..4``, ``T`` up to :data:`LONG_T` (round maps: the cost does not grow with ``T``) and
steps down to ``e^-6`` of the largest.
"""

from __future__ import annotations

import numpy as np

from theory.bound import Bound

__all__ = ["LONG_T", "COIN_T", "draw", "long_horizon", "perturb", "with_step"]

#: the longest horizon of a long-horizon design without coins (round maps)
LONG_T = 2.0**22
#: the longest horizon with coins (the region is an interval propagation, step by step)
COIN_T = 2.0**13
#: ``1 + b/L`` is drawn log-uniform in this range
_B_SPAN = (0.005, 1.9)


def with_step(bound: Bound, d: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``d`` with ``alpha = frac * max_step`` at its other parameters (NaN: no step)."""
    args = {k: v for k, v in d.items() if k in bound.parameters and k != "alpha"}
    with np.errstate(all="ignore"):
        amax = np.asarray(bound.max_step(**args), dtype=float)
    amax = np.where(np.isfinite(amax) & (amax > 0), amax, np.nan)
    return {**d, "alpha": amax * d["frac"]}


def _b(rng: np.random.Generator, n: int, span: tuple[float, float] = _B_SPAN) -> np.ndarray:
    """``b/L``: ``1 + b/L`` log-uniform in ``span`` (``b`` near ``-L``, where Local SGD's
    drift is largest); with the default span, half of them uniform in ``(-1, 1]`` (``b``
    near ``L``, where the region costs the least: PALSGD's worst)."""
    e = np.exp(rng.uniform(np.log(span[0]), np.log(span[1]), n))
    b = np.minimum(-1.0 + e, 1.0)
    if span == _B_SPAN:
        b = np.where(rng.uniform(size=n) < 0.5, rng.uniform(-0.995, 1.0, n), b)
    return b


def _sources(n: int, rng: np.random.Generator, joint: str | None) -> dict[str, np.ndarray]:
    """``start`` and ``noise`` of the instances: none (``joint = None``), an initial gap
    (``"gap"``: ``|start|`` log-uniform in ``[1e-2, 30]``, either sign) or noise
    (``"noise"``: ``noise`` in ``[1e-2, 10]`` from the optimum, half of the designs with
    ``1 - b/L`` log-uniform in ``[1e-3, 1]``)."""
    zero = np.zeros(n)
    if joint is None:
        return {"start": zero, "noise": zero}
    start = rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-2, 1.5, n)
    if joint == "gap":
        return {"start": start, "noise": zero}
    # half of them near b = L, where the noise's reach costs little heterogeneity
    near = 1.0 - 10.0 ** rng.uniform(-3, 0, n)
    return {
        "start": zero,
        "noise": 10.0 ** rng.uniform(-2, 1, n),
        "b": np.where(rng.uniform(size=n) < 0.5, near, _b(rng, n)),
    }


def draw(
    bound: Bound, n: int, rng: np.random.Generator, *, joint: str | None = None,
    max_T: float = 32768.0, max_K: int = 16, grid: bool = False,
) -> dict[str, np.ndarray]:  # fmt: skip
    """``n`` random designs for ``bound`` (``sigma = F0 = 0`` until an instance sets them).

    ``H`` up to 256 (64 with pulls), ``T`` up to ``max_T`` (2048 with pulls), ``K`` in
    ``2..max_K``, the step ``e^{-3u}`` of the largest; ``joint``: see :func:`_sources`.
    ``grid``: ``b`` is NaN, the largest value over the grid of the registered lower bound
    (:func:`theory.verify.hetero.lower_at`; the moves keep it): the designs of the
    heterogeneous stage before ``b`` was free, drawn in the same order."""
    uses = set(bound.parameters)
    H = np.round(2.0 ** rng.uniform(1, 8 if "p" not in uses else 6, n))
    T = H * np.round(2.0 ** rng.uniform(1, 7, n)) + rng.integers(0, 2, n) * np.floor(H / 2)
    d = {
        "L": np.exp(rng.uniform(-1, 1, n)),
        "zeta": np.ones(n),
        "K": rng.integers(2, max_K + 1, n).astype(float),
        "H": H,
        "T": np.minimum(T, 2048.0 if "p" in uses else max_T),
        "sigma": np.zeros(n),
        "F0": np.zeros(n),
        "p": rng.uniform(0.05, 0.9, n) if "p" in uses else np.zeros(n),
        "eta": np.exp(rng.uniform(-2, 3, n)) if "eta" in uses else np.zeros(n),
        "gamma": rng.uniform(0.2, 1.5, n) if "gamma" in uses else np.ones(n),
        "mu": rng.uniform(0.0, 0.95, n) if "mu" in uses else np.zeros(n),
        "b": np.full(n, np.nan) if grid else _b(rng, n),
        "frac": np.exp(-3.0 * rng.uniform(0, 1, n)),
        **_sources(n, rng, joint),
    }
    d["eta"] = np.where(d["eta"] > 0, d["eta"] * d["L"], d["eta"])
    return with_step(bound, d)


def long_horizon(
    bound: Bound, n: int, rng: np.random.Generator, *, joint: str | None = None,
    max_T: float = LONG_T,
) -> dict[str, np.ndarray]:  # fmt: skip
    """``n`` designs where the family is worst (module docstring): ``K`` in ``2..4``,
    ``H`` up to 256 (32 with pulls), ``T = H * 2^u`` rounds up to ``max_T``
    (:data:`COIN_T` with pulls), the step ``e^{-u}``, ``u`` in ``[0.5, 6]``, of the largest,
    ``1 + b/L`` in ``[0.005, 0.5]`` (``[0.005, 1.5]`` for the joint instances, where the
    start's or the noise's interplay with the curvatures matters as much); full rounds."""
    if n <= 0:
        return {}
    d = draw(bound, n, rng, joint=joint)
    coins = "p" in bound.parameters
    top = COIN_T if coins else max_T
    H = np.round(2.0 ** rng.uniform(1, 5 if coins else 8, n))
    rounds = np.round(2.0 ** rng.uniform(4, np.log2(top / H)))
    d.update(
        K=rng.integers(2, 5, n).astype(float),
        H=H,
        T=np.minimum(H * np.maximum(rounds, 1.0), top),
        b=_b(rng, n, (0.005, 0.5) if joint is None else (0.005, 1.5)),
        frac=np.exp(-rng.uniform(0.5, 6.0, n)),
    )
    return with_step(bound, d)


def perturb(
    bound: Bound, d: dict[str, np.ndarray], worst: np.ndarray, rng: np.random.Generator,
    k: int, scale: float = 1.0,
) -> dict[str, np.ndarray]:  # fmt: skip
    """``k`` moves around each design index in ``worst``: ``H`` halved or doubled (with
    probability ``scale``), the rounds, the step's fraction, ``1 + b/L``, ``p``, ``eta``,
    ``start`` and ``noise`` multiplied by log-normal factors whose spread is ``scale``
    times a fixed one (``start`` changes sign with probability ``0.1 scale``); ``T`` stays
    below the longest of ``d``."""
    idx = np.repeat(worst, k)
    m = idx.size
    s = float(scale)
    new = {key: v[idx].copy() for key, v in d.items()}
    step = rng.choice([-1, 0, 1], m, p=[s / 2, 1 - s, s / 2])
    new["H"] = np.maximum(2.0, np.round(new["H"] * 2.0**step))
    rounds = np.maximum(1.0, np.round(new["T"] / new["H"] * 2.0 ** rng.normal(0, 0.7 * s, m)))
    new["T"] = np.minimum(new["H"] * rounds, d["T"].max())
    if np.any(d["p"] > 0):
        new["p"] = np.clip(new["p"] * np.exp(rng.normal(0, 0.3 * s, m)), 0.02, 0.95)
        new["eta"] = new["eta"] * np.exp(rng.normal(0, 0.5 * s, m))
    new["frac"] = np.minimum(1.0, new["frac"] * np.exp(rng.normal(0, 0.5 * s, m)))
    e = np.clip((1.0 + new["b"]) * np.exp(rng.normal(0, 0.3 * s, m)), 0.002, 1.999)
    new["b"] = np.minimum(-1.0 + e, 1.0)
    flip = np.where(rng.uniform(size=m) < 0.1 * s, -1.0, 1.0)
    new["start"] = new["start"] * flip * np.exp(rng.normal(0, 0.7 * s, m))
    new["noise"] = new["noise"] * np.exp(rng.normal(0, 0.7 * s, m))
    return with_step(bound, new)
