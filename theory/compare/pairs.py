"""Exact moments of one round on quadratics whose workers have different diagonal Hessians.

Per coordinate (the Hessians are diagonal, so coordinates evolve independently given the
coins, and a coordinate's moments depend only on its own dynamics), worker ``k`` minimises
``l_k (x - m_k)^2 / 2``. In coordinates shifted by the minimiser ``x*`` of
``f = mean_k f_k`` (``sum_k l_k (m_k - x*) = 0``), with ``delta_k = m_k - x*``, a local
step of worker ``k`` is one of the two branches of
:func:`theory.moments.branches.local_step_branches`: with probability ``1 - p`` a gradient
step ``y <- (1 - a l_k) y + a l_k delta_k - a xi`` (``a = alpha/(1-p)``, ``Var xi = s2``),
with probability ``p`` a pull ``y <- (1 - c) y + c y_z`` (``c = alpha eta/p``).

Within a round the anchor ``y_z`` is frozen and every worker starts at it, so after ``j``
steps ``y_k = A_k y_z + B_k + N_k``, where ``(A_k, B_k)`` depend only on worker ``k``'s
coin path (``A = 1``, ``B = 0`` at the start; a branch maps ``A <- s A + c_pull``,
``B <- s B + drift delta_k``) and ``N_k`` is its accumulated noise (mean zero given the
coins, independent across workers). The mean of the workers,
``ybar = Abar y_z + Bbar + Nbar``, needs the joint moments of ``(A_j, B_j, A_k, B_k)`` of
every pair of workers: for a pair the ten numbers
``(1, E A_j, E A_k, E B_j, E B_k, E A_j A_k, E A_j B_k, E B_j A_k, E B_j B_k, E N_j N_k)``
follow one fixed linear map per step (:func:`pair_step_matrix`), whose coefficients are the
branch means under the pair's joint coin law: one coin for ``j = k`` and for shared coins,
two independent coins otherwise. With independent coins only the diagonal pairs are
propagated; the cross moments of two workers are products of their first moments.

Unlike quadratics with one common Hessian (:mod:`theory.moments.oracle`), ``E Bbar`` and
``E Abar Bbar`` do not vanish: they are the drift that biases Local SGD's fixed point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.moments.batch import power_apply
from theory.moments.branches import local_step_branches
from theory.moments.rounds import with_accumulators

__all__ = ["NP", "RoundMoments", "pair_step_matrix", "pairs_of", "round_moments"]

#: the state of one pair of workers
NP = 10
ONE, AJ, AK, BJ, BK, AA, AB, BA, BB, NN = range(NP)


def pairs_of(K: int, shared: bool) -> list[tuple[int, int]]:
    """The pairs ``(j, k)``, ``j <= k``, whose joint moments are propagated: all of them
    with shared coins, the diagonal with independent coins."""
    if shared:
        return [(j, k) for j in range(K) for k in range(j, K)]
    return [(k, k) for k in range(K)]


def _branches(l: np.ndarray, delta: np.ndarray, s2: np.ndarray, alpha, eta, p, dtype=float):
    """``(prob, scale, pull, drift, noise)`` of the two branches, broadcast to ``l``."""
    out = []
    for br in local_step_branches(l, alpha, eta, p, s2):
        out.append(
            tuple(
                np.broadcast_to(np.asarray(v, dtype=dtype), np.broadcast(l, alpha, p).shape)
                for v in (br.prob, br.scale, br.pull, br.drift * delta, br.noise)
            )
        )
    if len(out) == 1:  # p == 0: a pull branch of probability 0 keeps the shapes uniform
        z = np.zeros_like(out[0][0])
        out.append((z, z + 1.0, z, z, z))
    return out


def pair_step_matrix(
    lj: np.ndarray,
    lk: np.ndarray,
    dj: np.ndarray,
    dk: np.ndarray,
    s2: np.ndarray,
    alpha: np.ndarray,
    eta: np.ndarray,
    p: np.ndarray,
    *,
    same_coin: bool,
    same_worker: bool,
    dtype: type = float,
) -> np.ndarray:
    """The expected map of one local step on the pair state, ``(..., 10, 10)``.

    ``lj, lk`` curvatures, ``dj, dk`` offsets ``delta`` of the two workers, ``s2`` the noise
    variance of one gradient (all broadcast together with the per-design ``alpha, eta,
    p``). ``same_coin``: the two workers draw one coin (shared coins, or ``j = k``);
    ``same_worker``: ``j = k`` (only then is the noise correlated); ``dtype``: of the matrix
    (``np.longdouble`` for the precision guard, :mod:`theory.compare.precision`).
    """
    bj = _branches(lj, dj, s2, alpha, eta, p, dtype)
    bk = _branches(lk, dk, s2, alpha, eta, p, dtype)
    combos = [(0, 0), (1, 1)] if same_coin else [(0, 0), (0, 1), (1, 0), (1, 1)]
    shape = np.broadcast_shapes(bj[0][0].shape, bk[0][0].shape)
    P = np.zeros(shape + (NP, NP), dtype=dtype)
    P[..., ONE, ONE] = 1.0
    for ij, ik in combos:
        pj, sj, cj, rj, nj = bj[ij]
        pk, sk, ck, rk, _ = bk[ik]
        w = pj if same_coin else pj * pk
        P[..., AJ, AJ] += w * sj
        P[..., AJ, ONE] += w * cj
        P[..., AK, AK] += w * sk
        P[..., AK, ONE] += w * ck
        P[..., BJ, BJ] += w * sj
        P[..., BJ, ONE] += w * rj
        P[..., BK, BK] += w * sk
        P[..., BK, ONE] += w * rk
        ss = w * sj * sk
        P[..., AA, AA] += ss
        P[..., AA, AJ] += w * sj * ck
        P[..., AA, AK] += w * cj * sk
        P[..., AA, ONE] += w * cj * ck
        P[..., AB, AB] += ss
        P[..., AB, AJ] += w * sj * rk
        P[..., AB, BK] += w * cj * sk
        P[..., AB, ONE] += w * cj * rk
        P[..., BA, BA] += ss
        P[..., BA, BJ] += w * sj * ck
        P[..., BA, AK] += w * rj * sk
        P[..., BA, ONE] += w * rj * ck
        P[..., BB, BB] += ss
        P[..., BB, BJ] += w * sj * rk
        P[..., BB, BK] += w * rj * sk
        P[..., BB, ONE] += w * rj * rk
        P[..., NN, NN] += ss
        if same_worker:
            P[..., NN, ONE] += w * nj
    return P


def start_state(shape: tuple[int, ...], dtype: type = float) -> np.ndarray:
    """The pair state at the start of a round: ``A = 1``, ``B = 0``, no noise."""
    u = np.zeros(shape + (NP,), dtype=dtype)
    u[..., ONE] = u[..., AJ] = u[..., AK] = u[..., AA] = 1.0
    return u


@dataclass(frozen=True)
class RoundMoments:
    """Moments of the workers' mean after ``H`` local steps, per design and coordinate.

    ``ybar = Abar y_z + Bbar + Nbar`` (shifted coordinates): ``a1 = E Abar``,
    ``b1 = E Bbar``, ``aa = E Abar^2``, ``ab = E Abar Bbar``, ``bb = E Bbar^2``,
    ``nn = E Nbar^2``; and the same for one worker averaged over the workers
    (``w_aa = mean_k E A_k^2``, ``w_ab = mean_k E A_k B_k``, ``w_bb = mean_k E B_k^2``,
    ``w_nn = mean_k E N_k^2``), from which the consensus error
    ``E (1/K) sum_k (y_k - ybar)^2`` follows. Arrays of shape ``(N, d)``.
    """

    a1: np.ndarray
    b1: np.ndarray
    aa: np.ndarray
    ab: np.ndarray
    bb: np.ndarray
    nn: np.ndarray
    w_aa: np.ndarray
    w_ab: np.ndarray
    w_bb: np.ndarray
    w_nn: np.ndarray

    def consensus_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The consensus error as ``c2 E y_z^2 + c1 E y_z + c0``: ``(c2, c1, c0)``."""
        return (
            self.w_aa - self.aa,
            2.0 * (self.w_ab - self.ab),
            self.w_bb + self.w_nn - self.bb - self.nn,
        )


