"""An independent performance-estimation computation for the class-oracle tests.

Written apart from :mod:`theory.worstcase` (no PEPit, no shared trajectory code): Local SGD
with model averaging (and minibatch SGD, ``H = 1``-style common steps) unrolled by hand on
coefficient vectors over the basis ``(x0, every gradient)``, the Gram matrix a cvxpy PSD
variable, the smooth nonconvex interpolation inequalities of Taylor, Hendrickx and Glineur
(2017, Theorem 3.10) between every pair of points of each ``f_k``, A3 and both A4 conditions at
every point, solved with Clarabel. Units as given (no normalisation).
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np


class _Basis:
    def __init__(self) -> None:
        self.vectors: list[np.ndarray] = []  # coefficient vectors, grown as gradients appear
        self.n = 1  # x0

    def grow(self) -> int:
        self.n += 1
        return self.n - 1


def local_sgd_worst(
    *, K: int, H: int, R: int, L: float, alpha: float, zeta: float, F0: float,
    measured: str = "iterates", minibatch: bool = False,
) -> float:  # fmt: skip
    """Worst case over the class of Local SGD (averaging every ``H`` steps) or, with
    ``minibatch``, of minibatch SGD (``R*H`` steps of the mean gradient)."""
    basis = _Basis()
    points: list[dict] = []  # {"coef": vector (padded later), "g": [basis idx per k]}

    def visit(coef: list[float]) -> dict:
        key = tuple(np.round(np.pad(coef, (0, 4000 - len(coef))), 14))
        for p in points:
            if p["key"] == key:
                return p
        p = {"key": key, "coef": list(coef), "g": [basis.grow() for _ in range(K)]}
        points.append(p)
        return p

    def vec(idx: int) -> list[float]:
        v = [0.0] * (idx + 1)
        v[idx] = 1.0
        return v

    def add(a: list[float], b: list[float], cb: float = 1.0) -> list[float]:
        n = max(len(a), len(b))
        a, b = a + [0.0] * (n - len(a)), b + [0.0] * (n - len(b))
        return [x + cb * y for x, y in zip(a, b, strict=True)]

    def mean(vs: list[list[float]]) -> list[float]:
        out: list[float] = []
        for v in vs:
            out = add(out, v, 1.0 / len(vs))
        return out

    metric: list[tuple[float, dict]] = []
    z = vec(0)
    T = R * H
    for _r in range(R):
        zp = visit(z)
        if measured == "anchors":
            metric.append((1.0 / R, zp))
        xs = [z] * K
        for _h in range(H):
            avg = visit(mean(xs))
            if measured == "iterates":
                metric.append((1.0 / T, avg))
            if minibatch:
                g = mean([vec(avg["g"][k]) for k in range(K)])
                xs = [add(xs[0], g, -alpha)] * K
            else:
                xs = [add(x, vec(visit(x)["g"][k]), -alpha) for k, x in enumerate(xs)]
                for x in xs:
                    visit(x)
        z = mean(xs)
    visit(z)
    n = basis.n
    P = np.array([np.pad(p["coef"], (0, n - len(p["coef"]))) for p in points])
    Gv = [[np.eye(n)[p["g"][k]] for k in range(K)] for p in points]
    G = cp.Variable((n, n), PSD=True)
    F = cp.Variable((len(points), K))

    def ip(a: np.ndarray, b: np.ndarray):
        return cp.sum(cp.multiply(G, np.outer(a, b)))

    cons = []
    for k in range(K):
        for i in range(len(points)):
            for j in range(len(points)):
                if i == j:
                    continue
                dx, gi, gj = P[i] - P[j], Gv[i][k], Gv[j][k]
                cons.append(F[i, k] - F[j, k] >= -L / 4 * ip(dx, dx) + 0.5 * ip(gi + gj, dx)
                            + 1 / (4 * L) * ip(gi - gj, gi - gj))  # fmt: skip
    f0 = cp.sum(F[0, :]) / K
    for i in range(len(points)):
        gbar = sum(Gv[i]) / K
        if K > 1:
            cons.append(sum(ip(Gv[i][k] - gbar, Gv[i][k] - gbar) for k in range(K)) / K <= zeta**2)
        fi = cp.sum(F[i, :]) / K
        cons += [f0 - fi <= F0, fi - f0 + F0 >= ip(gbar, gbar) / (2 * L)]
    obj = sum(w * ip(sum(Gv[points.index(p)]) / K, sum(Gv[points.index(p)]) / K)
              for w, p in metric)  # fmt: skip
    prob = cp.Problem(cp.Maximize(obj), cons)
    prob.solve(solver=cp.CLARABEL)
    return float(prob.value)
