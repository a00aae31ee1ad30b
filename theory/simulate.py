"""Vectorised simulator of minibatch SGD, Local SGD, Post-Local SGD, DiLoCo, PALSGD and EASGD.

``R`` independent replicas x ``K`` workers x ``d`` coordinates advance together, one
numpy operation per step for all of them (the Python loop runs over steps only).

Semantics (the contract shared with ``empirical.algorithms``; notation of the
README): steps ``t = 0, ..., T-1``, pull steps count.

* Warm-up ``t < T0`` and every step of ``kind="sgd"``: minibatch SGD,
  ``x <- x - alpha * mean_k g_k(x)`` (one all-reduce per step); the anchor follows the
  model, so at ``t = T0`` the local phase starts with ``z = x``.
* Local phase ``t >= T0``, each worker ``k`` of replica ``r``: coin
  ``b = theory.coins.pull_coins(spec.seed, p, step=t, worker=k, replica=r,
  shared=spec.coins == "shared")``. ``b`` true: pull
  ``x_k <- x_k - (alpha*eta/p)(x_k - z)`` on the first ``ceil(pull_fraction*d)``
  coordinates, no gradient; else ``x_k <- x_k - (alpha/(1-p)) g_k(x_k)``. At ``p = 0`` there
  are no pulls and the learning rate is ``alpha`` (Local SGD).
* Sync after local step ``t`` when ``(t - T0 + 1 + sync_offset) % H == 0``: outer gradient
  ``Delta = z - mean_k x_k``; the outer update of :func:`theory.algorithm.outer_step` (``"average"``:
  ``z <- mean_k x_k``; ``"sgd"``: ``torch.optim.SGD(momentum=mu)``; ``"nesterov"``:
  ``nesterov=True``, dampening 0). With
  ``outer_steps_per_sync = A`` the outer step is applied ``A - 1`` more times on a zero
  outer gradient (the authors' ``is_intended_impl=False``) and the sync costs ``A``
  all-reduces. Then every worker restarts from ``z``.
* ``kind="easgd"`` (elastic averaging SGD as Wang and Joshi, Cooperative SGD, JMLR 22(213),
  2021, eqs. (4), (5), (11), write it: ``X_{t+1} = (X_t - alpha G_t) S_t`` with ``S_t`` the
  mixing matrix ``W_a`` at the sync steps and the identity otherwise; ``X`` stacks the
  ``K`` workers and the centre ``z``, whose gradient row is zero). Every local step is a
  plain SGD step ``x_k <- x_k - alpha g_k(x_k)`` (no pulls, ``p = 0``). At a sync step
  (same rule as above) the elastic mixing with coefficient ``a``
  (:meth:`AlgorithmSpec.elastic_coef`, default ``2/(K+2)``, Lemma 1) acts on the
  post-gradient iterates, all at once: ``x_k <- (1 - a) x_k + a z`` and
  ``z <- (1 - K a) z + a sum_k x_k`` (both with the pre-mixing ``x_k`` and ``z``); the
  workers are *not* restarted from ``z``, and the mixing costs one all-reduce (the sum of
  the ``x_k``). ``W_a`` is doubly stochastic, so the mixing keeps
  ``u = (sum_k x_k + z)/(K+1)`` unchanged and ``u <- u - (K alpha/(K+1)) mean_k g_k(x_k)``
  at every local step (the paper's ``eta_eff = K alpha/(K+1)``). The paper mixes at the
  iterations ``k`` (counted from 1) with ``k mod tau = 0``, i.e. after ``tau`` gradient
  steps: the rule above with ``sync_offset = 0``. Warm-up (``T0``) and ``sync_offset``
  work as for the other kinds.
* Noise: one draw of ``problem.draw_randomness(rng, (R,))`` per step, for every worker,
  even on pull steps, from ``numpy.random.default_rng(seed)``: two algorithms run with the
  same ``seed`` see the same noise (common random numbers, paired comparisons).

Recorded quantities are taken *before* step ``t`` is applied, at ``xbar_t = mean_k x_{k,t}``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from theory.algorithm import COINS, KINDS, OUTERS, AlgorithmSpec
from theory.coins import pull_coins
from theory.problems import Problem
from theory.validation import (
    UserInputError,
    check_int,
    check_memory,
    validate,
)

__all__ = [
    "KINDS",
    "OUTERS",
    "COINS",
    "BACKENDS",
    "BLOCK_ELEMS",
    "AlgorithmSpec",
    "Trace",
    "simulate",
]

BACKENDS = ("numpy", "torch")


@dataclass
class Trace:
    """Recorded trajectory statistics of :func:`simulate` (float64 arrays unless noted).

    Recorded before step ``t`` is applied, for ``t`` in ``steps`` (``n_rec`` entries), with
    ``xbar_t = mean_k x_{k,t}`` and the evaluation point ``v_t``: ``v_t = xbar_t`` for every
    kind except ``"easgd"``, where ``v_t = u_t = (sum_k x_{k,t} + z_t)/(K+1)``, the average
    *including* the centre variable, the point of Wang and Joshi's Theorem 3:

    * ``grad_norm_sq`` (R, n_rec): ``||grad f(v_t)||^2``;
    * ``loss_gap`` (R, n_rec): ``f(v_t) - f_star`` (the problem's declared ``f_star``);
    * ``consensus`` (R, n_rec): ``(1/K) sum_k ||x_k - xbar||^2``;
    * ``anchor_dist`` (R, n_rec): ``(1/K) sum_k ||x_k - z||^2`` (0 while the model is
      synchronised every step, i.e. SGD and warm-up; for EASGD ``z`` is the centre);
    * ``grad_evals`` (R, n_rec): gradient evaluations per worker so far (mean over workers;
      pull steps cost none);
    * ``comm_rounds`` (n_rec,): all-reduces so far (one per SGD / warm-up step,
      ``outer_steps_per_sync`` per sync, one per EASGD mixing).

    After the last step: ``final_x`` (R, K, d), ``anchor`` (R, d) (EASGD: the centre),
    ``final_grad_norm_sq`` and ``final_loss_gap`` (R,) at the final ``v``, ``pull_steps``
    (R, K) int counts.
    ``spec``, ``problem`` (its :meth:`~theory.problems.Problem.describe`) and ``seed``
    identify the run.
    """

    steps: np.ndarray
    grad_norm_sq: np.ndarray
    loss_gap: np.ndarray
    consensus: np.ndarray
    anchor_dist: np.ndarray
    grad_evals: np.ndarray
    comm_rounds: np.ndarray
    final_x: np.ndarray
    anchor: np.ndarray
    T: int = 0
    record_every: int = 1
    final_grad_norm_sq: np.ndarray = field(default_factory=lambda: np.zeros(0))
    final_loss_gap: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pull_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    spec: dict[str, Any] = field(default_factory=dict)
    problem: dict[str, Any] = field(default_factory=dict)
    seed: int = 0

    def mean_grad_norm_sq(self) -> np.ndarray:
        """``(1/T) sum_{t<T} ||grad f(v_t)||^2`` per replica, shape (R,) (``v_t``: see above)."""
        if self.record_every != 1:
            raise UserInputError(
                f"mean_grad_norm_sq needs every step recorded (record_every=1), "
                f"got record_every={self.record_every}"
            )
        return self.grad_norm_sq.mean(axis=1)

    def to_dict(self, include_state: bool = False) -> dict[str, Any]:
        """JSON-ready dict (lists); the final iterates only with ``include_state``."""
        out: dict[str, Any] = {}
        for k, v in self.__dict__.items():
            if k in ("final_x", "anchor") and not include_state:
                continue
            out[k] = v.tolist() if isinstance(v, np.ndarray) else v
        return out

    def save_json(self, path: str, include_state: bool = False) -> None:
        """Write :meth:`to_dict` to ``path``."""
        with open(path, "w") as fh:
            json.dump(self.to_dict(include_state), fh)


#: elements per block of the blocked local step: two float64 temporaries of this size
#: plus the block of X take about 1.5 MiB, within a core's L2 cache (best measured on a
#: 2 MiB-L2 machine by benchmarks/bench_simulate.py)
BLOCK_ELEMS = 65536
#: coins of up to 256 steps are drawn at once, at most this many (step, replica, worker)
COIN_CHUNK_ELEMS = 1 << 18


def _blocks(R: int, K: int, d: int) -> tuple[int, int]:
    """(replicas per block, coordinates per block) with about BLOCK_ELEMS elements per block."""
    bs = min(d, max(64, BLOCK_ELEMS // K))
    rb = min(R, max(1, BLOCK_ELEMS // (K * bs)))
    return rb, bs


def simulate(
    problem: Problem,
    spec: AlgorithmSpec,
    *,
    T: int,
    R: int,
    seed: int,
    x0: np.ndarray | None = None,
    record_every: int = 1,
    progress: bool = False,
    K: int | None = None,
    blocked: bool | None = None,
    backend: str = "numpy",
    device: str | None = None,
    dtype: str | None = None,
    noise_rng: str | None = None,
) -> Trace:
    """Run ``spec`` on ``problem`` for ``T`` steps in ``R`` replicas (all ``K = problem.K`` workers).

    ``seed`` seeds the noise generator (the coins come from ``spec.seed``); ``x0`` of shape
    (d,) or (R, d) (default ``problem.x0()``); ``K`` if given must equal ``problem.K``;
    quantities are recorded before steps ``0, record_every, 2 record_every, ...``.
    ``blocked`` (default: automatic for separable problems whose state ``R*K*d`` exceeds
    ``4 * BLOCK_ELEMS``) evaluates the local phase in cache-sized blocks of replicas x
    coordinates; results are bitwise identical.

    ``backend``: ``"numpy"`` (default; float64 on the CPU) or ``"torch"``
    (:mod:`theory.simulate_torch`: ``device`` ``"cpu"`` (default) or ``"cuda[:i]"``,
    ``dtype`` ``"float64"`` (default) or ``"float32"``, ``noise_rng`` ``"torch"`` (a
    ``torch.Generator`` seeded with ``seed``; default on CUDA and in float32) or ``"numpy"``
    (the numpy backend's noise stream, default for float64 on the CPU: in float64 the two
    backends then agree to rounding)). The coins are the same counter-based coins on every
    backend.
    """
    if not isinstance(problem, Problem):
        raise UserInputError(
            f"problem must be a theory.problems.Problem, got {type(problem).__name__}"
        )
    if not isinstance(spec, AlgorithmSpec):
        raise UserInputError(f"spec must be an AlgorithmSpec, got {type(spec).__name__}")
    validate(T=T, R=R)
    T, R = int(T), int(R)
    seed = check_int("seed", seed, 0, integral_floats=True)
    record_every = check_int("record_every", record_every, 1, integral_floats=True)
    Kp, d = problem.K, problem.d
    if K is not None and int(K) != Kp:
        raise UserInputError(f"K = {K} does not match the problem's K = {Kp} workers")
    K = Kp
    easgd = spec.kind == "easgd"
    a_el = spec.elastic_coef(K) if easgd else 0.0
    start = problem.x0() if x0 is None else np.asarray(x0, dtype=float)
    if start.shape not in ((d,), (R, d)):
        raise UserInputError(f"x0 must have shape ({d},) or ({R}, {d}), got {start.shape}")
    if not np.all(np.isfinite(start)):
        raise UserInputError("x0 contains NaN or infinite values")
    if backend not in BACKENDS:
        raise UserInputError(f"unknown backend {backend!r}: choose one of {list(BACKENDS)}")
    if backend == "torch":
        if blocked:
            raise UserInputError("blocked=True is a numpy-backend option")
        # imported here: torch costs seconds to import and the numpy backend needs none of it
        from theory import simulate_torch

        return simulate_torch.run(
            problem, spec, T=T, R=R, seed=seed, start=start, record_every=record_every,
            progress=progress, device=device, dtype=dtype or "float64", noise_rng=noise_rng,
        )  # fmt: skip
    for name, val, ok in (
        ("device", device, (None, "cpu")),
        ("dtype", dtype, (None, "float64")),
        ("noise_rng", noise_rng, (None, "numpy")),
    ):
        if val not in ok:
            raise UserInputError(
                f"{name}={val!r} needs backend='torch' (the numpy backend is float64 on the "
                "CPU with numpy's generator)"
            )
    if blocked is None:
        blocked = problem.separable and R * K * d > 4 * BLOCK_ELEMS
    elif blocked and not problem.separable:
        raise UserInputError(f"blocked=True needs a separable problem; {problem.name!r} is not")

    n_rec = T // record_every + 2
    check_memory(
        8.0 * (3.0 * R * K * d + 2.0 * R * d + 8.0 * n_rec * R),
        f"simulate: R = {R} replicas x K = {K} workers x d = {d} coordinates, T = {T} steps "
        f"recorded every {record_every}",
    )
    rng = np.random.default_rng(seed)
    X = np.empty((R, K, d))
    X[...] = start[:, None, :] if start.ndim == 2 else start
    Z = X[:, 0, :].copy()  # anchor; during warm-up / SGD it is the model itself
    buf = np.zeros((R, d))
    G = np.empty((R, K, d))  # all gradients (SGD / warm-up steps, unblocked local steps)
    noise_buf = np.empty((R, K, d)) if problem.noise_model in ("gaussian", "rademacher") else None
    m = min(d, math.ceil(spec.pull_fraction * d - 1e-12))
    pulls_on = spec.local and spec.p > 0
    blocks = _blocks(R, K, d) if blocked else None
    Gb = np.empty((blocks[0], K, blocks[1])) if blocked else G
    no_pulls = np.zeros(0, dtype=np.int64)
    r_idx = np.arange(R)[:, None]
    k_idx = np.arange(K)[None, :]
    alpha, lr_g, c = spec.alpha, spec.grad_lr, spec.pull_coef
    shared = spec.coins == "shared"
    chunk = max(1, min(256, COIN_CHUNK_ELEMS // (R * K)))
    chunk_start = chunk_end = 0

    n_rec = (T + record_every - 1) // record_every
    steps = np.arange(0, T, record_every)
    rec = {k: np.empty((R, n_rec)) for k in ("gn", "lg", "cons", "anc", "ge")}
    comm_rec = np.empty(n_rec)
    grad_evals = np.zeros(R)
    comm = 0
    pull_steps = np.zeros((R, K), dtype=np.int64)
    scratch = np.empty((R, K, d))

    def point() -> np.ndarray:
        """Where the bound's quantities are evaluated: ``xbar``, or EASGD's ``u``."""
        if easgd:
            u = X.sum(axis=1)
            u += Z
            u /= K + 1
            return u
        return X.mean(axis=1)

    def record(i: int) -> None:
        xbar = X.mean(axis=1)
        v = point() if easgd else xbar
        g = problem.grad(v)
        rec["gn"][:, i] = np.einsum("rd,rd->r", g, g)
        rec["lg"][:, i] = problem.f(v) - problem.f_star
        np.subtract(X, xbar[:, None, :], out=scratch)
        rec["cons"][:, i] = np.einsum("rkd,rkd->r", scratch, scratch) / K
        np.subtract(X, Z[:, None, :], out=scratch)
        rec["anc"][:, i] = np.einsum("rkd,rkd->r", scratch, scratch) / K
        rec["ge"][:, i] = grad_evals
        comm_rec[i] = comm

    iterator = range(T)
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(iterator, desc=f"simulate {spec.kind}", unit="step")

    for t in iterator:
        if t % record_every == 0:
            record(t // record_every)
        draw = problem.draw_randomness(rng, (R,), out=noise_buf)
        if not spec.local or t < spec.T0:
            # minibatch SGD on the (identical) workers; Z holds the model
            problem.stochastic_grads_from(X, draw, out=G)
            gbar = G.mean(axis=1)
            gbar *= alpha
            Z -= gbar
            X[...] = Z[:, None, :]
            grad_evals += 1.0
            comm += 1
            continue

        if pulls_on:
            if t >= chunk_end:
                # coins are pure functions of (seed, t, k, r): draw a chunk of steps at once
                chunk_start = t
                chunk_end = min(T, t + chunk)
                steps_c = np.arange(chunk_start, chunk_end)[:, None, None]
                bc = pull_coins(spec.seed, spec.p, steps_c, k_idx, r_idx, shared=shared)
                bc = np.broadcast_to(bc, (chunk_end - chunk_start, R, K))
                wg_c = np.where(bc, 0.0, lr_g)[..., None]
                npull_c = np.count_nonzero(bc, axis=(1, 2))
                ge_c = 1.0 - np.count_nonzero(bc, axis=2) / K
                pull_steps += np.count_nonzero(bc, axis=0)
            i = t - chunk_start
            wg, n_pull = wg_c[i], int(npull_c[i])
            do_grad, do_pull = n_pull < R * K, n_pull > 0 and c != 0.0
            pulled = np.flatnonzero(bc[i]) if do_pull else no_pulls
            grad_evals += ge_c[i]
        else:
            wg, do_grad, do_pull, pulled = lr_g, True, False, no_pulls
            grad_evals += 1.0
        _local_update(problem, X, Z, draw, Gb, wg, lr_g, c, pulled, do_grad, do_pull, m, blocks)

        if easgd:
            if spec.is_sync_step(t):
                # elastic mixing (X, z) <- (X, z) W_a, both sides from the pre-mixing values
                s = X.sum(axis=1)
                X *= 1.0 - a_el
                X += a_el * Z[:, None, :]
                Z *= 1.0 - K * a_el
                s *= a_el
                Z += s
                comm += 1
        elif spec.is_sync_step(t):
            Z_new, buf = spec.outer_step(Z, buf, Z - X.mean(axis=1))
            Z[...] = Z_new
            X[...] = Z[:, None, :]
            comm += spec.outer_steps_per_sync

    xbar = point()
    gT = problem.grad(xbar)
    return Trace(
        steps=steps,
        grad_norm_sq=rec["gn"],
        loss_gap=rec["lg"],
        consensus=rec["cons"],
        anchor_dist=rec["anc"],
        grad_evals=rec["ge"],
        comm_rounds=comm_rec,
        final_x=X,
        anchor=Z,
        T=T,
        record_every=record_every,
        final_grad_norm_sq=np.einsum("rd,rd->r", gT, gT),
        final_loss_gap=problem.f(xbar) - problem.f_star,
        pull_steps=pull_steps,
        spec=spec.to_dict(),
        problem=problem.describe(),
        seed=seed,
    )


def _local_update(
    problem: Problem,
    X: np.ndarray,
    Z: np.ndarray,
    draw: np.ndarray | None,
    G: np.ndarray,
    wg: np.ndarray | float,
    lr_g: float,
    c: float,
    pulled: np.ndarray,
    do_grad: bool,
    do_pull: bool,
    m: int,
    blocks: tuple[int, int] | None,
) -> None:
    """Apply one local step to ``X`` (R, K, d) in place.

    Gradient rows: ``x - lr_g * g`` (``wg`` is ``lr_g`` there and 0 on pulled rows);
    pulled rows (flat indices ``pulled`` into the (R*K) rows): ``x - c (x - z)`` on the
    first ``m`` coordinates, unchanged elsewhere. The pulls are computed on the gathered
    pulled rows only (before the gradient update of the same coordinates, which their
    scattered result then overwrites); on coordinates ``>= m`` the factor ``wg`` keeps
    pulled rows unchanged. With ``blocks = (rb, bs)`` (separable problems) the gradients
    are evaluated block by block of ``rb`` replicas x ``bs`` coordinates so that the
    temporaries stay in cache; otherwise ``G`` holds all stochastic gradients. Every
    element goes through the same operations either way: the results are bitwise equal.
    """
    R, K, d = X.shape
    if blocks is None:
        if do_grad:
            problem.stochastic_grads_from(X, draw, out=G)
        cuts = sorted({0, m, d})
    else:
        cuts = sorted(set(range(0, d, blocks[1])) | {m, d})
    X2 = X.reshape(R * K, d)
    rows_z = pulled // K
    # coordinates outer, replicas inner: a block of the problem data is read from memory
    # once per step and reused for every replica
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        if hi <= lo:
            continue
        pull_here = do_pull and hi <= m
        if pull_here:
            sub = X2[pulled, lo:hi]
            tmp = sub - Z[rows_z, lo:hi]
            tmp *= c
            sub -= tmp
        if do_grad:
            if blocks is None:
                g = G[..., lo:hi]
                g *= lr_g if pull_here else wg
                X[..., lo:hi] -= g
            else:
                rb = blocks[0]
                for r0 in range(0, R, rb):
                    r1 = min(R, r0 + rb)
                    g = G[: r1 - r0, :, : hi - lo]
                    Xb = X[r0:r1, :, lo:hi]
                    problem.local_grads_block(Xb, lo, hi, g)
                    if draw is not None:
                        g += draw[r0:r1, :, lo:hi]
                    g *= lr_g if pull_here or not isinstance(wg, np.ndarray) else wg[r0:r1]
                    Xb -= g
        if pull_here:
            X2[pulled, lo:hi] = sub
