"""The anchor's exact second moments round by round, and the first round that reaches a target.

After each sync the anchor ``z`` (shifted by ``x*``) and the outer buffer have the moments
``v = (E z^2, E z buf, E buf^2, E z, E buf, 1)`` per coordinate; one round and its outer
step is the fixed affine map :func:`theory.moments.rounds.round_map` of ``v`` (built from
:class:`theory.compare.pairs.RoundMoments`), and the target quantity
``E||grad f(z_r)||^2 = sum_i lbar_i^2 E z_{r,i}^2`` is linear in ``v``
(``lbar_i = mean_k l_{k,i}``).

:func:`first_passage` finds, for every design, the first round ``r`` at which that value is
at most ``eps`` (for several ``eps`` at once), exactly: every round is evaluated, in blocks
of ``B`` rounds (the rows ``e_z2 M^j``, ``j = 1..B``, are computed once per design, so a
block costs ``6 B`` multiplications per coordinate instead of ``36 B``). A design stops when
it has reached every target, passed its round cap, or diverged (a value above
``DIVERGED``, or not finite).
"""

from __future__ import annotations

import numpy as np

from theory.compare.pairs import RoundMoments
from theory.moments.batch import power_apply
from theory.moments.rounds import NV, ONE, Z1, Z2, outer_coefficients, round_map

__all__ = ["DIVERGED", "SKIPPED", "anchor_map", "start_vector", "first_passage", "values_at"]

#: a value above this counts as diverged
DIVERGED = 1e200


