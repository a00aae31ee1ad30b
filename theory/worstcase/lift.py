"""Lifting a worst case to explicit functions: a refutation needs a real instance.

The class oracle's value (:mod:`theory.worstcase.pep`) bounds the worst case from above; a
statement below it is only exceeded on the relaxed class. :func:`lift` looks for explicit
functions of the class that reach above a target: one-dimensional ``f_k = phi + s_k zeta x``
with ``s_k = +-1`` balanced over the workers (``K`` odd: ``+-sqrt(K/(K-1))`` and one 0), so
``(1/K) sum_k (f_k' - f')^2 = zeta^2`` everywhere (A3 with equality) and every ``f_k`` is as
smooth as ``phi`` (A1). ``phi`` is searched through its values and slopes at the points the
method visits (the method's iterates depend on the slopes): a nonlinear program (SLSQP,
several seeded starts) that maximises the measured quantity subject to the pairwise
interpolation conditions of ``L``-smooth functions and A4 at the visited points.

The result is then **built and checked**, never trusted: ``phi`` is made explicit, a C^1
piecewise quadratic through the sorted points (two pieces of curvature in ``[-L, L]``
between neighbours; outside the points, curvature ``L`` until the slope vanishes, then flat),
its curvature bound and ``f(x0) - inf f <= F0`` (its exact infimum, piece by piece) checked
everywhere, and the method run again on the explicit ``f_k`` (:func:`theory.worstcase.trajectory.run`
on floats). Only that recomputed value is reported (:class:`Lifted`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from theory.worstcase.design import ClassDesign
from theory.worstcase.trajectory import run

__all__ = ["Lifted", "Piecewise", "lift", "signs"]

#: slack allowed on the checks of the built function (normalised units)
CHECK_TOL = 1e-9
#: the search runs on a class shrunk by this factor (L and F0), so that the function built
#: from its (approximately feasible) solution lies strictly inside the real class
SHRINK = 1e-4


class _S:
    """A scalar with identity (the trajectory dedupes points by identity)."""

    __slots__ = ("v",)

    def __init__(self, v: float) -> None:
        self.v = v

    def __add__(self, o: _S) -> _S:
        return _S(self.v + o.v)

    def __sub__(self, o: _S) -> _S:
        return _S(self.v - o.v)

    def __rmul__(self, c: float) -> _S:
        return _S(c * self.v)

    __mul__ = __rmul__


def signs(K: int) -> np.ndarray:
    """The workers' heterogeneity signs ``s_k``: mean 0, mean square 1 (0 for ``K = 1``)."""
    if K == 1:
        return np.zeros(1)
    if K % 2 == 0:
        return np.array([1.0, -1.0] * (K // 2))
    s = math.sqrt(K / (K - 1))
    return np.array([s, -s] * ((K - 1) // 2) + [0.0])


class _Slopes:
    """An oracle that reads ``phi'`` at the points in the order they are first asked for."""

    def __init__(self, v: np.ndarray, zs: np.ndarray) -> None:
        self.v, self.zs, self.index = v, zs, {}

    def slope(self, y: _S) -> float:
        i = self.index.setdefault(id(y), len(self.index))
        return float(self.v[i]) if i < len(self.v) else 0.0

    def grad(self, k: int, y: _S) -> _S:
        return _S(self.slope(y) + self.zs[k])


def _unroll(design: ClassDesign, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The visited points (normalised units; ``x0 = 0``), the slope index of each, and the
    metric's weights by slope index, for the slopes ``v``."""
    spec, zeta, _ = design.normalised()
    oracle = _Slopes(v, zeta * signs(design.K))
    traj = run(spec, design.K, design.T, _S(0.0), oracle, measured=design.measured,
               pulls=design.pulls, zero=_S(0.0))  # fmt: skip
    for y in traj.visited:
        oracle.slope(y)
    for _, y in traj.metric:
        oracle.slope(y)
    idx = np.array([oracle.index[id(y)] for y in traj.visited])
    w = np.zeros(len(oracle.index))
    for wt, y in traj.metric:
        w[oracle.index[id(y)]] += wt
    return np.array([y.v for y in traj.visited]), idx, w


@dataclass
class Piecewise:
    """A C^1 piecewise quadratic: on ``[knots[i], knots[i+1]]`` curvature ``curv[i]``;
    ``value`` and ``slope`` at the left knot of each piece (normalised units)."""

    knots: np.ndarray
    curv: np.ndarray
    value: np.ndarray
    slope: np.ndarray

    def _piece(self, x: float) -> int:
        return int(np.clip(np.searchsorted(self.knots, x, side="right") - 1, 0, len(self.curv) - 1))

    def __call__(self, x: float) -> float:
        i = self._piece(x)
        d = x - self.knots[i]
        return float(self.value[i] + self.slope[i] * d + 0.5 * self.curv[i] * d * d)

    def deriv(self, x: float) -> float:
        i = self._piece(x)
        return float(self.slope[i] + self.curv[i] * (x - self.knots[i]))

    def infimum(self) -> float:
        """The exact infimum over the real line (pieces, their vertices, the flat ends)."""
        lo = float(np.min(self.value))
        for i, c in enumerate(self.curv):
            a, b = self.knots[i], self.knots[i + 1]
            lo = min(lo, self(b))
            if c > 0:
                xv = a - self.slope[i] / c
                if a < xv < b:
                    lo = min(lo, self(xv))
        return lo


def _segment(h: float, df: float, ga: float, gb: float, L: float) -> tuple[float, float, float]:
    """Two pieces on ``[0, m], [m, h]`` of curvatures ``c1, c2`` clipped to ``[-L, L]``, the
    ``m`` that best matches the value change ``df`` and the end slope ``gb``: ``(m, c1, c2)``."""
    best = None
    for m in np.linspace(h / 64, h - h / 64, 63):
        u, w = m, h - m
        A = np.array([[u, w], [u * u / 2 + u * w, w * w / 2]])
        c1, c2 = np.clip(np.linalg.solve(A, np.array([gb - ga, df - ga * h])), -L, L)
        miss = abs(ga + c1 * u + c2 * w - gb) + abs(
            ga * h + c1 * (u * u / 2 + u * w) + c2 * w * w / 2 - df
        )
        if best is None or miss < best[0]:
            best = (miss, m, float(c1), float(c2))
    return best[1:]


def build(x: np.ndarray, f: np.ndarray, g: np.ndarray, L: float) -> Piecewise:
    """An explicit ``L``-smooth ``phi`` near ``(x_i, f_i, g_i)`` (module docstring): C^1 and
    piecewise quadratic with curvatures in ``[-L, L]`` by construction (where the data ask for
    more, the curvature is clipped and the slope carried on), flat far out."""
    order = np.argsort(x)
    x, f, g = x[order], f[order], g[order]
    keep = np.concatenate([[True], np.diff(x) > 1e-9 * (1 + np.abs(x[1:]))])
    x, f, g = x[keep], f[keep], g[keep]
    e = abs(g[0]) / L  # to the left: curvature +-L until the slope vanishes, then flat
    c = math.copysign(L, g[0])
    v_left = f[0] - g[0] * e + 0.5 * c * e * e
    knots = [x[0] - e - 1.0, x[0] - e]
    curv, val, slo = [0.0, c], [v_left, v_left], [0.0, 0.0]
    fv, gv = f[0], g[0]
    for i in range(len(x) - 1):
        h = x[i + 1] - x[i]
        m, c1, c2 = _segment(h, f[i + 1] - f[i], gv, g[i + 1], L)
        knots += [x[i], x[i] + m]
        curv += [c1, c2]
        fm, gm = fv + gv * m + 0.5 * c1 * m * m, gv + c1 * m
        val += [fv, fm]
        slo += [gv, gm]
        w = h - m
        fv, gv = fm + gm * w + 0.5 * c2 * w * w, gm + c2 * w
    s = -math.copysign(L, gv)  # to the right: bring the slope to 0, then flat
    e = abs(gv) / L
    knots += [x[-1], x[-1] + e, x[-1] + e + 1.0]
    curv += [s, 0.0]
    val += [fv, fv + gv * e + 0.5 * s * e * e]
    slo += [gv, 0.0]
    return Piecewise(np.array(knots), np.array(curv), np.array(val), np.array(slo))


@dataclass
class Lifted:
    """An explicit instance of the class and its recomputed value (the design's units).

    ``value``: the measured quantity of the method on ``f_k = phi + s_k zeta x``, run again
    on the built ``phi``; ``None`` when no start gave a valid function. ``checks``: the
    checks it passed (curvature, ``f(x0) - inf f`` against ``F0``, A3 by construction).
    """

    value: float | None
    phi: Piecewise | None = None
    path: list[float] = field(default_factory=list)
    checks: dict[str, float] = field(default_factory=dict)
    starts: int = 0


def _evaluate(design: ClassDesign, phi: Piecewise) -> tuple[float, list[float]]:
    """The measured quantity of the method on the explicit ``f_k`` (normalised units)."""
    spec, zeta, _ = design.normalised()
    zs = zeta * signs(design.K)

    class Explicit:
        def grad(self, k: int, y: _S) -> _S:
            return _S(phi.deriv(y.v) + zs[k])

    traj = run(spec, design.K, design.T, _S(0.0), Explicit(), measured=design.measured,
               pulls=design.pulls, zero=_S(0.0))  # fmt: skip
    value = sum(w * phi.deriv(y.v) ** 2 for w, y in traj.metric)
    return value, [y.v for y in traj.visited]


def ramp(g: float, F0: float, L: float = 1.0) -> Piecewise:
    """The explicit ``phi`` of slope ``-g`` at ``x0 = 0`` that descends by exactly ``F0``:
    curvature ``-L`` on ``[-g/L, 0]`` (from flat to slope ``-g``), slope ``-g`` on ``[0, D]``,
    curvature ``L`` on ``[D, D + g/L]`` back to flat, ``D = (F0 - g^2/(2L))/g``
    (``0 < g <= sqrt(2 L F0)``; at the top it is the quadratic of curvature ``L``)."""
    e = g / L
    D = max(0.0, (F0 - g * g / (2 * L)) / g)
    knots = np.array([-e - 1.0, -e, 0.0, D, D + e, D + e + 1.0])
    top = F0 + g * g / (2 * L)  # phi(-e); phi(0) = F0 above phi's infimum, 0
    value = np.array([top, top, F0, F0 - g * D, 0.0])
    return Piecewise(knots, np.array([0.0, -L, 0.0, L, 0.0]), value,
                     np.array([0.0, 0.0, -g, -g, 0.0]))  # fmt: skip


def probe(design: ClassDesign) -> Lifted:
    """The largest value over a few explicit instances of the class, each a run on floats
    (milliseconds): ``phi`` a :func:`ramp` of slope ``g = sqrt(2 L F0) * {1, 0.7, 0.4, 0.2}``,
    descending to the right or to the left. A cheap lower bound on the worst case."""
    _, _, F0 = design.normalised()
    u = design.unit
    best = Lifted(0.0 if u == 0 else None)
    if u == 0 or F0 == 0:
        return best
    for frac in (1.0, 0.7, 0.4, 0.2):
        for flip in (False, True):
            phi = ramp(frac * math.sqrt(2 * F0), F0)
            if flip:
                phi = Piecewise(-phi.knots[::-1], phi.curv[::-1], phi.value[::-1],
                                -phi.slope[::-1])  # fmt: skip
                phi = _relabel(phi)
            value, path = _evaluate(design, phi)
            if best.value is None or value * u > best.value:
                checks = {"max_curvature": float(np.max(np.abs(phi.curv))),
                          "f(x0) - inf f": phi(0.0) - phi.infimum(), "F0": F0}  # fmt: skip
                best = Lifted(value * u, phi, path, checks, 0)
    return best


def _relabel(phi: Piecewise) -> Piecewise:
    """A mirrored :class:`Piecewise` rewritten with values and slopes at each left knot."""
    knots, curv = phi.knots, phi.curv
    value = np.empty(len(curv))
    slope = np.empty(len(curv))
    for i in range(len(curv)):
        # the mirror of piece i is stored with its right-end data: move them to its left end
        a, b = knots[i], knots[i + 1]
        vb, sb = phi.value[i], phi.slope[i]  # value and slope at b (the mirrored left knot)
        slope[i] = sb - curv[i] * (b - a)
        value[i] = vb - slope[i] * (b - a) - 0.5 * curv[i] * (b - a) ** 2
    return Piecewise(knots, curv, value, slope)


def lift(
    design: ClassDesign,
    *,
    starts: int = 6,
    seed: int = 0,
    maxiter: int = 300,
    target: float | None = None,
) -> Lifted:
    """The largest value found on explicit one-dimensional instances (module docstring);
    the :func:`probe` instances are tried first. ``target``: the search stops at the first
    instance whose value exceeds it (one explicit instance above a bound refutes it; the
    remaining starts could only raise the value further)."""
    _, _, F0 = design.normalised()
    u = design.unit
    if u == 0:
        return Lifted(0.0)
    n = len(_unroll(design, np.zeros(0))[2])
    rng = np.random.default_rng(seed)
    best = probe(design)
    tried = 0
    for s in range(starts):
        if target is not None and best.value is not None and best.value > target:
            break
        tried += 1
        scale = math.sqrt(2 * F0) * (1.0 - 0.6 * s / max(1, starts - 1))
        v0 = scale * (1.0 + (0.3 * rng.standard_normal(n) if s else np.zeros(n)))
        sol = _solve(design, v0, F0 * (1 - SHRINK), maxiter, 1 - SHRINK)
        if sol is None:
            continue
        x, f, g = sol
        phi = build(x, f, g, 1.0)
        value, path = _evaluate(design, phi)
        gap = phi(0.0) - phi.infimum()
        checks = {"max_curvature": float(np.max(np.abs(phi.curv))), "f(x0) - inf f": gap,
                  "F0": F0}  # fmt: skip
        if checks["max_curvature"] > 1 + CHECK_TOL or gap > F0 + CHECK_TOL:
            continue
        if best.value is None or value * u > best.value:
            best = Lifted(value * u, phi, path, checks)
    best.starts = tried
    return best


def _solve(design: ClassDesign, v0: np.ndarray, F0: float, maxiter: int, L: float):
    """SLSQP over the slopes and values at the visited points (smoothness ``L``, gap ``F0``,
    normalised units); ``(x, f, g)`` or ``None``."""
    n = len(v0)

    def parts(z: np.ndarray):
        v, fv = z[:n], z[n:]
        xs, idx, w = _unroll(design, v)
        return xs, fv, v[idx], w, idx

    def objective(z: np.ndarray) -> float:
        _, _, _, w, _ = parts(z)
        return -float(np.sum(w * z[:n] ** 2))

    def constraints(z: np.ndarray) -> np.ndarray:
        xs, fv, g, _, idx = parts(z)
        f = fv[idx]
        dx = xs[:, None] - xs[None, :]
        dg = g[:, None] - g[None, :]
        smooth = (f[:, None] - f[None, :] + 0.25 * L * dx**2 - 0.5 * (g[:, None] + g[None, :]) * dx
                  - 0.25 / L * dg**2)  # fmt: skip
        iu = np.triu_indices(len(xs), 1)
        a4 = np.concatenate([F0 - (f[0] - f), f - f[0] + F0 - 0.5 / L * g**2])
        return np.concatenate([smooth[iu], smooth.T[iu], a4])

    z0 = np.concatenate([v0, np.zeros(n)])
    try:
        res = minimize(objective, z0, method="SLSQP",
                       constraints=[{"type": "ineq", "fun": constraints}],
                       options={"maxiter": maxiter, "ftol": 1e-12})  # fmt: skip
    except (ValueError, np.linalg.LinAlgError):
        return None
    xs, fv, g, _, idx = parts(res.x)
    return xs, fv[idx], g
