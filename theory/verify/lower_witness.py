"""What the verifier holds a lower bound to: exact values of its own instances, computed by
code of its own, and the worst case of the whole class where it is known.

A lower bound claims that the worst case of ``(1/T) sum_{t<T} E||grad f(xbar_t)||^2`` over
its assumption class is at least ``LB``; its proof is an instance of the class attaining
``LB``. Two exact oracles can refute it at a design:

* :func:`quadratic_witness`: the isotropic quadratic ``f_k = (L/2)||x||^2`` with additive
  noise (the instance of ``local_sgd_quadratic_lower``), by the moment oracle of
  :mod:`theory.moments` (not by the bound's closed form);
* :func:`hetero_witness`: the two-curvature instances of :mod:`theory.lower.hetero` at each
  curvature of the bound's grid, by a step-by-step propagation of the first and second
  moments of every worker, of every pair of distinct workers, of the anchor and of the
  outer momentum buffer (not by the round maps of the bound). Without coins the run is
  deterministic and the reach of the iterates, which sizes the instance, comes from the
  same propagation; with coins it is an interval propagation of its own, which contains
  every coin path;
* :func:`known_worst_case`: designs where the worst case over the whole class is known:
  without noise and without heterogeneity every worker runs gradient descent, and the
  descent lemma (Nesterov, *Introductory Lectures on Convex Optimization*, 2004, eq. (1.2.13):
  ``f(x - alpha g) <= f(x) - alpha (1 - alpha L/2) ||g||^2``) gives
  ``(1/T) sum_t ||grad f(x_t)||^2 <= 2 F0/(alpha (2 - alpha L) T)`` for ``alpha L < 2``,
  attained at ``alpha = 1/L`` by the quadratic (``2 L F0/T``); and with ``F0 = 0`` and no
  noise the start is a minimiser of ``f``, so with ``H = 1`` and no pulls (every gradient at
  the anchor) or at ``T = 1`` the worst case is 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from theory.algorithm import outer_step, pull_coefficient
from theory.lower.two_curvature import horizons
from theory.moments import oracle_batch

__all__ = ["quadratic_witness", "hetero_witness", "known_worst_case"]


def quadratic_witness(d: Mapping[str, np.ndarray]) -> np.ndarray:
    """The exact value on the isotropic quadratic at each design (``inf``: diverged).

    ``d``: arrays ``alpha, L, sigma, F0, K, H, T``; ``H = 1`` runs minibatch SGD, larger ``H``
    Local SGD with averaging (the statement covers both)."""
    L = np.asarray(d["L"], dtype=float)
    n = L.size
    z = np.zeros((n, 1))
    H = np.asarray(d["H"], dtype=np.int64)
    out = np.full(n, np.nan)
    for minibatch in (True, False):
        sel = (H == 1) if minibatch else (H > 1)
        if not sel.any():
            continue
        res = oracle_batch(
            L[sel, None],
            np.sqrt(2 * np.asarray(d["F0"], dtype=float)[sel] / L[sel])[:, None],
            (np.asarray(d["sigma"], dtype=float)[sel] ** 2)[:, None],
            z[sel],
            K=np.asarray(d["K"], dtype=float)[sel],
            alpha=np.asarray(d["alpha"], dtype=float)[sel],
            T=np.asarray(d["T"], dtype=np.int64)[sel],
            H=H[sel],
            p=np.zeros(int(sel.sum())),
            eta=np.zeros(int(sel.sum())),
            gamma=np.ones(int(sel.sum())),
            mu=np.zeros(int(sel.sum())),
            minibatch=minibatch,
        )
        out[sel] = np.where(res.diverged, np.inf, res.mean_grad_norm_sq)
    return out


def _groups(K: int, L: float, b: float) -> list[tuple[int, float, float]]:
    """``(workers, curvature, sign of the linear term)`` of the instance's worker groups:
    ``K // 2`` with ``f_A``, ``K // 2`` with ``f_B`` and, for odd ``K``, one with ``f_N``."""
    j = K // 2
    return [(j, L, 1.0), (j, b, -1.0), (K % 2, 0.5 * (L + b), 0.0)]


def _outer_rows(outer: str, gamma: float, mu: float) -> np.ndarray:
    """Rows of ``(z', buf')`` in the basis ``(z, buf, xbar, 1)``."""
    e = np.eye(4)
    z, buf = outer_step(e[0], e[1], e[0] - e[2], outer=outer, gamma=gamma, mu=mu)
    return np.stack([z, buf])


