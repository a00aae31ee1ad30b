"""Torch backend of :func:`theory.simulate.simulate` (CPU or CUDA, float32 or float64).

The step semantics are those of :mod:`theory.simulate` (see its module docstring): the
schedule is the numpy backend's (:class:`theory.simulate.loop.RunLoop`), the arithmetic of
each step is written on torch tensors so that the same run executes on a GPU, or on CPU in
float32:

* the coins are the same counter-based coins (:func:`theory.coins.pull_coins`, drawn on the
  host in chunks of steps and copied to the device once per chunk), so a run makes the same
  pull / gradient decisions on every backend and device;
* the additive noise (``"gaussian"``, ``"rademacher"``) comes from the generator chosen by
  ``noise_rng``: ``"torch"`` (a ``torch.Generator`` on the device seeded with ``seed``; the
  default on CUDA and in float32, the fast path there) or ``"numpy"``
  (``numpy.random.default_rng(seed)`` drawn exactly as the numpy backend draws it and
  copied to the device: in float64 the trajectory then equals the numpy backend's up to
  floating-point rounding; the default for float64 on the CPU, where numpy draws normals
  about twice as fast as torch). Rademacher noise is drawn
  from random bytes (one bit per coordinate), about twice as fast as Gaussian noise with
  the same per-coordinate variance ``sigma^2/d``; a problem declares which one it uses.
  Finite-sum sampling and user noise callables run through the problem's numpy methods
  (``noise_rng="numpy"`` only);
* gradients of the built-in quadratics (diagonal or rotated) and of the cosine problem are
  computed in torch; any other :class:`~theory.problems.Problem` is evaluated through its
  numpy methods (correct on every device, fast on none);
* a local step reads nothing back from the device and copies nothing to it: the coins of a
  chunk of steps, their pulled rows' indices and the gradient rows' rates move to the device
  once per chunk. Every row takes the gradient step (rate ``alpha/(1-p)``) and the pulled
  rows are then overwritten with their pull from the step's start (whole rows). For the diagonal
  quadratic with additive noise the step is fused, ``x <- x (1 - lr lam) + lr lam b_k -
  lr xi``: two passes over the state after the noise draw instead of three (the same
  update, rounded differently).

Recorded statistics are computed in the run's dtype on the device and returned as float64
numpy arrays in the same :class:`~theory.simulate.Trace` as the numpy backend.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from core.errors import UserInputError
from core.transfer import to_device_async
from theory.algorithm import AlgorithmSpec
from theory.problems import CosineProblem, Problem, QuadraticProblem
from theory.simulate.loop import RunLoop
from theory.simulate.trace import Trace

__all__ = ["DTYPES", "NOISE_RNGS", "resolve_device", "run"]

DTYPES = {"float32": torch.float32, "float64": torch.float64}
NOISE_RNGS = ("torch", "numpy")


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a ``torch.device`` (default ``"cpu"``); a clean error if it is unusable."""
    try:
        dev = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError) as exc:
        raise UserInputError(f"unknown device {device!r}: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserInputError(f"device {device!r} asked for, but CUDA is not available here")
    if dev.type not in ("cpu", "cuda"):
        raise UserInputError(f"device {device!r}: the torch backend runs on 'cpu' or 'cuda'")
    return dev


class _NumpyOps:
    """Any problem, through its numpy methods (host round trip on every call)."""

    def __init__(self, problem: Problem, device: torch.device, dtype: torch.dtype):
        self.p, self.device, self.dtype = problem, device, dtype

    def _t(self, a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(a), dtype=self.dtype, device=self.device)

    @staticmethod
    def _np(x: torch.Tensor) -> np.ndarray:
        return x.detach().to("cpu", torch.float64).numpy()

    def grads(self, X: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return out.copy_(self._t(self.p.local_grads(self._np(X))))

    def noisy_grads(self, X: torch.Tensor, noise: torch.Tensor | None, out: torch.Tensor):
        self.grads(X, out)
        return out if noise is None else out.add_(noise)

    def grads_from_draw(self, X: torch.Tensor, draw: np.ndarray | None, out: torch.Tensor):
        return out.copy_(self._t(self.p.stochastic_grads_from(self._np(X), draw)))

    def fused_step(self, lr: float) -> Any:
        """A fused gradient step ``step(X, noise)`` (``None``: the problem has none)."""
        return None

    def grad(self, v: torch.Tensor) -> torch.Tensor:
        return self._t(self.p.grad(self._np(v)))

    def f(self, v: torch.Tensor) -> torch.Tensor:
        return self._t(self.p.f(self._np(v)))


class _QuadraticOps(_NumpyOps):
    """``f_k = 1/2 (x - b_k)^T A (x - b_k)`` in torch (``A`` diagonal or dense)."""

    def __init__(self, problem: QuadraticProblem, device: torch.device, dtype: torch.dtype):
        super().__init__(problem, device, dtype)
        self.b, self.bbar = self._t(problem.b), self._t(problem.bbar)
        self.lam = self._t(problem.eigenvalues)
        self.A = None if problem.A is None else self._t(problem.A)
        self.f_min = float(problem._f_min)

    def _apply_A(self, D: torch.Tensor) -> torch.Tensor:
        return D.mul_(self.lam) if self.A is None else D @ self.A

    def grads(self, X, out):
        torch.sub(X, self.b, out=out)
        return out.mul_(self.lam) if self.A is None else out.copy_(out @ self.A)

    def fused_step(self, lr: float) -> Any:
        """``step(X, noise)``: ``X <- X - lr ((X - b) lam + noise)`` in place, in two passes
        (diagonal ``A``; ``None`` otherwise)."""
        if self.A is not None:
            return None
        scale, shift = 1.0 - lr * self.lam, lr * self.lam * self.b  # (d,), (K, d)

        def step(X: torch.Tensor, noise: torch.Tensor | None) -> None:
            torch.addcmul(shift, X, scale, out=X)
            if noise is not None:
                X.add_(noise, alpha=-lr)

        return step

    def noisy_grads(self, X, noise, out):
        if self.A is not None or noise is None:
            return super().noisy_grads(X, noise, out)
        torch.sub(X, self.b, out=out)
        return torch.addcmul(noise, out, self.lam, out=out)  # (x - b) lam + noise

    def grad(self, v):
        return self._apply_A(v - self.bbar)

    def f(self, v):
        D = v - self.bbar
        return 0.5 * (D * self._apply_A(D.clone())).sum(-1) + self.f_min


class _CosineOps(_NumpyOps):
    """``f_k = sum_i [x_i^2/2 + c cos(w x_i)] + <s_k, x>`` in torch."""

    def __init__(self, problem: CosineProblem, device: torch.device, dtype: torch.dtype):
        super().__init__(problem, device, dtype)
        self.c, self.w, self.s = problem.c, problem.w, self._t(problem.shifts)

    def grads(self, X, out):
        torch.mul(X, self.w, out=out).sin_().mul_(-self.c * self.w)
        return out.add_(X).add_(self.s)

    def grad(self, v):
        return v - self.c * self.w * torch.sin(self.w * v)

    def f(self, v):
        return (0.5 * v * v + self.c * torch.cos(self.w * v)).sum(-1)


def _ops(problem: Problem, device: torch.device, dtype: torch.dtype) -> _NumpyOps:
    if type(problem) is QuadraticProblem:
        return _QuadraticOps(problem, device, dtype)
    if type(problem) is CosineProblem:
        return _CosineOps(problem, device, dtype)
    return _NumpyOps(problem, device, dtype)


class _Noise:
    """One additive-noise draw (R, K, d) per step from the chosen generator."""

    def __init__(self, problem, R, seed, noise_rng, device, dtype):
        self.problem, self.R, self.device, self.dtype = problem, R, device, dtype
        model = problem.noise_model
        torch_ok = (
            model in ("gaussian", "rademacher") and getattr(problem, "_noise_fn", None) is None
        )
        if noise_rng is None:  # numpy's generator is the faster one for float64 on the CPU
            fast_np = device.type == "cpu" and dtype == torch.float64
            noise_rng = "torch" if (torch_ok or model == "none") and not fast_np else "numpy"
        if noise_rng not in NOISE_RNGS:
            raise UserInputError(f"unknown noise_rng {noise_rng!r}: choose one of {NOISE_RNGS}")
        if noise_rng == "torch" and not (torch_ok or model == "none"):
            raise UserInputError(
                f"the noise of {problem.name!r} ({model}, or a user callable) is drawn by the "
                "problem's numpy sampler: use noise_rng='numpy'"
            )
        self.host = noise_rng == "numpy"
        self.additive = model in ("gaussian", "rademacher")
        self.model = model
        shape = (R, problem.K, problem.d)
        self.buf = torch.empty(shape, device=device, dtype=dtype) if self.additive else None
        if self.host:
            self.rng = np.random.default_rng(seed)
            self.np_buf = np.empty(shape) if self.additive else None
        else:
            self.gen = torch.Generator(device=device).manual_seed(int(seed))
            self.scale = math.sqrt(problem._additive_variance() / problem.d)
            n = math.prod(shape)
            if model == "rademacher":  # random bytes, one per coordinate
                self.words = torch.empty((n + 7) // 8, device=device, dtype=torch.int64)

    def draw(self) -> tuple[torch.Tensor | None, Any]:
        """``(additive noise tensor or None, host draw for the numpy oracle or None)``."""
        if self.host:
            d = self.problem.draw_randomness(self.rng, (self.R,), out=self.np_buf)
            if d is None or not self.additive:
                return None, d
            return self.buf.copy_(torch.from_numpy(d)), None
        if self.model == "gaussian":
            return self.buf.normal_(0.0, self.scale, generator=self.gen), None
        if self.model == "rademacher":
            self.words.random_(generator=self.gen)
            bits = self.words.view(torch.uint8)[: self.buf.numel()].view(self.buf.shape)
            torch.bitwise_and(bits, 1, out=bits)
            # copy then scale: measured 2.5x faster than torch.where or a promoting mul
            self.buf.copy_(bits).mul_(2.0 * self.scale).sub_(self.scale)
            return self.buf, None
        return None, None


class TorchRun(RunLoop):
    """The state ``X`` (R, K, d), anchor ``Z`` (R, d) and outer buffer as tensors."""

    def __init__(self, problem, spec, *, T, R, seed, record_every, start, dev, dt, noise_rng):
        super().__init__(problem, spec, T=T, R=R, seed=seed, record_every=record_every)
        K, d = problem.K, problem.d
        self.dev, self.dt = dev, dt
        self.ops = _ops(problem, dev, dt)
        self.noise = _Noise(problem, R, seed, noise_rng, dev, dt)
        self.X = torch.empty((R, K, d), device=dev, dtype=dt)
        self.X.copy_(torch.as_tensor(start, dtype=dt, device=dev)[..., None, :].expand(R, K, d))
        self.X2 = self.X.view(R * K, d)
        self.Z = self.X[:, 0, :].clone()
        self.buf = torch.zeros((R, d), device=dev, dtype=dt)
        self.G = torch.empty_like(self.X)
        self.rec = torch.empty((4, R, self.n_rec), device=dev, dtype=torch.float64)
        self.fused = self.ops.fused_step(float(self.lr_g))  # where _grads is noisy_grads
        self._pulls: tuple[torch.Tensor, np.ndarray] | None = None  # the chunk's pulled rows

    def point(self) -> torch.Tensor:
        X = self.X
        return (X.sum(1) + self.Z) / (self.K + 1) if self.easgd else X.mean(1)

    def record(self, i: int) -> None:
        X, G, rec, K = self.X, self.G, self.rec, self.K
        xbar = X.mean(1)
        v = self.point() if self.easgd else xbar
        g = self.ops.grad(v)
        rec[0, :, i] = (g * g).sum(-1)
        rec[1, :, i] = self.ops.f(v) - self.problem.f_star
        torch.sub(X, xbar[:, None, :], out=G)
        rec[2, :, i] = (G * G).sum((1, 2)) / K
        torch.sub(X, self.Z[:, None, :], out=G)
        rec[3, :, i] = (G * G).sum((1, 2)) / K

    def draw(self) -> tuple[torch.Tensor | None, Any]:
        return self.noise.draw()

    def _grads(self, draw: tuple[torch.Tensor | None, Any]) -> None:
        eps, host_draw = draw
        if host_draw is not None:
            self.ops.grads_from_draw(self.X, host_draw, self.G)
        else:
            self.ops.noisy_grads(self.X, eps, self.G)

    def warm_step(self, draw: tuple[torch.Tensor | None, Any]) -> None:
        self._grads(draw)
        self.Z.sub_(self.G.mean(1).mul_(self.alpha))
        self.X.copy_(self.Z[:, None, :].expand(self.R, self.K, self.d))

    def _pulled(self, i: int) -> torch.Tensor:
        """The rows (of ``X2``) pulled at step ``i`` of the chunk: the chunk's indices move to
        the device once (at the chunk's first pull; ``local_step`` forgets the last chunk's),
        a step slices them with host offsets (no copy, no read)."""
        if self._pulls is None:
            flat = self.coins.coins.reshape(len(self.coins.coins), -1)
            rows = np.nonzero(flat)[1]  # step-major: step i's rows are consecutive
            offsets = np.concatenate([[0], np.cumsum(np.count_nonzero(flat, axis=1))])
            self._pulls = (to_device_async(rows, self.dev), offsets)
        rows, offsets = self._pulls
        return rows[offsets[i] : offsets[i + 1]]

    def local_step(self, draw, i: int | None, do_grad: bool, do_pull: bool) -> None:
        X, X2, Z, m, K = self.X, self.X2, self.Z, self.m, self.K
        if i is not None and self.coins.fresh:  # a new chunk of coins
            self._pulls = None
        if do_pull:  # the pulled rows at the step's start, pulled on their first m coordinates
            pulled = self._pulled(i)
            sub = X2[pulled]
            head = sub[:, :m]
            head.sub_((head - Z[pulled // K, :m]).mul_(self.c))
        if do_grad:  # every row; a pulled row is overwritten below
            eps, host_draw = draw
            if self.fused is not None and host_draw is None:
                self.fused(X, eps)
            else:
                self._grads(draw)
                X.add_(self.G, alpha=-self.lr_g)
        if do_pull:  # whole rows: a pulled row takes no gradient step
            X2.index_copy_(0, pulled, sub)

    def mix(self) -> None:
        X, Z, a = self.X, self.Z, self.a_el
        s = X.sum(1).mul_(a)
        X.mul_(1.0 - a).add_((a * Z)[:, None, :])
        Z.mul_(1.0 - self.K * a).add_(s)

    def sync(self) -> None:
        Z_new, self.buf = self.spec.outer_step(self.Z, self.buf, self.Z - self.X.mean(1))
        self.Z.copy_(Z_new)
        self.X.copy_(self.Z[:, None, :].expand(self.R, self.K, self.d))

    def start_sync(self) -> None:
        self.delta = self.Z - self.X.mean(1)
        self.X.copy_(self.Z[:, None, :].expand(self.R, self.K, self.d))

    def land(self) -> None:
        self.X.sub_(self.Z[:, None, :])
        Z_new, self.buf = self.spec.outer_step(self.Z, self.buf, self.delta)
        self.Z.copy_(Z_new)
        self.X.add_(self.Z[:, None, :])

    def trace(self) -> Trace:
        v = self.point()
        gT = self.ops.grad(v)
        host = self.rec.cpu().numpy()
        rec = dict(zip(("gn", "lg", "cons", "anc"), host, strict=True))
        return self.make_trace(
            rec,
            final_x=_np64(self.X),
            anchor=_np64(self.Z),
            final_grad_norm_sq=_np64((gT * gT).sum(-1)),
            final_loss_gap=_np64(self.ops.f(v)) - self.problem.f_star,
        )


def _np64(x: torch.Tensor) -> np.ndarray:
    return x.to("cpu", torch.float64).numpy()


def run(
    problem: Problem,
    spec: AlgorithmSpec,
    *,
    T: int,
    R: int,
    seed: int,
    start: np.ndarray,
    record_every: int,
    progress: bool,
    device: str | torch.device | None,
    dtype: str,
    noise_rng: str | None,
) -> Trace:
    """The torch run behind ``simulate(..., backend="torch")``; inputs already validated."""
    if dtype not in DTYPES:
        raise UserInputError(f"unknown dtype {dtype!r}: choose one of {list(DTYPES)}")
    dev, dt = resolve_device(device), DTYPES[dtype]
    runner = TorchRun(
        problem, spec, T=T, R=R, seed=seed, record_every=record_every, start=start, dev=dev,
        dt=dt, noise_rng=noise_rng,
    )  # fmt: skip
    return runner.run(progress, f"simulate {spec.kind} (torch)")
