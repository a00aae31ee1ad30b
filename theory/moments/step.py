"""One step of the second-moment matrix ``S = E[y y^T]`` of ``y = (x_1..x_K, z, buf, 1)``
per eigendirection: local steps, warm-up steps, the sync and the start of the local phase.
An overlapped sync (``sync_delay >= 1``) appends the outer gradient in flight ``q`` to the
state, ``y = (x_1..x_K, z, buf, 1, q)``: its start (:func:`delayed_sync_matrix`) and its
landing (:func:`landing_matrix`) are linear maps too, and local steps leave ``q`` alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from theory.algorithm import AlgorithmSpec
from theory.moments.branches import Branch


def _branch_blocks(
    br: Branch, delta: np.ndarray, n_other: int = 3
) -> tuple[np.ndarray, np.ndarray]:
    """Per-direction scale ``(d,)`` and the ``(d, K, n_other)`` coefficients on
    ``(z, buf, 1[, q])`` (zero on ``q``)."""
    d, K = delta.shape
    scale = np.broadcast_to(np.asarray(br.scale, dtype=float), (d,))
    B = np.zeros((d, K, n_other))
    B[:, :, 0] = np.broadcast_to(np.asarray(br.pull, dtype=float), (d,))[:, None]
    B[:, :, 2] = np.broadcast_to(np.asarray(br.drift, dtype=float), (d,))[:, None] * delta
    return scale, B


def _map_blocks(W, C, O, scale, B):
    """Worker block and worker/others block after ``y_w <- scale*y_w + B y_o`` (exact)."""
    Bt = B.transpose(0, 2, 1)
    BO = B @ O
    s = scale[:, None, None]
    # s^2 W + s (C B^T + B C^T) + B O B^T, with B C^T = (C B^T)^T
    CB = s * (C @ Bt)
    W_new = s**2 * W + CB + CB.transpose(0, 2, 1) + BO @ Bt
    C_new = s * C + BO
    return W_new, C_new


def _assemble(S: np.ndarray, K: int, W_new: np.ndarray, C_new: np.ndarray) -> np.ndarray:
    out = S.copy()
    out[:, :K, :K] = W_new
    out[:, :K, K:] = C_new
    out[:, K:, :K] = C_new.transpose(0, 2, 1)
    return out


@dataclass(frozen=True)
class StepMap:
    """The per-direction maps of a local step, the same at every step: for each branch
    ``(prob, scale (d,), B (d, K, 3))`` (see :func:`_branch_blocks`), their
    probability-weighted means ``mean_scale``, ``mean_B`` and the mean unit-noise factor
    ``noise`` (d,)."""

    branches: tuple[tuple[float, np.ndarray, np.ndarray], ...]
    mean_scale: np.ndarray
    mean_B: np.ndarray
    noise: np.ndarray


def step_map(branches: Sequence[Branch], delta: np.ndarray, n_other: int = 3) -> StepMap:
    """The :class:`StepMap` of ``branches`` with heterogeneity offsets ``delta`` (d, K), on
    a state with ``n_other`` entries after the workers (3, or 4 with ``q``)."""
    d, K = delta.shape
    blocks = []
    noise = np.zeros(d)
    mean_scale = np.zeros(d)
    mean_B = np.zeros((d, K, n_other))
    for br in branches:
        scale, B = _branch_blocks(br, delta, n_other)
        blocks.append((br.prob, scale, B))
        noise += br.prob * np.broadcast_to(np.asarray(br.noise, dtype=float), (d,))
        mean_scale += br.prob * scale
        mean_B += br.prob * B
    return StepMap(tuple(blocks), mean_scale, mean_B, noise)


def local_step(S: np.ndarray, K: int, step: StepMap, s2: np.ndarray, shared: bool) -> np.ndarray:
    """One local step of every worker: exact update of ``S = E[y y^T]`` per direction.

    Shared coins: every worker takes the same branch, so ``S'`` is the branch average of
    ``M S M^T``. Independent coins: a worker's row is linear in its own coin, so
    cross-worker entries use the mean map and each worker's own second moment is the branch
    average (the diagonal of the shared-coin formula). Noise is independent per worker
    (variance ``s2[:, k]`` times the branch's unit-noise factor) and enters the diagonal.
    """
    W, C, O = S[:, :K, :K], S[:, :K, K:], S[:, K:, K:]
    W_sh = np.zeros_like(W)
    C_new = np.zeros_like(C)
    for prob, scale, B in step.branches:
        Wb, Cb = _map_blocks(W, C, O, scale, B)
        W_sh += prob * Wb
        C_new += prob * Cb
    idx = np.arange(K)
    if shared or len(step.branches) == 1:
        W_new = W_sh
    else:
        W_new, _ = _map_blocks(W, C, O, step.mean_scale, step.mean_B)
        W_new[:, idx, idx] = W_sh[:, idx, idx]
    W_new[:, idx, idx] += step.noise[:, None] * s2
    return _assemble(S, K, W_new, C_new)


def warm_step(S: np.ndarray, K: int, scale: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Minibatch SGD step ``y <- (1 - alpha lam) y - alpha mean_k xi_k`` on every worker
    (the workers hold the same model; the averaged noise, of variance ``noise`` per
    direction, is common to all of them)."""
    W, C, O = S[:, :K, :K], S[:, :K, K:], S[:, K:, K:]
    W_new, C_new = _map_blocks(W, C, O, scale, np.zeros((S.shape[0], K, S.shape[1] - K)))
    return _assemble(S, K, W_new + noise[:, None, None], C_new)


def apply_linear(J: np.ndarray, S: np.ndarray) -> np.ndarray:
    """``S <- J S J^T`` for a deterministic linear map ``J`` common to all directions."""
    return np.einsum("ij,djk,lk->dil", J, S, J, optimize=True)


def sync_matrix(K: int, algo: AlgorithmSpec) -> np.ndarray:
    """Outer step and restart as a linear map on ``(x_1..x_K, z, buf, 1)`` (shifted coords).

    ``Delta = z - xbar``; the rows of ``z'`` and ``buf'`` are
    :func:`theory.algorithm.outer_step` applied to the rows of ``z``, ``buf`` and ``Delta``
    (``outer_steps_per_sync - 1`` further steps on a zero outer gradient included). Then
    ``x_k' = z'``.
    """
    n = K + 3
    iz, ib, i1 = K, K + 1, K + 2
    J = np.eye(n)
    delta_row = np.zeros(n)
    delta_row[:K] = -1.0 / K
    delta_row[iz] = 1.0
    z_row, buf_row = algo.outer_step(J[iz].copy(), J[ib].copy(), delta_row)
    J[ib] = buf_row
    J[:K] = z_row
    J[iz] = z_row
    J[i1] = 0.0
    J[i1, i1] = 1.0
    return J


def delayed_sync_matrix(K: int) -> np.ndarray:
    """Start of an overlapped sync on ``(x_1..x_K, z, buf, 1, q)``: ``q <- z - xbar``, then
    ``x_k <- z``; ``z`` and ``buf`` unchanged (:mod:`theory.algorithm`)."""
    iz, iq = K, K + 3
    J = np.eye(K + 4)
    J[iq] = 0.0
    J[iq, :K] = -1.0 / K
    J[iq, iz] = 1.0
    J[:K] = 0.0
    J[:K, iz] = 1.0
    return J


def landing_matrix(K: int, algo: AlgorithmSpec) -> np.ndarray:
    """Landing of an overlapped sync on ``(x_1..x_K, z, buf, 1, q)``: ``(z', buf')`` is
    :func:`theory.algorithm.outer_step` on the rows of ``z``, ``buf`` and ``q``, then
    ``x_k <- x_k + z' - z`` and ``q <- 0``."""
    iz, ib, iq = K, K + 1, K + 3
    J = np.eye(K + 4)
    z_row, buf_row = algo.outer_step(J[iz].copy(), J[ib].copy(), J[iq].copy())
    J[:K] += z_row - J[iz]
    J[iz] = z_row
    J[ib] = buf_row
    J[iq] = 0.0
    return J


def start_matrix(K: int, n: int | None = None) -> np.ndarray:
    """End of warm-up: ``z <- xbar``, ``buf <- 0``, workers unchanged (``n``: the state's
    size, ``K + 3`` or ``K + 4`` with ``q``, which is zero then)."""
    n = K + 3 if n is None else n
    J = np.eye(n)
    J[K] = 0.0
    J[K, :K] = 1.0 / K
    J[K + 1] = 0.0
    return J
