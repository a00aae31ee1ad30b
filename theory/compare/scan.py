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

__all__ = [
    "DIVERGED", "SKIPPED", "anchor_map", "start_vector", "first_passage", "values_at",
    "early_values",
]  # fmt: skip

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


def early_values(M: np.ndarray, v0: np.ndarray, weight: np.ndarray, W: int) -> np.ndarray:
    """``(N, W)`` the values ``E||grad f(z_r)||^2`` of rounds ``1 .. W`` (``inf`` where not
    finite), as :func:`first_passage`'s first block computes them."""
    N, d = M.shape[:2]
    with np.errstate(all="ignore"):
        wrows = _weighted_rows(_row_powers(M, W), weight)
        vals = np.matmul(wrows, v0.reshape(N, d * NV, 1))[..., 0]
    return np.where(np.isnan(vals), np.inf, vals)


def _weighted_rows(rows: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``(n, B, d * 6)``: the rows ``lbar^2 e_z2 M^j`` side by side over the coordinates."""
    n, d, B = rows.shape[:3]
    return (weight[None, :, None, None] * rows).transpose(0, 2, 1, 3).reshape(n, B, d * NV)


def _row_powers(M: np.ndarray, B: int) -> np.ndarray:
    """``e_z2 M^j`` for ``j = 1..B``: ``(N, d, B, 6)``, by doubling (``log2 B`` products:
    the rows ``k+1 .. 2k`` are the rows ``1 .. k`` times ``M^k``)."""
    rows = M[..., Z2 : Z2 + 1, :]
    P = M
    while rows.shape[-2] < B:
        rows = np.concatenate([rows, rows @ P], axis=-2)
        if rows.shape[-2] < B:
            P = P @ P
    return np.ascontiguousarray(rows[..., :B, :])


def first_passage(
    M: np.ndarray,
    v0: np.ndarray,
    weight: np.ndarray,
    eps: np.ndarray,
    cap: np.ndarray,
    *,
    group: np.ndarray | None = None,
    block: int = 64,
    sustained: bool = False,
    known: np.ndarray | None = None,
    values: int = 0,
) -> tuple[np.ndarray, ...]:
    """The first round at which ``E||grad f(z_r)||^2 <= eps``, per design and target.

    ``M`` ``(N, d, 6, 6)`` round maps, ``v0`` ``(N, d, 6)`` start moments, ``weight`` ``(d,)``
    the squared mean curvatures ``lbar_i^2``, ``eps`` ``(E,)`` targets, ``cap`` ``(N,)`` the
    last round to examine per design.

    ``group`` ``(N,)`` (optional): designs of one group are alternatives of which only the
    fastest matters (one method's tuning grid in one cell, where every design pays the same
    per round). A design then stops looking for a target once its group has reached it at an
    earlier round, and that entry is ``SKIPPED`` (-2): the group's minimum is still exact.

    A design whose moments have settled above a target stops too: once the round map's linear
    part ``M_lin`` satisfies ``||M_lin^(kB)||_2 < 1`` (``B = block``, some
    ``k <= CONTRACT_BLOCKS``), every later value lies within
    ``sum_i G_i ||v_{r,i} - v_inf,i||`` of the limit ``floor`` (``G_i`` of
    :func:`_settled_bound`), so the target is out of reach for good when
    ``floor - that > eps``: the entry stays -1.

    ``sustained``: also the first round from which the value *stays* at or below ``eps``
    (the columns ``E .. 2E-1``). Decided exactly where the round map contracts: at the first
    block end where ``floor + sum_i G_i ||v_{r,i} - v_inf,i|| <= eps`` no later value exceeds
    ``eps``, and the answer is one past the last round examined above it. Where that never
    happens by the cap, the horizon is the end of the block holding the cap (``B``-round
    blocks): the value stays at or below ``eps`` from that round through it. A design that
    diverges is never sustained. Group skipping holds here too: a design whose last round
    above ``eps`` is already past its group's decided answer is ``SKIPPED``.

    ``known`` ``(N, E)`` (``(N, 2E)`` with ``sustained``; optional): answers the design's
    group already has from earlier evaluations (negative: none), which the skipping starts
    from: a new design is then searched only as far as it could still tie or beat them.

    Returns ``(rounds, diverged)``: ``rounds`` ``(N, E)`` int64 (``(N, 2E)`` with
    ``sustained``; -1 not reached by round ``cap``, -2 skipped), ``diverged`` ``(N,)`` the
    designs whose moments blew up. ``values > 0``: also ``(N, values)`` the values of
    rounds ``1 .. values`` (what the scan computed anyway, for the tuner's continuous score
    inside a plateau of equal rounds; NaN where not examined, ``inf`` past a blow-up).
    """
    bk = _Book.start(v0, weight, eps, cap, group, sustained, known)
    early = np.full((bk.cap.size, values), np.nan) if values > 0 else None
    active = np.flatnonzero(((bk.out < 0) | ~bk.done).any(axis=1) & (bk.cap > 0))
    if active.size:
        _scan(bk, M, v0, weight, active, block, early)
    res = _joined(bk.out, bk.sus, sustained), bk.diverged
    return res if early is None else (*res, early)


class _Book:
    """The bookkeeping of :func:`first_passage`: the answers ``out`` (first passage) and
    ``sus`` (sustained) ``(N, E)``, the last round seen above each target, which sustained
    answers are decided, the groups' best answers so far and the diverged flags."""

    def __init__(self, eps, cap, grp, sustained, out, last, n_groups) -> None:
        N, E = out.shape
        self.eps, self.cap, self.grp, self.sustained = eps, cap, grp, sustained
        self.out, self.last = out, last
        self.sus = np.full((N, E), -1, dtype=np.int64)
        self.done = np.zeros((N, E), dtype=bool) if sustained else np.ones((N, E), dtype=bool)
        self.best = np.full((n_groups, E), _BIG)
        self.best_s = np.full((n_groups, E), _BIG)
        self.diverged = np.zeros(N, dtype=bool)

    @classmethod
    def start(cls, v0, weight, eps, cap, group, sustained, known) -> _Book:
        N = v0.shape[0]
        eps = np.asarray(eps, dtype=float).reshape(-1)
        E = eps.size
        cap = np.asarray(cap, dtype=np.int64).reshape(-1)
        grp = np.zeros(N, dtype=np.int64) if group is None else np.asarray(group).reshape(-1)
        out = np.full((N, E), -1, dtype=np.int64)
        with np.errstate(all="ignore"):
            val0 = np.einsum("d,nd->n", weight, v0[..., Z2])
        at0 = val0[:, None] <= eps[None, :]
        out[at0] = 0
        # sustained: the last round seen above eps (-1: none)
        last = np.where(at0, -1, 0).astype(np.int64)
        bk = cls(eps, cap, grp, sustained, out, last, int(grp.max()) + 1 if N else 0)
        np.minimum.at(bk.best, grp, np.where(out >= 0, out, _BIG))
        if known is not None:
            kn = np.asarray(known, dtype=np.int64).reshape(N, -1)
            kn = np.where(kn >= 0, kn, _BIG)
            np.minimum.at(bk.best, grp, kn[:, :E])
            if sustained:
                np.minimum.at(bk.best_s, grp, kn[:, E:])
        if sustained:  # a design without rounds to examine: its start decides
            zero = cap <= 0
            bk.sus[zero] = np.where(last[zero] < 0, 0, -1)
            bk.done[zero] = True
        return bk


#: the largest int64: "no answer yet" in the groups' minima
_BIG = np.iinfo(np.int64).max


def _scan(bk: _Book, M, v0, weight, active, block: int, early) -> None:
    """Run the designs ``active`` block by block until each is decided (:func:`first_passage`)."""
    d = M.shape[1]
    B = int(max(1, min(block, bk.cap.max())))
    with np.errstate(all="ignore"):
        rows = _row_powers(M[active], B)  # (n, d, B, 6)
        MB = _matrix_power(M[active], B)
        stop = _settled_bound(M[active], rows, MB)  # (G (n, d), floor-state (n, d, 6)) or None
        wrows = _weighted_rows(rows, weight)
    v = v0[active].copy()
    r0 = 0
    with np.errstate(all="ignore"):
        while active.size:
            vals = np.matmul(wrows, v.reshape(active.size, d * NV, 1))[..., 0]  # r0+1 .. r0+B
            if early is not None and r0 < early.shape[1]:
                n = min(B, early.shape[1] - r0)
                early[active, r0 : r0 + n] = np.where(np.isnan(vals[:, :n]), np.inf, vals[:, :n])
            keep = _block(bk, active, vals, r0, B, stop, v, weight)
            r0 += B
            if not keep.all():
                active, wrows, MB, v = active[keep], wrows[keep], MB[keep], v[keep]
                if stop is not None:
                    stop = tuple(x[keep] for x in stop)
            if active.size:
                v = np.matmul(MB, v[..., None])[..., 0]


def _block(bk: _Book, active, vals, r0: int, B: int, stop, v, weight) -> np.ndarray:
    """Book the values ``vals`` ``(n, B)`` of rounds ``r0+1 .. r0+B`` of the designs
    ``active``; which of them go on to the next block."""
    eps, cap = bk.eps, bk.cap[active]
    bad = ~np.isfinite(vals) | (vals > DIVERGED)
    rnd = r0 + 1 + np.arange(B)
    first_bad = np.where(bad.any(axis=1), bad.argmax(axis=1), B)
    valid = np.arange(B)[None, :] < first_bad[:, None]
    ok = (rnd[None, :] <= cap[:, None]) & valid
    hit = (vals[:, :, None] <= eps[None, None, :]) & ok[:, :, None]
    got = hit.any(axis=1)
    first = rnd[hit.argmax(axis=1)]
    sub = bk.out[active]
    new = got & (sub < 0)
    sub[new] = first[new]
    g = bk.grp[active]
    np.minimum.at(bk.best, g, np.where(new, sub, _BIG))
    blown = first_bad < B
    bk.diverged[active[blown]] = True
    above = (vals[:, :, None] > eps[None, None, :]) & valid[:, :, None]
    has = above.any(axis=1)
    lst = r0 + B - above[:, ::-1, :].argmax(axis=1)
    la = bk.last[active]
    la[has] = lst[has]
    r_end = r0 + B
    sub[(sub == -1) & (bk.best[g] <= r_end)] = SKIPPED
    above_for_good = below_for_good = np.zeros_like(sub, dtype=bool)
    if stop is not None:
        above_for_good, below_for_good = _settled(stop, v, weight, eps)
    dn, ss = bk.done[active], bk.sus[active]
    if bk.sustained:
        _book_sustained(bk, g, dn, ss, la, cap, r_end, blown, above_for_good, below_for_good)
    open_first = (sub == -1) & ~above_for_good
    keep = (open_first | ~dn).any(axis=1) & ~blown & (cap > r_end)
    bk.out[active], bk.last[active], bk.sus[active], bk.done[active] = sub, la, ss, dn
    return keep


def _book_sustained(bk: _Book, g, dn, ss, la, cap, r_end, blown, above, below) -> None:
    """The sustained answers decided at the block ending at round ``r_end`` (in place on
    ``dn``, ``ss``): a blow-up or a target above for good ends a design's chance, a target
    below for good (or the cap) decides it; a design already behind its group is skipped."""
    end = blown[:, None] | above
    ans = np.where(la + 1 <= cap[:, None], la + 1, -1)
    fin = below | (cap <= r_end)[:, None]
    ss[~dn & end] = -1
    pick = ~dn & ~end & fin
    ss[pick] = ans[pick]
    dn |= end | fin
    np.minimum.at(bk.best_s, g, np.where(dn & (ss >= 0), ss, _BIG))
    skip = ~dn & (la + 1 > bk.best_s[g])
    ss[skip], dn[skip] = SKIPPED, True


def _joined(out: np.ndarray, sus: np.ndarray, sustained: bool) -> np.ndarray:
    """The first-passage columns, followed by the sustained ones when asked for."""
    return np.concatenate([out, sus], axis=1) if sustained else out


#: an entry of :func:`first_passage` not searched further: its group reached the target earlier
SKIPPED = -2


#: blocks of ``B`` rounds the contraction test tries: ``||M_lin^(kB)||_2 < 1`` for some
#: ``k <= CONTRACT_BLOCKS`` (a slow Nesterov map contracts in norm only over many blocks)
CONTRACT_BLOCKS = 64
#: a power of the linear part this large is taken as not contracting within the blocks
_GROWN = 1e6


def _norm2(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(bound, finite)``: the Frobenius norm of a stack of matrices, an upper bound of the
    2-norm (no SVD; every test and ``G`` that use it stay valid); a blown-up matrix is not
    finite."""
    finite = np.isfinite(x).all(axis=(-2, -1)) & (np.abs(x).max(axis=(-2, -1)) < DIVERGED)
    y = np.where(finite[..., None, None], x, 0.0)
    return np.sqrt(np.einsum("...ij,...ij->...", y, y)), finite


def _settled_bound(M: np.ndarray, rows: np.ndarray, MB: np.ndarray):
    """``(G, v_inf, contracting)`` for the settled tests of :func:`first_passage`.

    Per design and coordinate, the least ``k <= CONTRACT_BLOCKS`` with
    ``q = ||M_lin^(kB)||_2 < 1`` (tested through the Frobenius norm, an upper bound): then for every ``j >= 0``, ``|e_z2 M_lin^j d| <= G ||d||`` with
    ``G = max_{i <= B} ||e_z2 M_lin^i|| * max_{k' < k} ||M_lin^(k'B)||`` (``j = m kB + k'B +
    i``, the ``m`` full powers contract).
    """
    lin = MB[..., :ONE, :ONE]  # the linear part (ONE is the last state)
    q, finite = _norm2(lin)
    contracting = finite & (q < 1.0)
    factor = np.where(contracting, 1.0, np.maximum(1.0, q))  # max_{k' < k} ||M^(k'B)||
    todo = ~contracting & finite
    if todo.any():
        idx = np.nonzero(todo)
        base = lin[idx]
        cur, fac = base.copy(), factor[idx]
        got = np.zeros(base.shape[0], dtype=bool)
        alive = np.ones(base.shape[0], dtype=bool)
        for _ in range(2, CONTRACT_BLOCKS + 1):
            cur = cur @ base
            # the Frobenius norm bounds the 2-norm from above (no SVD): a valid test and G
            qk = np.sqrt(np.einsum("nij,nij->n", cur, cur))
            ok_k = np.isfinite(qk) & (qk < _GROWN)
            newly = alive & ok_k & (qk < 1.0)
            got |= newly
            alive &= ok_k & ~newly  # a power that grew this far does not come back soon
            fac = np.where(alive, np.maximum(fac, qk), fac)
            if not alive.any():
                break
        contracting[idx] = got
        factor[idx] = fac
    # contracting: spectral radius < 1, so I - M_lin is invertible and v_inf exists
    A = np.where(contracting[..., None, None], np.eye(ONE) - M[..., :ONE, :ONE], np.eye(ONE))
    c = np.where(contracting[..., None], M[..., :ONE, ONE], 0.0)
    x = np.linalg.solve(A, c[..., None])[..., 0]
    v_inf = np.concatenate([x, np.ones(x.shape[:-1] + (1,))], axis=-1)
    G = np.maximum(1.0, np.linalg.norm(rows[..., :ONE], axis=-1).max(axis=-1))  # (n, d)
    return G * factor, v_inf, contracting.all(axis=1)


def _settled(stop, v: np.ndarray, weight: np.ndarray, eps: np.ndarray):
    """``(above, below)`` ``(n, E)``: the targets every later value of a design stays above
    (out of reach for good) or at or below (reached for good), see :func:`first_passage`."""
    G, v_inf, ok = stop
    floor = np.einsum("d,nd->n", weight, v_inf[..., Z2])
    dev = np.einsum("d,nd,nd->n", weight, G, np.linalg.norm((v - v_inf)[..., :ONE], axis=-1))
    sure = (ok & np.isfinite(floor) & np.isfinite(dev))[:, None]
    above = sure & ((floor - dev)[:, None] > eps[None, :])
    below = sure & ((floor + dev)[:, None] <= eps[None, :])
    return above, below


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
