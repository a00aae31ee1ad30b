"""How much work the probe does (:class:`ProbeSettings`) and which samples it uses
(:class:`SamplingPlan`, :func:`make_plan`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.validation import ParameterError, check_fraction, check_int
from empirical.data import rng_of


@dataclass(frozen=True)
class ProbeSettings:
    """How much work the probe does at each point (all counts are samples, not batches).

    ``samples``: per-sample gradients per point for sigma^2 (spread evenly over the shards,
    at least 2 per shard). ``max_samples``: size of the probe set (``max_samples // K`` per
    shard, at most the shard). ``hvp_samples``: batch of the Hessian-vector products.
    ``hvp_iters``/``hvp_tol``: power-iteration budget and relative stopping tolerance on
    ``||Hv||``. ``hvp_warm_start``: start each point's power iteration from the previous
    point's vector (faster, but it can stall on an eigenvector that is no longer the top
    one; off by default, every point then starts from a fresh seeded normal vector). ``confidence``: level of the CIs. ``step_batch``: samples in one step's
    gradient (``A * B``). ``f_lower``: a lower bound of the per-sample loss (0 for cross
    entropy). ``chunk_size``: samples per forward/backward. ``seed``: every random choice.
    """

    samples: int = 64
    max_samples: int = 512
    hvp_samples: int = 32
    hvp_iters: int = 20
    hvp_tol: float = 1e-3
    hvp_warm_start: bool = False
    confidence: float = 0.95
    step_batch: int = 1
    f_lower: float = 0.0
    chunk_size: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("samples", self.samples, 2)
        check_int("max_samples", self.max_samples, 2)
        check_int("hvp_samples", self.hvp_samples, 1)
        check_int("hvp_iters", self.hvp_iters, 1)
        check_fraction("hvp_tol", self.hvp_tol, allow_zero=False, allow_one=False)
        check_fraction("confidence", self.confidence, allow_zero=False, allow_one=False)
        check_int("step_batch", self.step_batch, 1)
        if not math.isfinite(float(self.f_lower)):
            raise ParameterError("f_lower", self.f_lower, "a finite number")
        check_int("chunk_size", self.chunk_size, 1)
        check_int("seed", self.seed, 0)


@dataclass
class SamplingPlan:
    """Which samples the probe uses; the same at every point (common random numbers).

    ``shard_sizes[k] = |S_k|``; ``probe[k]``: the probe set ``P_k`` (dataset indices);
    ``noise[k]``: the ``n_k`` samples of the per-sample gradients (a subset of ``P_k``);
    ``hvp``: the Hessian batch; ``iid``: the run samples the whole data set per epoch.
    """

    shard_sizes: list[int]
    probe: list[np.ndarray]
    noise: list[np.ndarray]
    hvp: np.ndarray
    iid: bool

    @property
    def probe_sizes(self) -> list[int]:
        return [len(p) for p in self.probe]

    def to_dict(self) -> dict[str, Any]:
        return {
            "shard_sizes": self.shard_sizes,
            "probe_sizes": self.probe_sizes,
            "noise_sizes": [len(s) for s in self.noise],
            "hvp_size": len(self.hvp),
            "iid": self.iid,
        }


def make_plan(shards: Sequence[np.ndarray], settings: ProbeSettings, *, iid: bool) -> SamplingPlan:
    """Seeded choice of the probe sets, noise samples and Hessian batch (see the module doc)."""
    K = len(shards)
    rng = rng_of(settings.seed, 0x9B0BE)
    per = max(2, settings.max_samples // K)
    n_per = max(2, -(-settings.samples // K))
    h_per = max(1, -(-settings.hvp_samples // K))
    probe, noise, hvp = [], [], []
    for s in shards:
        s = np.asarray(s, dtype=np.int64)
        m = min(len(s), per)
        pk = np.sort(rng.choice(s, size=m, replace=False)) if m < len(s) else np.sort(s)
        probe.append(pk)
        noise.append(rng.choice(pk, size=min(m, n_per), replace=False))
        hvp.append(rng.choice(pk, size=min(m, h_per), replace=False))
    return SamplingPlan([len(s) for s in shards], probe, noise, np.concatenate(hvp), bool(iid))