def round_moments(
    lam: np.ndarray,
    delta: np.ndarray,
    s2: np.ndarray,
    *,
    alpha: np.ndarray,
    eta: np.ndarray,
    p: np.ndarray,
    H: np.ndarray,
    shared: bool,
    sums: bool = False,
) -> RoundMoments | tuple[RoundMoments, RoundMoments]:
    """:class:`RoundMoments` of ``N`` designs after ``H`` local steps.

    ``lam``, ``delta``: ``(d, K)`` curvatures and shifted minimisers of the workers;
    ``s2``: ``(d,)`` noise variance of one gradient per coordinate; ``alpha, eta, p``:
    ``(N,)`` floats; ``H``: ``(N,)`` integers; ``shared``: one coin for all workers.
    Cost ``O(N d P log2 max H)`` with ``P`` the number of pairs (:func:`pairs_of`).

    ``sums``: also return the sums over the steps ``j = 0 .. H-1`` of the round (the state
    before each step) of the same moments, for time averages over every step; every pair is
    then propagated (with independent coins the cross moment of two workers at each step is
    the product of their means, which does not sum linearly).
    """
    d, K = lam.shape
    a, e, q = (np.asarray(x, dtype=float).reshape(-1, 1) for x in (alpha, eta, p))
    N = a.shape[0]
    Hn = np.asarray(H, dtype=np.int64).reshape(-1)
    pairs = [(j, k) for j in range(K) for k in range(j, K)] if sums else pairs_of(K, shared)
    end, acc = {}, {}
    for j, k in pairs:
        P = pair_step_matrix(
            lam[None, :, j], lam[None, :, k], delta[None, :, j], delta[None, :, k],
            s2[None, :], a, e, q, same_coin=shared or j == k, same_worker=j == k,
        )  # fmt: skip
        P = np.broadcast_to(P, (N, d, NP, NP))
        u0 = start_state((N, d))
        if sums:
            P = with_accumulators(P, [np.broadcast_to(row, (N, d, NP)) for row in np.eye(NP)])
            u0 = np.concatenate([u0, np.zeros((N, d, NP))], axis=-1)
            u = power_apply(P, Hn, u0)
            end[j, k], acc[j, k] = u[..., :NP], u[..., NP:]
        else:
            end[j, k] = power_apply(P, Hn, u0)
    if sums:
        return _aggregate(end, K, shared), _aggregate(acc, K, shared)
    return _aggregate(end, K, shared)