def anchor_map(mom: RoundMoments, outer: str, gamma: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """The round map ``(N, d, 6, 6)`` of the anchor moments: local steps, outer step on
    ``Delta = z - ybar``, restart. ``outer``: ``"sgd"`` (heavy ball with momentum ``mu``;
    plain averaging is ``gamma = 1, mu = 0``) or ``"nesterov"``; ``gamma, mu``: ``(N,)``."""
    g = np.asarray(gamma, dtype=float).reshape(-1, 1)
    m = np.asarray(mu, dtype=float).reshape(-1, 1)
    zc, bc = outer_coefficients(outer, g, m)
    return round_map(mom.a1, mom.aa, mom.bb + mom.nn, zc, bc, b1=mom.b1, ab=mom.ab)


def start_vector(y0: np.ndarray, N: int) -> np.ndarray:
    """``v`` at the start, ``(N, d, 6)``: ``z = y0`` (shifted start), no buffer."""
    v = np.zeros((N, y0.shape[0], NV))
    v[..., Z2], v[..., Z1], v[..., ONE] = y0**2, y0, 1.0
    return v


def values_at(M: np.ndarray, v0: np.ndarray, weight: np.ndarray, rounds: np.ndarray) -> np.ndarray:
    """``E||grad f(z_r)||^2`` after ``rounds[n]`` rounds of design ``n`` (matrix powers)."""
    v = power_apply(M, np.asarray(rounds, dtype=np.int64), v0)
    return np.einsum("d,nd->n", weight, v[..., Z2])


def _row_powers(M: np.ndarray, B: int) -> np.ndarray:
    """``e_z2 M^j`` for ``j = 1..B``: ``(N, d, B, 6)``."""
    rows = np.empty(M.shape[:2] + (B, NV))
    r = M[..., Z2, :]
    for j in range(B):
        rows[..., j, :] = r
        if j + 1 < B:
            r = np.einsum("ndi,ndij->ndj", r, M)
    return rows


def first_passage(
    M: np.ndarray,
    v0: np.ndarray,
    weight: np.ndarray,
    eps: np.ndarray,
    cap: np.ndarray,
    *,
    group: np.ndarray | None = None,
    block: int = 64,
) -> tuple[np.ndarray, np.ndarray]:
    """The first round at which ``E||grad f(z_r)||^2 <= eps``, per design and target.

    ``M`` ``(N, d, 6, 6)`` round maps, ``v0`` ``(N, d, 6)`` start moments, ``weight`` ``(d,)``
    the squared mean curvatures ``lbar_i^2``, ``eps`` ``(E,)`` targets, ``cap`` ``(N,)`` the
    last round to examine per design.

    ``group`` ``(N,)`` (optional): designs of one group are alternatives of which only the
    fastest matters (one method's tuning grid in one cell, where every design pays the same
    per round). A design then stops looking for a target once its group has reached it at an
    earlier round, and that entry is ``SKIPPED`` (-2): the group's minimum is still exact.

    A design whose moments have settled above a target stops too: once the round map's linear
    part ``M_lin`` satisfies ``||M_lin^B||_2 < 1`` (``B = block``), every later value lies
    within ``sum_i G_i ||v_{r,i} - v_inf,i||`` of the limit ``floor``
    (``G_i = max_{j <= B} ||e_z2 M_i^j||``), so the target is out of reach for good when
    ``floor - that > eps``: the entry stays -1.

    Returns ``(rounds, diverged)``: ``rounds`` ``(N, E)`` int64 (-1 not reached by round
    ``cap``, -2 skipped), ``diverged`` ``(N,)`` the designs whose moments blew up.
    """
    N, d = M.shape[:2]
    eps = np.asarray(eps, dtype=float).reshape(-1)
    cap = np.asarray(cap, dtype=np.int64).reshape(-1)
    grp = np.zeros(N, dtype=np.int64) if group is None else np.asarray(group).reshape(-1)
    out = np.full((N, eps.size), -1, dtype=np.int64)
    diverged = np.zeros(N, dtype=bool)
    with np.errstate(all="ignore"):
        val0 = np.einsum("d,nd->n", weight, v0[..., Z2])
    out[val0[:, None] <= eps[None, :]] = 0
    n_groups = int(grp.max()) + 1 if N else 0
    best = np.full((n_groups, eps.size), np.iinfo(np.int64).max)
    np.minimum.at(best, grp, np.where(out >= 0, out, np.iinfo(np.int64).max))
    active = np.flatnonzero((out < 0).any(axis=1) & (cap > 0))
    if active.size == 0:
        return out, diverged
    B = int(max(1, min(block, cap.max())))
    with np.errstate(all="ignore"):
        rows = _row_powers(M[active], B)  # (n, d, B, 6)
        MB = _matrix_power(M[active], B)
        stop = _settled_bound(M[active], rows, MB)  # (G (n, d), floor-state (n, d, 6)) or None
    wrows = (
        (weight[None, :, None, None] * rows).transpose(0, 2, 1, 3).reshape(active.size, B, d * NV)
    )
    v = v0[active].copy()
    r0 = 0
    with np.errstate(all="ignore"):
        while active.size:
            vals = np.matmul(wrows, v.reshape(active.size, d * NV, 1))[..., 0]  # r0+1 .. r0+B
            bad = ~np.isfinite(vals) | (vals > DIVERGED)
            rnd = r0 + 1 + np.arange(B)
            first_bad = np.where(bad.any(axis=1), bad.argmax(axis=1), B)
            ok = (rnd[None, :] <= cap[active, None]) & (np.arange(B)[None, :] < first_bad[:, None])
            hit = (vals[:, :, None] <= eps[None, None, :]) & ok[:, :, None]
            got = hit.any(axis=1)
            first = rnd[hit.argmax(axis=1)]
            sub = out[active]
            new = got & (sub < 0)
            sub[new] = first[new]
            g = grp[active]
            np.minimum.at(best, g, np.where(new, sub, np.iinfo(np.int64).max))
            r0 += B
            sub[(sub == -1) & (best[g] <= r0)] = SKIPPED
            blown = first_bad < B
            diverged[active[blown]] = True
            keep = (sub == -1).any(axis=1) & ~blown & (cap[active] > r0)
            if stop is not None:
                keep &= ~_settled(stop, v, weight, eps, sub)
            out[active] = sub
            if not keep.all():
                active, wrows, MB, v = active[keep], wrows[keep], MB[keep], v[keep]
                if stop is not None:
                    stop = tuple(x[keep] for x in stop)
            if active.size:
                v = np.matmul(MB, v[..., None])[..., 0]
    return out, diverged


#: an entry of :func:`first_passage` not searched further: its group reached the target earlier
SKIPPED = -2


def _settled_bound(M: np.ndarray, rows: np.ndarray, MB: np.ndarray):
    """``(G, v_inf, contracting)`` for the settled-above-target test of :func:`first_passage`."""
    lin = MB[..., :ONE, :ONE]  # the linear part (ONE is the last state)
    q = np.linalg.norm(lin, ord=2, axis=(-2, -1))  # (n, d)
    contracting = np.isfinite(q) & (q < 1.0)
    # contracting: spectral radius < 1, so I - M_lin is invertible and v_inf exists
    A = np.where(contracting[..., None, None], np.eye(ONE) - M[..., :ONE, :ONE], np.eye(ONE))
    c = np.where(contracting[..., None], M[..., :ONE, ONE], 0.0)
    x = np.linalg.solve(A, c[..., None])[..., 0]
    v_inf = np.concatenate([x, np.ones(x.shape[:-1] + (1,))], axis=-1)
    G = np.maximum(1.0, np.linalg.norm(rows[..., :ONE], axis=-1).max(axis=-1))  # (n, d)
    return G, v_inf, contracting.all(axis=1)


def _settled(stop, v: np.ndarray, weight: np.ndarray, eps: np.ndarray, sub: np.ndarray):
    """Designs whose every unreached target is out of reach for good (see :func:`first_passage`)."""
    G, v_inf, ok = stop
    floor = np.einsum("d,nd->n", weight, v_inf[..., Z2])
    dev = np.einsum("d,nd,nd->n", weight, G, np.linalg.norm((v - v_inf)[..., :ONE], axis=-1))
    open_eps = np.where(sub == -1, eps[None, :], -np.inf).max(axis=1)
    return ok & np.isfinite(floor) & (floor - dev > open_eps)


def _matrix_power(M: np.ndarray, e: int) -> np.ndarray:
    """``M^e`` for one exponent ``e >= 1``, by repeated squaring: ``(..., n, n)``."""
    result = None
    base = M
    while e:
        if e & 1:
            result = base if result is None else result @ base
        e >>= 1
        if e:
            base = base @ base
    return result
