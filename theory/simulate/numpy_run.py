"""The numpy backend of :func:`theory.simulate.simulate` (float64 on the CPU).

:class:`NumpyRun` holds the state of ``R`` replicas x ``K`` workers x ``d`` coordinates and
applies the steps of :class:`theory.simulate.loop.RunLoop` in place; :func:`local_update`
is the local step, optionally evaluated in cache-sized blocks of replicas x coordinates
(separable problems; bitwise equal to the unblocked step).
"""

from __future__ import annotations

import numpy as np

from core.errors import UserInputError
from core.files import check_memory
from theory.algorithm import AlgorithmSpec, outer_step
from theory.problems import Problem
from theory.simulate.loop import RunLoop
from theory.simulate.trace import Trace

#: elements per block of the blocked local step: two float64 temporaries of this size
#: plus the block of X take about 1.5 MiB, within a core's L2 cache (best measured on a
#: 2 MiB-L2 machine by benchmarks/bench_simulate.py)
BLOCK_ELEMS = 65536


def blocks_for(R: int, K: int, d: int) -> tuple[int, int]:
    """(replicas per block, coordinates per block) with about BLOCK_ELEMS elements per block."""
    bs = min(d, max(64, BLOCK_ELEMS // K))
    rb = min(R, max(1, BLOCK_ELEMS // (K * bs)))
    return rb, bs


def use_blocks(problem: Problem, R: int, blocked: bool | None) -> bool:
    """Whether the local step runs in blocks: as asked (separable problems only), or by
    default when the state ``R*K*d`` of a separable problem exceeds ``4 * BLOCK_ELEMS``."""
    if blocked is None:
        return problem.separable and R * problem.K * problem.d > 4 * BLOCK_ELEMS
    if blocked and not problem.separable:
        raise UserInputError(f"blocked=True needs a separable problem; {problem.name!r} is not")
    return bool(blocked)


class NumpyRun(RunLoop):
    """The state ``X`` (R, K, d), anchor ``Z`` (R, d), outer buffer and scratch arrays."""

    def __init__(
        self,
        problem: Problem,
        spec: AlgorithmSpec,
        *,
        T: int,
        R: int,
        seed: int,
        record_every: int,
        start: np.ndarray,
        blocked: bool,
        per_replica: dict[str, np.ndarray] | None = None,
    ) -> None:
        K, d = problem.K, problem.d
        check_memory(
            8.0 * (3.0 * R * K * d + 2.0 * R * d + 8.0 * (T // record_every + 2) * R),
            f"simulate: R = {R} replicas x K = {K} workers x d = {d} coordinates, T = {T} "
            f"steps recorded every {record_every}",
        )
        super().__init__(
            problem, spec, T=T, R=R, seed=seed, record_every=record_every, per_replica=per_replica
        )
        if per_replica:  # shapes that broadcast against (R, d) and (R, K, d)
            self.alpha = self.alpha[:, None]
            self.lr_g = self.lr_g[:, None, None]
        self.rng = np.random.default_rng(seed)
        self.X = np.empty((R, K, d))
        self.X[...] = start[:, None, :] if start.ndim == 2 else start
        self.Z = self.X[:, 0, :].copy()  # anchor; during warm-up / SGD it is the model itself
        self.buf = np.zeros((R, d))
        self.G = np.empty((R, K, d))  # all gradients (SGD / warm-up, unblocked local steps)
        additive = problem.noise_model in ("gaussian", "rademacher")
        self.noise_buf = np.empty((R, K, d)) if additive else None
        self.blocks = blocks_for(R, K, d) if blocked else None
        self.Gb = np.empty((self.blocks[0], K, self.blocks[1])) if blocked else self.G
        self.no_pulls = np.zeros(0, dtype=np.int64)
        self.scratch = np.empty((R, K, d))
        self.rec = {k: np.empty((R, self.n_rec)) for k in ("gn", "lg", "cons", "anc")}

    def point(self) -> np.ndarray:
        """Where the bound's quantities are evaluated: ``xbar``, or EASGD's ``u``."""
        if self.easgd:
            u = self.X.sum(axis=1)
            u += self.Z
            u /= self.K + 1
            return u
        return self.X.mean(axis=1)

    def record(self, i: int) -> None:
        X, K, rec, scratch, problem = self.X, self.K, self.rec, self.scratch, self.problem
        xbar = X.mean(axis=1)
        v = self.point() if self.easgd else xbar
        g = problem.grad(v)
        rec["gn"][:, i] = np.einsum("rd,rd->r", g, g)
        rec["lg"][:, i] = problem.f(v) - problem.f_star
        np.subtract(X, xbar[:, None, :], out=scratch)
        rec["cons"][:, i] = np.einsum("rkd,rkd->r", scratch, scratch) / K
        np.subtract(X, self.Z[:, None, :], out=scratch)
        rec["anc"][:, i] = np.einsum("rkd,rkd->r", scratch, scratch) / K

    def draw(self) -> np.ndarray | None:
        return self.problem.draw_randomness(self.rng, (self.R,), out=self.noise_buf)

    def warm_step(self, draw: np.ndarray | None) -> None:
        """Minibatch SGD on the (identical) workers; ``Z`` holds the model."""
        self.problem.stochastic_grads_from(self.X, draw, out=self.G)
        gbar = self.G.mean(axis=1)
        gbar *= self.alpha
        self.Z -= gbar
        self.X[...] = self.Z[:, None, :]

    def local_step(
        self, draw: np.ndarray | None, i: int | None, do_grad: bool, do_pull: bool
    ) -> None:
        wg, pulled = self.lr_g, self.no_pulls
        if i is not None:
            if self.coins.fresh:
                lr = self.lr_g[..., 0] if isinstance(self.lr_g, np.ndarray) else self.lr_g
                self.wg_c = np.where(self.coins.coins, 0.0, lr)[..., None]
            wg = self.wg_c[i]
            if do_pull:
                pulled = np.flatnonzero(self.coins.coins[i])
        local_update(
            self.problem, self.X, self.Z, draw, self.Gb, wg, self.lr_g, self.c, pulled,
            do_grad, do_pull, self.m, self.blocks,
        )  # fmt: skip

    def mix(self) -> None:
        """Elastic mixing ``(X, z) <- (X, z) W_a``, both sides from the pre-mixing values."""
        X, Z, a = self.X, self.Z, self.a_el
        s = X.sum(axis=1)
        X *= 1.0 - a
        X += a * Z[:, None, :]
        Z *= 1.0 - self.K * a
        s *= a
        Z += s

    def sync(self) -> None:
        delta = self.Z - self.X.mean(axis=1)
        if self.gamma is None:
            Z_new, self.buf = self.spec.outer_step(self.Z, self.buf, delta)
        else:
            s = self.spec
            Z_new, self.buf = outer_step(
                self.Z, self.buf, delta, outer=s.outer, gamma=self.gamma[:, None], mu=s.mu,
                extra_steps=s.outer_steps_per_sync - 1,
            )  # fmt: skip
        self.Z[...] = Z_new
        self.X[...] = self.Z[:, None, :]

    def start_sync(self) -> None:
        self.delta = self.Z - self.X.mean(axis=1)
        self.X[...] = self.Z[:, None, :]

    def land(self) -> None:
        self.X -= self.Z[:, None, :]
        Z_new, self.buf = self.spec.outer_step(self.Z, self.buf, self.delta)
        self.Z[...] = Z_new
        self.X += self.Z[:, None, :]

    def trace(self) -> Trace:
        v = self.point()
        gT = self.problem.grad(v)
        return self.make_trace(
            self.rec,
            final_x=self.X,
            anchor=self.Z,
            final_grad_norm_sq=np.einsum("rd,rd->r", gT, gT),
            final_loss_gap=self.problem.f(v) - self.problem.f_star,
        )


def local_update(
    problem: Problem,
    X: np.ndarray,
    Z: np.ndarray,
    draw: np.ndarray | None,
    G: np.ndarray,
    wg: np.ndarray | float,
    lr_g: float | np.ndarray,
    c: float | np.ndarray,
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
            tmp *= c[rows_z][:, None] if isinstance(c, np.ndarray) else c
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