@dataclass
class _Coins:
    """The fixed quantities of a batch of ``c = 1`` runs (:func:`_unit_moments`): workers per
    group ``n`` and their weights ``wt``, distinct partners ``off``, the scale ``m2``, the
    coins' moments (one worker ``mean_a``, ``one_aa``; two distinct workers ``two_aa``)."""

    K: np.ndarray
    H: np.ndarray
    T: np.ndarray
    n: np.ndarray
    wt: np.ndarray
    off: np.ndarray
    m2: np.ndarray
    coin: np.ndarray
    rows: np.ndarray
    mean_a: np.ndarray
    one_aa: np.ndarray
    two_aa: np.ndarray


def _coins(r: Mapping[str, np.ndarray]) -> _Coins:
    alpha, L, b, p, eta = (np.asarray(r[k], dtype=float) for k in ("alpha", "L", "b", "p", "eta"))
    K, H, T = (np.asarray(r[k], dtype=np.int64) for k in ("K", "H", "T"))
    M = alpha.size
    n = np.stack([K // 2, K // 2, K % 2], axis=1).astype(float)  # (M, 3) workers per group
    h = np.stack([L, b, 0.5 * (L + b)], axis=1)
    sgn = np.array([1.0, -1.0, 0.0])
    coin = p > 0
    q = np.where(coin, 1.0 - p, 1.0)
    beta = pull_coefficient(alpha, eta, p)  # 0 where there is no coin
    prob = np.stack([q, np.where(coin, p, 0.0)], axis=1)  # (M, 2): gradient, pull
    a = np.zeros((M, 2, 3, 3))  # (design, branch, group, coefficient of (x, z, 1))
    a[:, 0, :, 0] = 1.0 - alpha[:, None] * h / q[:, None]
    a[:, 0, :, 2] = -alpha[:, None] * sgn / q[:, None]
    a[:, 1, :, 0] = (1.0 - beta)[:, None]
    a[:, 1, :, 1] = beta[:, None]
    shared = np.asarray(r["shared"], dtype=bool)
    pair = np.where(
        shared[:, None, None], prob[:, :, None] * np.eye(2), prob[:, :, None] * prob[:, None, :]
    )  # (M, 2, 2)
    # the coins' moments, fixed in time: E[a a^T] of one worker and of two distinct workers
    return _Coins(
        K, H, T, n, n / K[:, None], n[:, None, :] - np.eye(3), (0.5 * (L + b)) ** 2, coin,
        np.asarray(r["rows"], dtype=float), np.einsum("mi,migr->mgr", prob, a),
        np.einsum("mi,migr,migc->mgrc", prob, a, a), np.einsum("mij,migr,mjhc->mghrc", pair, a, a),
    )  # fmt: skip


@dataclass
class _Moments:
    """The moments of one step (:func:`_unit_moments`): per group ``x1 = E x``, ``x2 = E
    x^2``, ``xz = E x z``, ``xb = E x buf``, per pair of groups ``P`` (distinct workers);
    the anchor's ``z1``, ``z2``, the buffer's ``b1``, ``b2`` and ``zb = E z buf``."""

    x1: np.ndarray
    x2: np.ndarray
    xz: np.ndarray
    xb: np.ndarray
    P: np.ndarray
    z1: np.ndarray
    z2: np.ndarray
    b1: np.ndarray
    b2: np.ndarray
    zb: np.ndarray

    @classmethod
    def zeros(cls, M: int) -> _Moments:
        g = [np.zeros((M, 3)) for _ in range(4)]
        return cls(*g, np.zeros((M, 3, 3)), *(np.zeros(M) for _ in range(5)))

    def xbar2(self, c: _Coins) -> np.ndarray:
        """``E xbar^2`` (the workers' average)."""
        return (
            np.sum(c.n * self.x2, 1) + np.sum(c.n[:, :, None] * self.P * c.off, (1, 2))
        ) / c.K**2


def _local_step(c: _Coins, s: _Moments, two: np.ndarray, one: np.ndarray) -> None:
    """One step of every worker (gradient step or pull), in place (``two``: the buffer of
    ``E[Y_g Y_h^T]``, distinct workers)."""
    zz, z1g = np.repeat(s.z2[:, None], 3, 1), np.repeat(s.z1[:, None], 3, 1)
    one_worker = np.stack(
        [
            np.stack([s.x2, s.xz, s.x1], -1),
            np.stack([s.xz, zz, z1g], -1),
            np.stack([s.x1, z1g, one], -1),
        ],
        -2,
    )  # (M, g, 3, 3): E[Y_g Y_g^T]
    two[..., 0, 0] = s.P
    two[..., 0, 1] = s.xz[:, :, None]
    two[..., 0, 2] = s.x1[:, :, None]
    two[..., 1, 0] = s.xz[:, None, :]
    two[..., 2, 0] = s.x1[:, None, :]
    two[..., 1, 1] = s.z2[:, None, None]
    two[..., 1, 2] = two[..., 2, 1] = s.z1[:, None, None]
    s.x2 = np.sum(c.one_aa * one_worker, (-2, -1))
    s.P = np.sum(c.two_aa * two, (-2, -1))
    zb1, b1g = np.repeat(s.zb[:, None], 3, 1), np.repeat(s.b1[:, None], 3, 1)
    s.x1, s.xz, s.xb = (
        np.sum(c.mean_a * np.stack(v, -1), -1)
        for v in ((s.x1, z1g, one), (s.xz, zz, z1g), (s.xb, zb1, b1g))
    )


def _synchronise(c: _Coins, s: _Moments, sync: np.ndarray) -> None:
    """The outer step at the designs in ``sync`` (anchor and buffer from the average, the
    workers restart at the anchor), in place."""
    M = sync.size
    xbar1 = np.sum(c.wt * s.x1, 1)
    xbar2 = s.xbar2(c)
    xbz, xbb = np.sum(c.wt * s.xz, 1), np.sum(c.wt * s.xb, 1)
    S = np.stack(
        [
            np.stack([s.z2, s.zb, xbz, s.z1], 1),
            np.stack([s.zb, s.b2, xbb, s.b1], 1),
            np.stack([xbz, xbb, xbar2, xbar1], 1),
            np.stack([s.z1, s.b1, xbar1, np.ones(M)], 1),
        ],
        1,
    )  # (M, 4, 4): second moments of (z, buf, xbar, 1)
    new = np.einsum("mai,mij,mbj->mab", c.rows, S, c.rows)
    mean = np.einsum("mai,mi->ma", c.rows, S[:, :, 3])
    s.z2 = np.where(sync, new[:, 0, 0], s.z2)
    s.zb = np.where(sync, new[:, 0, 1], s.zb)
    s.b2 = np.where(sync, new[:, 1, 1], s.b2)
    s.z1, s.b1 = np.where(sync, mean[:, 0], s.z1), np.where(sync, mean[:, 1], s.b1)
    sel = sync[:, None]
    s.x1 = np.where(sel, s.z1[:, None], s.x1)
    s.x2 = np.where(sel, s.z2[:, None], s.x2)
    s.xz = np.where(sel, s.z2[:, None], s.xz)
    s.xb = np.where(sel, s.zb[:, None], s.xb)
    s.P = np.where(sync[:, None, None], s.z2[:, None, None], s.P)


def _unit_moments(r: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``c = 1`` runs of a batch, step by step (arrays of shape ``(M,)`` in ``r``:
    ``alpha, L, b, K, H, T, p, eta, shared`` and ``rows``, ``(M, 2, 4)``).

    Returns ``(iterates, anchors, reach)``: per step ``m^2 E xbar_t^2`` and, at each round's
    start, ``m^2 E z^2`` (``(M, max T)``, zero past a design's ``T``), and the largest ``|x|``
    of a worker or the anchor (exact without coins; ``nan`` with coins).

    Workers of a group are exchangeable: per group the moments of one worker, per pair of
    groups those of two distinct workers. A worker of group ``g`` on branch ``i`` (gradient
    step with probability ``1 - p``, pull with probability ``p``) moves to ``a_ig . (x, z,
    1)``; the coins are independent of the state, so with ``Y_g = (x_g, z, 1)`` one
    worker's second moments become ``sum_i pi_i a_ig^T E[Y_g Y_g^T] a_ig`` and two distinct
    workers' ``sum_ij pi_ij a_ig^T E[Y_g Y_h^T] a_jh``, with ``pi_ij = pi_i pi_j``
    (independent coins) or ``pi_i [i = j]`` (shared coins)."""
    c = _coins(r)
    M, T, H, coin, n = c.K.size, c.T, c.H, c.coin, c.n
    s = _Moments.zeros(M)
    Tmax = int(T.max())
    iters, anchors = np.zeros((M, Tmax)), np.zeros((M, Tmax))
    reach = np.zeros(M)
    one = np.ones((M, 3))
    two = np.empty((M, 3, 3, 3, 3))  # (M, g, h, 3, 3): E[Y_g Y_h^T], distinct workers
    two[..., 2, 2] = 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(Tmax):
            live = t < T
            anchors[:, t] = np.where(live & (t % H == 0), c.m2 * s.z2, 0.0)
            iters[:, t] = np.where(live, c.m2 * s.xbar2(c), 0.0)
            _local_step(c, s, two, one)
            reach = np.where(
                live & ~coin, np.maximum(reach, np.max(np.abs(s.x1) * (n > 0), 1)), reach
            )
            sync = live & ((t + 1) % H == 0)
            if not sync.any():
                continue
            _synchronise(c, s, sync)
            reach = np.where(sync & ~coin, np.maximum(reach, np.abs(s.z1)), reach)
    bad = ~np.all(np.isfinite(iters), 1) | ~np.all(np.isfinite(anchors), 1)
    reach = np.where(bad, np.inf, reach)
    return iters, anchors, np.where(coin, np.nan, reach)


def _coin_reach(r: Mapping[str, np.ndarray]) -> np.ndarray:
    """With coins: after each round (the final partial one included), the largest ``|x|``
    any worker or the anchor reaches on any coin path of the ``c = 1`` run, ``(M, rounds)``.

    Interval arithmetic, step by step: a worker's interval maps under the gradient branch
    ``x -> u x + w`` and under the pull ``x -> (1 - beta) x + beta z`` (``z`` over the
    anchor's interval, either sign of ``1 - beta``), and the hull of the two images is kept;
    at a sync ``(z', buf')`` is linear in ``(z, buf, xbar)``, so its range over the box is
    the sum of each coordinate's extreme contributions."""
    alpha, L, b, p, eta = (np.asarray(r[k], dtype=float) for k in ("alpha", "L", "b", "p", "eta"))
    K, H, T = (np.asarray(r[k], dtype=np.int64) for k in ("K", "H", "T"))
    M = alpha.size
    live_g = np.stack([K // 2, K // 2, K % 2], axis=1) > 0
    h = np.stack([L, b, 0.5 * (L + b)], axis=1)
    q = (1.0 - p)[:, None]
    u = 1.0 - alpha[:, None] * h / q
    w = -alpha[:, None] * np.array([1.0, -1.0, 0.0]) / q
    beta = pull_coefficient(alpha, eta, p)[:, None]  # coin rows only: p > 0
    wt = np.stack([K // 2, K // 2, K % 2], axis=1) / K[:, None]
    rows = np.asarray(r["rows"], dtype=float)
    zl, zh, bl, bh = (np.zeros(M) for _ in range(4))
    lo, hi = np.zeros((M, 3)), np.zeros((M, 3))
    reach = np.zeros(M)
    n_rounds = -(-T // H)
    hist = np.full((M, int(n_rounds.max())), np.nan)
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(int(T.max())):
            live = t < T
            g_lo, g_hi = np.minimum(u * lo, u * hi) + w, np.maximum(u * lo, u * hi) + w
            p_lo = np.minimum((1 - beta) * lo, (1 - beta) * hi) + beta * zl[:, None]
            p_hi = np.maximum((1 - beta) * lo, (1 - beta) * hi) + beta * zh[:, None]
            lo = np.where(live[:, None], np.minimum(g_lo, p_lo), lo)
            hi = np.where(live[:, None], np.maximum(g_hi, p_hi), hi)
            far = np.max(np.where(live_g, np.maximum(np.abs(lo), np.abs(hi)), 0.0), 1)
            reach = np.where(live, np.maximum(reach, far), reach)
            end = live & (((t + 1) % H == 0) | (t + 1 == T))
            if not end.any():
                continue
            xl, xh = np.sum(wt * lo, 1), np.sum(wt * hi, 1)
            box_lo = np.stack([zl, bl, xl, np.ones(M)], 1)
            box_hi = np.stack([zh, bh, xh, np.ones(M)], 1)
            new_lo = np.sum(np.minimum(rows * box_lo[:, None], rows * box_hi[:, None]), -1)
            new_hi = np.sum(np.maximum(rows * box_lo[:, None], rows * box_hi[:, None]), -1)
            zl, zh = np.where(end, new_lo[:, 0], zl), np.where(end, new_hi[:, 0], zh)
            bl, bh = np.where(end, new_lo[:, 1], bl), np.where(end, new_hi[:, 1], bh)
            reach = np.where(end, np.maximum(reach, np.maximum(np.abs(zl), np.abs(zh))), reach)
            hist[end, (t // H)[end]] = reach[end]
            lo = np.where(end[:, None], zl[:, None], lo)
            hi = np.where(end[:, None], zh[:, None], hi)
    return np.where(np.isnan(hist), np.inf, hist)


def hetero_witness(designs: list[dict], b_grid=(-0.9, -0.5, 0.0, 0.5)) -> np.ndarray:
    """At each design (``alpha, L, zeta, K, H, T`` and ``p, eta, gamma, mu, outer, measured,
    coins``), the largest exact value over the two-curvature instances at ``b/L`` in
    ``b_grid`` and each horizon of :func:`theory.lower.hetero.horizons`, every instance
    inside the class (heterogeneity at most ``zeta^2`` on its whole region); see the module
    docstring.

    A horizon ``T' <= T`` counts the first ``T'`` steps only (the later terms are ``>= 0``)
    on the instance sized for them; a diverging run has no instance (value 0)."""
    runs = []
    for i, d in enumerate(designs):
        if d["K"] < 2 or d["zeta"] == 0:
            continue
        spans = horizons(int(d["H"]), int(d["T"]), d.get("p", 0.0))
        rows = _outer_rows(d.get("outer", "average"), d.get("gamma", 1.0), d.get("mu", 0.0))
        for f in b_grid:
            runs.append((i, f * d["L"], spans, rows))
    out = np.zeros(len(designs))
    if not runs:
        return out
    batch = {
        k: np.array([float(designs[i].get(k, 0.0)) for i, *_ in runs])
        for k in ("alpha", "L", "K", "H", "p", "eta")
    }
    batch["b"] = np.array([b for _, b, _, _ in runs])
    batch["T"] = np.array([max(sp) for _, _, sp, _ in runs])
    batch["shared"] = np.array([designs[i].get("coins") == "shared" for i, *_ in runs])
    batch["rows"] = np.stack([rw for *_, rw in runs])
    iters, anchors, reach = _unit_moments(batch)
    coin = batch["p"] > 0
    hist = _coin_reach({k: v[coin] for k, v in batch.items()}) if coin.any() else None
    where = np.cumsum(coin) - 1  # row of each coin run in hist
    for k, (i, b, spans, _) in enumerate(runs):
        d = designs[i]
        K, H, T, L, p = int(d["K"]), int(d["H"]), int(d["T"]), d["L"], d.get("p", 0.0)
        for span in spans:
            if p == 0:
                U = float(reach[k])
            else:
                last = -(-max(spans) // H) - 1 if span == max(spans) else span // H - 1
                U = float(hist[where[k], last])
            if not math.isfinite(U):
                continue
            c = d["zeta"] * math.sqrt(K / (2 * (K // 2))) / (1.0 + 0.5 * (L - b) * U)
            if d.get("measured", "iterates") == "iterates":
                unit = float(np.sum(iters[k, :span])) / T
            else:
                mark = np.arange(span) % H == 0
                starts = np.flatnonzero(mark)[: span // H]
                unit = float(np.sum(anchors[k, starts])) / max(T // H, 1)
            if math.isfinite(unit):
                out[i] = max(out[i], c * c * unit)
    return out


def known_worst_case(d: Mapping[str, np.ndarray], *, heterogeneous: bool) -> np.ndarray:
    """The worst case over the class where it is known (module docstring), else ``nan``.

    ``d``: arrays ``alpha, L, sigma, F0, H, T`` (and ``p``); ``heterogeneous``: whether the
    designs have ``zeta > 0`` (then only the ``F0 = 0`` cases apply: with heterogeneity and
    local steps the workers do not run gradient descent on ``f``)."""
    alpha, L = np.asarray(d["alpha"], dtype=float), np.asarray(d["L"], dtype=float)
    F0 = np.asarray(d["F0"], dtype=float) if "F0" in d else np.zeros_like(L)
    sigma = np.asarray(d["sigma"], dtype=float) if "sigma" in d else np.zeros_like(L)
    T, H = np.asarray(d["T"], dtype=float), np.asarray(d["H"], dtype=float)
    p = np.asarray(d["p"], dtype=float) if "p" in d else np.zeros_like(L)
    out = np.full(L.shape, np.nan)
    quiet = sigma == 0
    if not heterogeneous:
        with np.errstate(divide="ignore", invalid="ignore"):
            lemma = 2 * F0 / (alpha * (2 - alpha * L) * T)
        out = np.where(quiet & (p == 0) & (alpha * L < 2), lemma, out)
    at_minimiser = quiet & (F0 == 0) & (((H == 1) & (p == 0)) | (T == 1))
    return np.where(at_minimiser, 0.0, out)
