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
  shared=spec.shared_coins)``. ``b`` true: pull
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
* Overlapped sync (``sync_delay = tau >= 1``; :mod:`theory.algorithm`): at a sync step
  ``Delta = z - mean_k x_k`` is kept in flight and every worker restarts from the current
  ``z``; right after local step ``t + tau`` the outer update lands,
  ``(z', buf') = outer_step(z, buf, Delta)`` and ``x_k <- x_k + (z' - z)``. The sync is
  counted (``comm_rounds``) when it starts; a run of ``T`` steps ends with the update in
  flight landed (``final_x``, ``anchor``).
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

Files: ``trace.py`` the record of a run (:class:`Trace`); ``loop.py`` the step schedule
and counters shared by both backends; ``numpy_run.py`` the numpy backend and its blocked
local step; ``torch_run.py`` the torch backend (CPU or CUDA, imported only when asked for).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.validation import check_int
from theory.algorithm import COINS, KINDS, OUTERS, AlgorithmSpec
from theory.problems import Problem
from theory.simulate.numpy_run import BLOCK_ELEMS, NumpyRun, use_blocks
from theory.simulate.trace import Trace
from theory.validation import validate

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
    per_replica: Mapping[str, Any] | None = None,
) -> Trace:
    """Run ``spec`` on ``problem`` for ``T`` steps in ``R`` replicas (all ``K = problem.K`` workers).

    ``seed`` seeds the noise generator (the coins come from ``spec.seed``); ``x0`` of shape
    (d,) or (R, d) (default ``problem.x0()``); ``K`` if given must equal ``problem.K``;
    quantities are recorded before steps ``0, record_every, 2 record_every, ...``.
    ``blocked`` (default: automatic for separable problems whose state ``R*K*d`` exceeds
    ``4 * BLOCK_ELEMS``) evaluates the local phase in cache-sized blocks of replicas x
    coordinates; results are bitwise identical.

    ``backend``: ``"numpy"`` (default; float64 on the CPU) or ``"torch"``
    (:mod:`theory.simulate.torch_run`: ``device`` ``"cpu"`` (default) or ``"cuda[:i]"``,
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
    if not spec.definition.simulated:
        raise UserInputError(
            f"the simulator does not run {spec.kind!r} ({spec.definition.label}); it runs "
            f"{list(KINDS)}"
        )
    if spec.alpha is None:
        raise UserInputError("spec.alpha is None: the simulator needs the learning rate alpha")
    validate(T=T, R=R)
    T, R = int(T), int(R)
    seed = check_int("seed", seed, 0, integral_floats=True)
    record_every = check_int("record_every", record_every, 1, integral_floats=True)
    start = _start(problem, spec, R, K, x0)
    if backend not in BACKENDS:
        raise UserInputError(f"unknown backend {backend!r}: choose one of {list(BACKENDS)}")
    if backend == "torch":
        if blocked:
            raise UserInputError("blocked=True is a numpy-backend option")
        return _torch_backend().run(
            problem, spec, T=T, R=R, seed=seed, start=start, record_every=record_every,
            progress=progress, device=device, dtype=dtype or "float64", noise_rng=noise_rng,
        )  # fmt: skip
    _check_numpy_options(device=device, dtype=dtype, noise_rng=noise_rng)
    per = _per_replica(per_replica, spec, R)
    if per and blocked:
        raise UserInputError("per_replica hyperparameters run unblocked (blocked=False)")
    runner = NumpyRun(
        problem, spec, T=T, R=R, seed=seed, record_every=record_every, start=start,
        blocked=False if per else use_blocks(problem, R, blocked), per_replica=per,
    )  # fmt: skip
    return runner.run(progress, f"simulate {spec.kind}")


def _per_replica(values: Mapping[str, Any] | None, spec: AlgorithmSpec, R: int) -> dict:
    """The checked per-replica hyperparameters (see :func:`simulate`)."""
    if not values:
        return {}
    unknown = sorted(set(values) - {"alpha", "eta", "gamma"})
    if unknown:
        raise UserInputError(f"per_replica takes alpha, eta and gamma; got {unknown}")
    out = {}
    for name, v in values.items():
        arr = np.asarray(v, dtype=float)
        if arr.shape != (R,):
            raise UserInputError(f"per_replica {name!r} must have shape ({R},), got {arr.shape}")
        for x in np.unique(arr):
            validate({name: float(x)})
        out[name] = arr
    if "gamma" in out and spec.outer == "average":
        raise UserInputError("per_replica 'gamma' needs an outer optimiser ('sgd' or 'nesterov')")
    if spec.definition.elastic:
        raise UserInputError("per_replica hyperparameters are not available for EASGD")
    return out


def _start(problem: Problem, spec: AlgorithmSpec, R: int, K: int | None, x0: Any) -> np.ndarray:
    """The checked starting point, (d,) or (R, d); ``K`` if given must be the problem's."""
    d = problem.d
    if K is not None and int(K) != problem.K:
        raise UserInputError(f"K = {K} does not match the problem's K = {problem.K} workers")
    if spec.definition.elastic:
        spec.elastic_coef(problem.K)  # the elastic coefficient must suit this K
    start = problem.x0() if x0 is None else np.asarray(x0, dtype=float)
    if start.shape not in ((d,), (R, d)):
        raise UserInputError(f"x0 must have shape ({d},) or ({R}, {d}), got {start.shape}")
    if not np.all(np.isfinite(start)):
        raise UserInputError("x0 contains NaN or infinite values")
    return start


def _check_numpy_options(**options: Any) -> None:
    """The torch-only options must be left at the numpy backend's values."""
    allowed = {"device": (None, "cpu"), "dtype": (None, "float64"), "noise_rng": (None, "numpy")}
    for name, val in options.items():
        if val not in allowed[name]:
            raise UserInputError(
                f"{name}={val!r} needs backend='torch' (the numpy backend is float64 on the "
                "CPU with numpy's generator)"
            )


def _torch_backend() -> ModuleType:
    """The torch backend, imported on first use: torch costs seconds to import."""
    from theory.simulate import torch_run

    return torch_run
