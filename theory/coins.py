"""Counter-based random streams shared by the simulator and the distributed trainer.

A PALSGD coin (pull step or gradient step) is a pure function of
``(seed, replica, step, worker)``: no generator state, so

* the vectorised simulator draws the coins of ``R`` replicas x ``K`` workers in one call,
* a distributed rank draws its own coin for step ``t`` and gets the same value,
* checkpoint/resume needs only the step counter,
* independent coins (each worker its own) and shared coins (the authors' code: every
  worker draws the same coin) differ only in the ``worker`` index used (0 for shared).

The hash is the SplitMix64 finaliser (Steele, Lea and Flood, "Fast splittable
pseudorandom number generators", OOPSLA 2014) applied to a mix of the counters; the
top 53 bits give a uniform double in ``[0, 1)``.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "uniforms",
    "pull_coins",
    "normals",
    "CoinChunks",
    "STREAM_COINS",
    "STREAM_NOISE",
    "expected_max_binomial",
    "round_excess",
]

STREAM_COINS = 0
STREAM_NOISE = 1
#: the simulators draw the coins of up to 256 steps at once, at most this many
#: (step, replica, worker) coins
COIN_CHUNK_ELEMS = 1 << 18

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_MULTS = (
    np.uint64(0xD1B54A32D192ED03),
    np.uint64(0xABC98388FB8FAC03),
    np.uint64(0x8CB92BA72F3D8DD7),
    np.uint64(0xDB4F0B9175AE2165),
    np.uint64(0xC2B2AE3D27D4EB4F),
)


def _mix(x: np.ndarray) -> np.ndarray:
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def uniforms(seed: int, step, worker, replica=0, stream: int = STREAM_COINS) -> np.ndarray:
    """Uniform doubles in ``[0, 1)``, one per broadcast element of the counters.

    ``step``, ``worker`` and ``replica`` are nonnegative integers or integer arrays that
    broadcast together; ``seed`` and ``stream`` are nonnegative integers.
    """
    if int(seed) < 0 or int(stream) < 0:
        raise ValueError("seed and stream must be nonnegative integers")
    with np.errstate(over="ignore"):
        parts = [
            np.asarray(seed, dtype=np.uint64),
            np.asarray(stream, dtype=np.uint64),
            np.asarray(replica, dtype=np.uint64),
            np.asarray(step, dtype=np.uint64),
            np.asarray(worker, dtype=np.uint64),
        ]
        x = np.zeros(np.broadcast_shapes(*(a.shape for a in parts)), dtype=np.uint64)
        for a, m in zip(parts, _MULTS, strict=True):
            x = _mix(x + _GOLD + a * m)
        return (x >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def pull_coins(seed: int, p: float, step, worker, replica=0, shared: bool = False) -> np.ndarray:
    """Boolean pull indicators ``b = 1[u < p]`` (True: pull step, False: gradient step).

    With ``shared=True`` every worker uses worker index 0, i.e. all workers pull on the
    same steps (the authors' code); otherwise the coins are independent across workers.
    """
    w = np.zeros_like(np.asarray(worker)) if shared else worker
    return uniforms(seed, step, w, replica, STREAM_COINS) < p


def normals(seed: int, step, worker, replica=0, index=0, stream: int = STREAM_NOISE) -> np.ndarray:
    """Standard normal draws (Box-Muller) as a pure function of the counters.

    ``index`` enumerates the coordinates of one draw (e.g. ``np.arange(d)``).
    """
    idx = np.asarray(index, dtype=np.uint64)
    with np.errstate(over="ignore"):
        key = np.asarray(step, dtype=np.uint64) * np.uint64(0x100000001B3) + idx * np.uint64(2)
    u1 = uniforms(seed, key, worker, replica, stream)
    with np.errstate(over="ignore"):
        u2 = uniforms(seed, key + np.uint64(1), worker, replica, stream)
    return np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)


class CoinChunks:
    """The pull coins of an ``R`` replicas x ``K`` workers run, drawn a chunk of steps at once.

    The coins are pure functions of ``(seed, t, k, r)`` (:func:`pull_coins`), so drawing
    them in chunks gives the same values as drawing them step by step. :meth:`at` returns
    step ``t``'s index into the current chunk (drawing the next chunk when ``t`` leaves
    it; ``fresh`` says whether it did): ``coins[i]`` (R, K) the pull indicators,
    ``n_pull[i]`` their count, ``grad_evals[i]`` (R,) the gradient evaluations per worker of
    the step. ``pull_steps`` (R, K) counts the pulls of every chunk drawn so far.
    """

    def __init__(self, seed: int, p: float, R: int, K: int, T: int, *, shared: bool) -> None:
        self.seed, self.p, self.R, self.K, self.T, self.shared = seed, p, R, K, T, shared
        self.size = max(1, min(256, COIN_CHUNK_ELEMS // (R * K)))
        self.start = self.end = 0
        self.fresh = False
        self.pull_steps = np.zeros((R, K), dtype=np.int64)
        self._r, self._k = np.arange(R)[:, None], np.arange(K)[None, :]

    def at(self, t: int) -> int:
        """The index of step ``t`` in the current chunk (the chunks must be visited in order)."""
        self.fresh = t >= self.end
        if self.fresh:
            self.start, self.end = t, min(self.T, t + self.size)
            steps = np.arange(self.start, self.end)[:, None, None]
            bc = pull_coins(self.seed, self.p, steps, self._k, self._r, shared=self.shared)
            self.coins = np.broadcast_to(bc, (self.end - self.start, self.R, self.K))
            self.n_pull = np.count_nonzero(self.coins, axis=(1, 2))
            self.grad_evals = 1.0 - np.count_nonzero(self.coins, axis=2) / self.K
            self.pull_steps += np.count_nonzero(self.coins, axis=0)
        return t - self.start


def expected_max_binomial(n: int, q: float, K: int) -> float:
    """``E[max_k G_k]`` for ``K`` independent ``G_k ~ Binomial(n, q)``:
    ``sum_{j=0}^{n-1} (1 - F(j)^K)`` with ``F`` the binomial CDF."""
    from scipy.stats import binom

    if n <= 0:
        return 0.0
    j = np.arange(n)
    return float(np.sum(1.0 - binom.cdf(j, n, q) ** K))


def round_excess(H: int, p: float, K: int, coins: str) -> float:
    """Expected extra gradient steps per round on the critical path (the most gradient steps
    of any worker minus one worker's mean): a sync waits for the slowest worker, and with
    independent coins the workers' gradient-step counts in a round of ``H`` steps are
    independent ``Binomial(H, 1 - p)``. 0 with shared coins, ``p = 0`` or one worker."""
    if coins == "shared" or p <= 0 or K <= 1:
        return 0.0
    return expected_max_binomial(H, 1.0 - p, K) - H * (1.0 - p)