def _aggregate(mom: dict[tuple[int, int], np.ndarray], K: int, shared: bool) -> RoundMoments:
    """The workers' mean moments from the pair states (products of the means for the pairs
    not propagated: independent coins)."""
    EA = [mom[k, k][..., AJ] for k in range(K)]
    EB = [mom[k, k][..., BJ] for k in range(K)]
    zero = np.zeros_like(EA[0])
    aa, ab, bb = zero.copy(), zero.copy(), zero.copy()
    for j in range(K):
        for k in range(K):
            u = mom.get((min(j, k), max(j, k)))
            if u is not None:
                aa += u[..., AA]
                bb += u[..., BB]
                ab += u[..., AB] if j <= k else u[..., BA]  # E A_j B_k
            else:
                aa += EA[j] * EA[k]
                bb += EB[j] * EB[k]
                ab += EA[j] * EB[k]
    diag = [mom[k, k] for k in range(K)]
    return RoundMoments(
        a1=sum(EA) / K,
        b1=sum(EB) / K,
        aa=aa / K**2,
        ab=ab / K**2,
        bb=bb / K**2,
        nn=sum(u[..., NN] for u in diag) / K**2,
        w_aa=sum(u[..., AA] for u in diag) / K,
        w_ab=sum(u[..., AB] for u in diag) / K,
        w_bb=sum(u[..., BB] for u in diag) / K,
        w_nn=sum(u[..., NN] for u in diag) / K,
    )
