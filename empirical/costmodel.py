"""Calibrated cost model of DDP, Local SGD / DiLoCo and PALSGD: compute and communication time.

Wall-clock of a run (docs/reference-implementation.md §8)::

    time = grad_steps * C_g + pull_steps * C_p + syncs * C_sync + waits + communication

with ``C_g`` the compute of a gradient step (``A`` micro-batches of forward/backward and
the inner optimizer step), ``C_p`` the compute of a pull step (an O(d) update), ``C_sync``
the local work of a sync (flat copy, outer step), ``waits`` the time a worker waits at a
sync for the worker with the most gradient steps in the round (PALSGD with independent
coins), and communication from an alpha-beta model of all-reduce (Hockney, "The
communication challenge for MPP", Parallel Computing 20(3), 1994):

* ``ring``: ``2 (K-1) * latency + 2 (K-1)/K * bytes / bandwidth`` (reduce-scatter then
  all-gather around a ring; bandwidth optimal: Patarasuk & Yuan, "Bandwidth optimal
  all-reduce algorithms for clusters of workstations", JPDC 69(2), 2009; Thakur,
  Rabenseifner & Gropp, "Optimization of collective communication operations in MPICH",
  IJHPCA 19(1), 2005, §4.4).
* ``tree``: ``2 ceil(log2 K) * latency + 2 * bytes / bandwidth`` (pipelined reduce then
  broadcast on a (double) binary tree, whose bandwidth term tends to ``bytes/bandwidth``
  per phase: Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth broadcast,
  reduction and scan", Parallel Computing 35(12), 2009; NCCL's tree all-reduce).
* ``rabenseifner``: ``2 ceil(log2 K) * latency + 2 (K-1)/K * bytes / bandwidth`` (recursive
  halving reduce-scatter + recursive doubling all-gather; Thakur et al. 2005, §4.4).

The arithmetic of the reduction is not modelled (it is memory-bound and small next to the
transfer on the links of interest). ``K = 1`` costs nothing.

DDP: one gradient all-reduce per step, in buckets (torch ``DistributedDataParallel``: the
first bucket holds at most ``1 MiB``, the others ``bucket_cap_mb = 25 MiB``; Li et al.,
"PyTorch Distributed: experiences on accelerating data parallel training", VLDB 2020,
§3.2). With ``overlap_ddp=True`` a bucket's all-reduce starts when its gradients are ready
during the backward pass of the last micro-batch (gradients assumed to be produced at a
uniform rate over that backward pass, buckets in order, one link so all-reduces run one
after another); only the part that finishes after the backward pass is exposed. With
``overlap_ddp=False`` every bucket's all-reduce is exposed.

Local SGD / Post-Local SGD / DiLoCo / PALSGD (this project's :mod:`empirical.algorithms`):
one all-reduce of the flat gradient buffer per warm-up step and ``outer_steps_per_sync``
all-reduces of the flat parameter buffer per sync (1 in this project; the authors'
``--is_intended_impl False`` runs ``A``, docs/reference-implementation.md §4).

Not modelled: waits caused by compute-time variability between workers (only the
imbalance of PALSGD's coins is), data loading, evaluation, checkpoints, and the arithmetic
of the reduction.

Calibration on the machine at hand: :func:`measure_allreduce` + :func:`calibrate_link`
(least-squares fit of latency and bandwidth), :func:`measure_compute` (the real model's
gradient and pull steps). Extrapolation: :data:`CLUSTER_PROFILES` (named clusters, every
number cited or marked as an assumption) and :func:`paper_scale_prediction` (the paper's
three headline settings). Units: seconds, bytes, bytes per second, FLOP, FLOP/s.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from empirical.config import README_8M_RUN
from theory.validation import (
    ParameterError,
    UserInputError,
    check_int,
    check_output_file,
    read_mapping_file,
    validate,
    validate_one,
)

__all__ = [
    "ALLREDUCE_ALGORITHMS",
    "LinkProfile",
    "ComputeProfile",
    "ClusterProfile",
    "GPUSpec",
    "GPUS",
    "CLUSTER_PROFILES",
    "SETTINGS",
    "PAPER_REPORTED",
    "DDP_FIRST_BUCKET_BYTES",
    "DDP_BUCKET_CAP_BYTES",
    "allreduce_time",
    "calibrate_link",
    "time_allreduce",
    "measure_allreduce",
    "profile_compute",
    "measure_compute",
    "cluster_profile",
    "calibrate_local_profile",
    "link_from_dict",
    "cluster_from_dict",
    "load_profiles",
    "ddp_bucket_sizes",
    "ddp_exposed_comm",
    "expected_max_binomial",
    "step_trace",
    "load_trace",
    "time_breakdown",
    "modelled_time",
    "attribute_gain",
    "gpu_compute_profile",
    "paper_scale_prediction",
    "CHECK_CONFIGS",
    "emulated_link_check",
    "add_arguments",
    "run",
]

ALLREDUCE_ALGORITHMS: tuple[str, ...] = ("ring", "tree", "rabenseifner")
LOCAL_ALGORITHMS: tuple[str, ...] = ("local_sgd", "post_local_sgd", "diloco", "palsgd")
COIN_MODES: tuple[str, ...] = ("independent", "shared")

#: torch DDP's bucket limits (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES and the
#: ``bucket_cap_mb=25`` default of ``DistributedDataParallel``)
DDP_FIRST_BUCKET_BYTES = 1024 * 1024
DDP_BUCKET_CAP_BYTES = 25 * 1024 * 1024


# ----------------------------------------------------------------------------- validation


def _number(
    name: str,
    value: Any,
    *,
    low: float = 0.0,
    low_open: bool = False,
    allow_inf: bool = False,
    unit: str = "",
) -> float:
    """``value`` as a float in ``[low, inf)`` (or ``(low, inf)``); ParameterError otherwise."""
    bracket = "(" if low_open else "["
    allowed = f"{bracket}{low:g}, inf)" + (f" {unit}" if unit else "")
    if isinstance(value, bool) or value is None:
        raise ParameterError(name, value, allowed, "expected a number")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ParameterError(name, value, allowed, "expected a number") from None
    if math.isnan(x) or (math.isinf(x) and not allow_inf) or x < low or (low_open and x == low):
        raise ParameterError(name, value, allowed)
    return x


def _choice(name: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise UserInputError(
            f"'{name}' = {value!r} is not one of {', '.join(repr(a) for a in allowed)}"
        )
    return str(value)


def _workers(K: Any) -> int:
    validate_one("K", K)
    return int(K)


# ----------------------------------------------------------------------------- profiles


@dataclass(frozen=True)
class LinkProfile:
    """An interconnect in the alpha-beta model.

    ``latency_s``: seconds per message step (alpha); ``bandwidth_Bps``: bytes per second of
    one link in one direction (1/beta); ``algorithm``: ``"ring"``, ``"tree"`` or
    ``"rabenseifner"`` (see the module docstring for the formulas); ``source``: where the
    numbers come from (citation, "assumption: ...", or the calibration that produced them).
    """

    name: str
    latency_s: float
    bandwidth_Bps: float
    algorithm: str = "ring"
    source: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise UserInputError(
                f"'name' of a link profile must be a non-empty string, got {self.name!r}"
            )
        object.__setattr__(self, "latency_s", _number("latency_s", self.latency_s, unit="s"))
        object.__setattr__(
            self,
            "bandwidth_Bps",
            _number("bandwidth_Bps", self.bandwidth_Bps, low_open=True, unit="B/s"),
        )
        _choice("algorithm", self.algorithm, ALLREDUCE_ALGORITHMS)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ComputeProfile:
    """Per-worker compute times of one optimizer step, communication excluded (seconds).

    ``grad_step_s``: a gradient step: ``accumulation`` micro-batches of forward/backward plus
    the inner optimizer step. ``pull_step_s``: a PALSGD pull step (``x <- x - c (x - z)`` on
    every parameter tensor). ``inner_step_s``: the inner optimizer step (part of
    ``grad_step_s``). ``backward_s``: the backward pass of the LAST micro-batch, the window
    in which DDP can overlap its gradient all-reduce; ``None`` takes 2/3 of a micro-batch's
    forward/backward (backward ~ 2x forward FLOPs: Kaplan et al., "Scaling laws for neural
    language models", 2020, §2.1). ``sync_local_s``: the local work of a sync (flat copy,
    outer-optimizer step, copy back), communication excluded.
    """

    grad_step_s: float
    pull_step_s: float
    inner_step_s: float = 0.0
    source: str = ""
    backward_s: float | None = None
    sync_local_s: float = 0.0
    accumulation: int = 1

    def __post_init__(self) -> None:
        for name in ("grad_step_s", "pull_step_s", "inner_step_s", "sync_local_s"):
            object.__setattr__(self, name, _number(name, getattr(self, name), unit="s"))
        if self.backward_s is not None:
            object.__setattr__(self, "backward_s", _number("backward_s", self.backward_s, unit="s"))
        validate(A=self.accumulation)
        object.__setattr__(self, "accumulation", int(self.accumulation))
        if self.inner_step_s > self.grad_step_s:
            raise ParameterError(
                "inner_step_s",
                self.inner_step_s,
                f"[0, grad_step_s = {self.grad_step_s:g}]",
                "the inner step is part of a gradient step",
            )

    @property
    def overlap_window_s(self) -> float:
        """Seconds of backward pass during which DDP's bucket all-reduces can run."""
        if self.backward_s is not None:
            return self.backward_s
        return (2.0 / 3.0) * (self.grad_step_s - self.inner_step_s) / self.accumulation

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ClusterProfile:
    """A named cluster: ``K`` workers (one per GPU) joined by the bottleneck ``link``.

    Multi-node clusters are modelled as one flat ring (or tree) over all ``K`` workers whose
    slowest hop is the node's network interface: in a ring laid out node by node, each NIC
    carries one ring edge per direction, so the ring formula holds with the NIC's bandwidth
    (Patarasuk & Yuan 2009); the latency term (2 (K-1) steps) is pessimistic next to a
    hierarchical all-reduce.
    """

    name: str
    K: int
    link: LinkProfile
    gpu: str
    source: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise UserInputError(
                f"'name' of a cluster profile must be a non-empty string, got {self.name!r}"
            )
        object.__setattr__(self, "K", _workers(self.K))
        if not isinstance(self.link, LinkProfile):
            raise UserInputError(f"'link' of cluster profile {self.name!r} must be a LinkProfile")
        if not isinstance(self.gpu, str):
            raise UserInputError(f"'gpu' of cluster profile {self.name!r} must be a string")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "K": self.K,
            "link": self.link.to_dict(),
            "gpu": self.gpu,
            "source": self.source,
        }


@dataclass(frozen=True)
class GPUSpec:
    """Vendor peak numbers of an accelerator: dense 16-bit tensor throughput and HBM bandwidth."""

    name: str
    peak_flops: float
    memory_Bps: float
    source: str


GPUS: dict[str, GPUSpec] = {
    g.name: g
    for g in (
        GPUSpec(
            "A100-SXM4-80GB",
            312e12,
            2.039e12,
            "NVIDIA A100 Tensor Core GPU datasheet (2021): BF16/FP16 tensor 312 TFLOPS dense; "
            "HBM2e 2,039 GB/s",
        ),
        GPUSpec(
            "H100-SXM5-80GB",
            989.4e12,
            3.35e12,
            "NVIDIA H100 Tensor Core GPU datasheet (2023): BF16 tensor 1,979 TFLOPS with "
            "sparsity = 989.4 dense; HBM3 3.35 TB/s",
        ),
        GPUSpec(
            "V100-SXM2-32GB",
            125e12,
            0.9e12,
            "NVIDIA V100 Tensor Core GPU datasheet (2020): tensor 125 TFLOPS; HBM2 900 GB/s",
        ),
    )
}

_STATIC_CLUSTERS: dict[str, ClusterProfile] = {
    c.name: c
    for c in (
        ClusterProfile(
            "8xGPU-NVLink",
            8,
            LinkProfile(
                "NVLink3-NVSwitch",
                2e-6,
                300e9,
                "ring",
                "bandwidth: NVIDIA A100 datasheet, NVLink 600 GB/s per GPU bidirectional = "
                "300 GB/s per direction (vendor peak; NCCL reaches less); latency 2 us per "
                "ring step: assumption",
            ),
            "A100-SXM4-80GB",
            "one DGX A100-like node: 8 A100 on NVSwitch (NVIDIA DGX A100 datasheet)",
        ),
        ClusterProfile(
            "64xGPU-100Gbps",
            64,
            LinkProfile(
                "100Gbps-InfiniBand-EDR",
                5e-6,
                12.5e9,
                "ring",
                "bandwidth: 100 Gb/s = 12.5e9 B/s per node (InfiniBand EDR 4x, e.g. NVIDIA "
                "ConnectX-5 datasheet), the bottleneck of a ring laid out node by node; "
                "latency 5 us per ring step: assumption (IB port-to-port latency is ~1 us, "
                "NCCL's per-step overhead is larger)",
            ),
            "A100-SXM4-80GB",
            "8 nodes x 8 A100, one 100 Gb/s NIC per node; GPU model: assumption",
        ),
        ClusterProfile(
            "32nodes-10Gbps",
            32,
            LinkProfile(
                "10GbE",
                50e-6,
                1.25e9,
                "ring",
                "bandwidth: 10 Gb/s Ethernet (IEEE 802.3ae) = 1.25e9 B/s; latency 50 us per "
                "ring step (TCP over Ethernet): assumption",
            ),
            "A100-SXM4-80GB",
            "32 nodes x 1 GPU on commodity 10 Gb/s Ethernet; GPU model: assumption",
        ),
    )
}

LOCAL_PROFILE = "cpu-gloo-local"


class _ClusterProfiles(Mapping[str, ClusterProfile]):
    """The named clusters. ``"cpu-gloo-local"`` is measured on this machine the first time it
    is looked up (2 gloo processes, a few seconds; cached for the process)."""

    def __init__(self, static: Mapping[str, ClusterProfile]) -> None:
        self._static = dict(static)
        self._local: ClusterProfile | None = None

    def __getitem__(self, name: str) -> ClusterProfile:
        if name == LOCAL_PROFILE:
            if self._local is None:
                self._local = calibrate_local_profile()
            return self._local
        return self._static[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._static
        yield LOCAL_PROFILE

    def __len__(self) -> int:
        return len(self._static) + 1

    def __contains__(self, name: object) -> bool:
        return name == LOCAL_PROFILE or name in self._static

    def static(self) -> dict[str, ClusterProfile]:
        """The profiles that need no measurement."""
        return dict(self._static)


CLUSTER_PROFILES: _ClusterProfiles = _ClusterProfiles(_STATIC_CLUSTERS)


def cluster_profile(
    name: str, profiles: Mapping[str, ClusterProfile] | None = None
) -> ClusterProfile:
    """The cluster profile ``name`` (from ``profiles``, default :data:`CLUSTER_PROFILES`)."""
    table = CLUSTER_PROFILES if profiles is None else profiles
    if not isinstance(name, str) or name not in table:
        raise UserInputError(
            f"unknown cluster profile 'profile' = {name!r}: known profiles are "
            f"{', '.join(repr(k) for k in table)}"
        )
    return table[name]


def _require(d: Mapping[str, Any], key: str, what: str) -> Any:
    if not isinstance(d, Mapping):
        raise UserInputError(f"{what} must be a mapping, got {type(d).__name__}")
    if key not in d:
        raise UserInputError(f"{what} is missing the field '{key}'")
    return d[key]


def link_from_dict(d: Mapping[str, Any], name: str | None = None) -> LinkProfile:
    """A :class:`LinkProfile` from a mapping with ``latency_s``, ``bandwidth_Bps`` (and
    optional ``name``, ``algorithm``, ``source``); a missing field is named in the error."""
    what = f"link profile {name or d.get('name', '') if isinstance(d, Mapping) else ''!r}"
    lat = _require(d, "latency_s", what)
    bw = _require(d, "bandwidth_Bps", what)
    known = {"name", "latency_s", "bandwidth_Bps", "algorithm", "source"}
    extra = sorted(set(d) - known)
    if extra:
        raise UserInputError(f"{what} has unknown field(s) {extra}; known: {sorted(known)}")
    return LinkProfile(
        name=str(d.get("name", name or "link")),
        latency_s=lat,
        bandwidth_Bps=bw,
        algorithm=d.get("algorithm", "ring"),
        source=str(d.get("source", "")),
    )


def cluster_from_dict(d: Mapping[str, Any], name: str | None = None) -> ClusterProfile:
    """A :class:`ClusterProfile` from a mapping with ``K``, ``link`` (a mapping, see
    :func:`link_from_dict`), ``gpu`` and ``source``; a missing field is named in the error."""
    nm = name or (d.get("name") if isinstance(d, Mapping) else None) or "cluster"
    what = f"cluster profile {nm!r}"
    K = _require(d, "K", what)
    link = _require(d, "link", what)
    gpu = _require(d, "gpu", what)
    source = _require(d, "source", what)
    extra = sorted(set(d) - {"name", "K", "link", "gpu", "source"})
    if extra:
        raise UserInputError(f"{what} has unknown field(s) {extra}")
    return ClusterProfile(
        name=str(nm), K=K, link=link_from_dict(link, f"{nm}.link"), gpu=str(gpu), source=str(source)
    )


def load_profiles(path: str | Path) -> dict[str, ClusterProfile]:
    """Cluster profiles from a YAML or JSON file: ``{name: {K, link: {...}, gpu, source}}``."""
    data = read_mapping_file(path, "profiles file")
    return {str(k): cluster_from_dict(v, str(k)) for k, v in data.items()}


# ----------------------------------------------------------------------------- all-reduce model


def _coefficients(K: int, algorithm: str) -> tuple[float, float]:
    """(latency multiplier, bytes/bandwidth multiplier) of one all-reduce of K workers."""
    if K <= 1:
        return 0.0, 0.0
    steps = math.ceil(math.log2(K))
    if algorithm == "ring":
        return 2.0 * (K - 1), 2.0 * (K - 1) / K
    if algorithm == "tree":
        return 2.0 * steps, 2.0
    return 2.0 * steps, 2.0 * (K - 1) / K  # rabenseifner


def allreduce_time(nbytes: float | np.ndarray, K: int, link: LinkProfile) -> np.ndarray:
    """Seconds of one all-reduce of ``nbytes`` payload bytes per worker over ``K`` workers.

    ``ring``: ``2(K-1) a + 2(K-1)/K n/B``; ``tree``: ``2 ceil(log2 K) a + 2 n/B``;
    ``rabenseifner``: ``2 ceil(log2 K) a + 2(K-1)/K n/B`` (module docstring for sources).
    """
    K = _workers(K)
    if not isinstance(link, LinkProfile):
        raise UserInputError("'link' must be a LinkProfile")
    n = np.asarray(nbytes, dtype=float)
    if n.size and (not np.all(np.isfinite(n)) or np.any(n < 0)):
        raise ParameterError("nbytes", nbytes, "[0, inf) bytes")
    a, b = _coefficients(K, link.algorithm)
    return a * link.latency_s + b * n / link.bandwidth_Bps


def calibrate_link(
    measurements: Iterable[tuple[float, int, float]],
    algorithm: str = "ring",
    *,
    name: str = "calibrated",
) -> LinkProfile:
    """Least-squares fit of latency and bandwidth to measured all-reduce times.

    ``measurements``: ``(nbytes, K, seconds)`` triples (e.g. from :func:`measure_allreduce`).
    With ``(a_i, b_i)`` the formula's coefficients for ``K_i``, the fit minimises
    ``sum_i ((a_i * latency + b_i * n_i / bandwidth - t_i) / t_i)^2`` (relative residuals, so
    small and large messages weigh alike) under ``latency >= 0``, ``1/bandwidth >= 0``
    (``scipy.optimize.nnls``). Needs at least two different sizes (or worker counts) with
    ``K >= 2``; raises :class:`UserInputError` when the data do not determine a bandwidth.
    """
    from scipy.optimize import nnls

    _choice("algorithm", algorithm, ALLREDUCE_ALGORITHMS)
    rows, ys, sizes, ks = [], [], [], set()
    for i, m in enumerate(measurements):
        try:
            nbytes, K, secs = m
        except (TypeError, ValueError):
            raise UserInputError(
                f"measurement {i} must be a triple (nbytes, K, seconds), got {m!r}"
            ) from None
        n = _number("nbytes", nbytes, unit="bytes")
        K = _workers(K)
        t = _number("seconds", secs, low_open=True, unit="s")
        if K < 2:
            continue
        a, b = _coefficients(K, algorithm)
        rows.append((a / t, b * n / t))
        ys.append(1.0)
        sizes.append(n)
        ks.add(K)
    if len(rows) < 2:
        raise UserInputError("calibrate_link needs at least two measurements with K >= 2")
    X = np.asarray(rows)
    if np.linalg.matrix_rank(X / np.linalg.norm(X, axis=0).clip(min=1e-300)) < 2:
        raise UserInputError(
            "the measurements do not separate latency from bandwidth: use at least two "
            "different message sizes"
        )
    coef, _ = nnls(X, np.asarray(ys))
    latency, inv_bw = float(coef[0]), float(coef[1])
    if inv_bw <= 0:
        raise UserInputError(
            "the measurements show no bandwidth term (time does not grow with the size): "
            "use larger messages"
        )
    rel = X @ coef - 1.0
    rms = float(np.sqrt(np.mean(rel**2)))
    src = (
        f"least-squares fit ({algorithm}) to {len(rows)} measurements, K in {sorted(ks)}, "
        f"{min(sizes):.0f}..{max(sizes):.0f} bytes; rms relative residual {100 * rms:.1f}%"
    )
    return LinkProfile(
        name=name, latency_s=latency, bandwidth_Bps=1.0 / inv_bw, algorithm=algorithm, source=src
    )


# ----------------------------------------------------------------------------- measurement


def time_allreduce(
    sizes: Sequence[int],
    *,
    repeats: int = 10,
    warmup: int = 2,
    trials: int = 3,
    group: Any = None,
    delay_s: float = 0.0,
    delay_per_byte_s: float = 0.0,
) -> list[list[float]]:
    """Time ``dist.all_reduce`` of flat fp32 buffers of ``sizes`` bytes in an existing group.

    Collective: every rank of ``group`` must call it with the same arguments. As nccl-tests
    do, each trial times ``repeats`` back-to-back calls after a barrier and reports their
    mean, so the time includes what a training loop sees between consecutive collectives
    (arrival skew of the ranks, wake-up delays), not only one isolated call. Calls go
    through the algorithms' own :class:`~empirical.algorithms.base.Communicator`, so an
    emulated slow link (``delay_s`` + ``delay_per_byte_s`` per byte) is applied exactly as
    in training. Returns, per size, this rank's ``trials`` per-call means in seconds.
    """
    import torch
    import torch.distributed as dist

    from empirical.algorithms.base import Communicator, new_stats
    from empirical.algorithms.slowlink import link_delay_fn

    validate(R=repeats)
    comm = Communicator(group, new_stats(), delay=link_delay_fn(delay_s, delay_per_byte_s))
    out: list[list[float]] = []
    for size in sizes:
        buf = torch.ones(max(1, math.ceil(int(size) / 4)), dtype=torch.float32)
        for _ in range(warmup):
            comm.all_reduce_sum(buf)
        means = []
        for _ in range(trials):
            dist.barrier(group=group)
            start = time.perf_counter()
            for _ in range(repeats):
                comm.all_reduce_sum(buf)
            means.append((time.perf_counter() - start) / repeats)
        out.append(means)
    return out


def _allreduce_worker(
    rank: int,
    world: int,
    sizes: list[int],
    repeats: int,
    warmup: int,
    trials: int,
    delay_s: float,
    delay_per_byte_s: float,
) -> list[list[float]]:
    return time_allreduce(
        sizes,
        repeats=repeats,
        warmup=warmup,
        trials=trials,
        delay_s=delay_s,
        delay_per_byte_s=delay_per_byte_s,
    )


def _combine_ranks(
    sizes: Sequence[int],
    per_rank: Sequence[Sequence[Sequence[float]]],
    world: int,
    statistic: str = "mean",
) -> list[tuple[int, int, float]]:
    """Per size: ``statistic`` over trials of the slowest rank's per-call mean (a run of
    back-to-back collectives ends when its last participant is done)."""
    _choice("statistic", statistic, ("mean", "median"))
    reduce = np.mean if statistic == "mean" else np.median
    out = []
    for i, size in enumerate(sizes):
        worst = np.max(np.asarray([r[i] for r in per_rank], dtype=float), axis=0)
        out.append((int(size), int(world), float(reduce(worst))))
    return out


def measure_allreduce(
    sizes: Sequence[int] = (4096, 65536, 1 << 20, 4 << 20),
    *,
    world_size: int = 2,
    repeats: int = 10,
    warmup: int = 2,
    trials: int = 3,
    delay_s: float = 0.0,
    delay_per_byte_s: float = 0.0,
    statistic: str = "mean",
    timeout_s: float = 300.0,
) -> list[tuple[int, int, float]]:
    """Spawn ``world_size`` gloo processes on this machine and time all-reduces of flat fp32
    buffers of ``sizes`` bytes (:func:`time_allreduce`).

    Returns ``(nbytes, world_size, seconds)`` per size: the mean (``statistic="mean"``) or
    median over ``trials`` of the slowest rank's mean time per call in ``repeats``
    back-to-back calls. ``delay_s``,
    ``delay_per_byte_s``: an emulated slow link (:mod:`empirical.algorithms.slowlink`).
    """
    from empirical.distributed import spawn_workers

    world = check_int("world_size", world_size, 2, integral_floats=True)
    sizes = [int(_number("sizes", s, low_open=True, unit="bytes")) for s in sizes]
    if not sizes:
        raise UserInputError("'sizes' must name at least one message size")
    check_int("repeats", repeats, 1, integral_floats=True)
    check_int("warmup", warmup, 0, integral_floats=True)
    check_int("trials", trials, 1, integral_floats=True)
    per_rank = spawn_workers(
        _allreduce_worker,
        world,
        sizes,
        int(repeats),
        int(warmup),
        int(trials),
        float(delay_s),
        float(delay_per_byte_s),
        timeout_s=timeout_s,
    )
    return _combine_ranks(sizes, per_rank, world, statistic)


def profile_compute(
    model: Any,
    make_batch: Callable[[int], Any],
    loss_fn: Callable[[Any, Any], Any],
    *,
    accumulation: int = 1,
    optimizer: Any = None,
    repeats: int = 10,
    warmup: int = 2,
    outer: str = "nesterov",
    statistic: str = "mean",
    idle_s: float = 0.0,
    burst: int = 1,
    source: str = "",
) -> ComputeProfile:
    """Measure the compute of one gradient step, one pull step and a sync's local work.

    ``model`` (an ``nn.Module`` on its device), ``make_batch(i)`` the i-th micro-batch,
    ``loss_fn(model, batch)`` a scalar loss, ``optimizer`` the inner optimizer (default
    ``AdamW(lr=1e-3)``; it is stepped, so pass a copy of the model if it matters).
    Gradient step: ``accumulation`` forward/backward passes plus ``optimizer.step()`` and
    ``zero_grad``. Pull step: ``torch._foreach_lerp_`` of every trainable tensor toward an
    anchor (what :class:`~empirical.algorithms.LocalAlgorithm` runs). Sync: flat copy of
    the parameters, ``Delta = z - x``, one ``outer`` optimizer step on ``z`` (``"average"``,
    ``"sgd"`` or ``"nesterov"``), copy back (collective excluded). ``statistic`` over the
    ``repeats`` timed repetitions (after ``warmup`` untimed ones): ``"mean"`` (the right
    estimate for a total of many steps) or ``"median"`` (robust to rare outliers). CUDA is
    synchronised before every reading. ``idle_s``: seconds slept before every ``burst``
    consecutive gradient steps (outside the timing). On a dedicated machine it changes nothing; on a shared,
    oversubscribed CPU a process that computes without pause gets only its fair share of a
    core, whereas a communication-bound run computes in short bursts after waits and is
    scheduled at once, so a calibration for such a run should pause like it (e.g. for the
    duration of an all-reduce, in bursts of the steps between two collectives: 1 for DDP,
    ``H`` for Local SGD).
    """
    import torch

    from empirical.algorithms.flat import FlatLayout, flat_dtype
    from empirical.algorithms.outer import OuterOptimizer

    validate(A=accumulation, R=repeats)
    _choice("outer", outer, ("average", "sgd", "nesterov"))
    _choice("statistic", statistic, ("mean", "median"))
    idle = _number("idle_s", idle_s, unit="s")
    if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
        raise ParameterError("burst", burst, "integer in [1, inf)")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise UserInputError("the model has no trainable parameters")
    device = params[0].device
    cuda = device.type == "cuda"

    def now() -> float:
        if cuda:
            torch.cuda.synchronize(device)
        return time.perf_counter()

    if optimizer is None:
        optimizer = torch.optim.AdamW(params, lr=1e-3)
    A = int(accumulation)
    grad_t, inner_t, bwd_t = [], [], []
    batch_index = 0
    for r in range(warmup + repeats):
        if idle and r % burst == 0:
            time.sleep(idle)
        start = now()
        bwd = 0.0
        for m in range(A):
            batch = make_batch(batch_index)
            batch_index += 1
            loss = loss_fn(model, batch) / A
            b0 = now() if m == A - 1 else 0.0
            loss.backward()
            if m == A - 1:
                bwd = now() - b0
        mid = now()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        end = now()
        if r >= warmup:
            grad_t.append(end - start)
            inner_t.append(end - mid)
            bwd_t.append(bwd)

    layout = FlatLayout(params)
    dtype = flat_dtype(params)
    z = torch.zeros(layout.numel, dtype=dtype, device=device)
    layout.gather(params, z)
    z_views = layout.views(z)
    same = all(v.dtype == p.dtype for v, p in zip(z_views, params, strict=True))
    pull_t = []
    with torch.no_grad():
        for r in range(warmup + repeats):
            start = now()
            if same:
                torch._foreach_lerp_(params, z_views, 1e-3)
            else:
                for p, v in zip(params, z_views, strict=True):
                    p.lerp_(v.to(p.dtype), 1e-3)
            end = now()
            if r >= warmup:
                pull_t.append(end - start)

    anchor = z.clone()
    outer_opt = None if outer == "average" else OuterOptimizer(anchor, outer, 0.1, 0.9)
    x = torch.zeros_like(z)
    sync_t = []
    with torch.no_grad():
        for r in range(warmup + repeats):
            start = now()
            layout.gather(params, x)
            x.sub_(anchor).neg_()
            if outer_opt is not None:
                outer_opt.step(x)
            else:
                anchor.sub_(x)
            layout.scatter(anchor, params)
            end = now()
            if r >= warmup:
                sync_t.append(end - start)

    med = statistics.fmean if statistic == "mean" else statistics.median
    return ComputeProfile(
        grad_step_s=med(grad_t),
        pull_step_s=med(pull_t),
        inner_step_s=min(med(inner_t), med(grad_t)),
        backward_s=med(bwd_t),
        sync_local_s=med(sync_t),
        accumulation=A,
        source=source
        or (
            f"measured on {device} ({torch.get_num_threads()} threads): {statistic}s of {repeats} "
            f"repetitions, {layout.numel} parameters, A = {A}"
        ),
    )


def _to_device(batch: Any, device: str) -> Any:
    if isinstance(batch, Mapping):
        return {k: v.to(device) for k, v in batch.items()}
    return tuple(t.to(device) for t in batch)


def measure_compute(
    model_name: str,
    *,
    batch_size: int,
    seq_len: int | None = None,
    image_size: int | None = None,
    accumulation: int = 1,
    device: str = "cpu",
    repeats: int = 10,
    warmup: int = 2,
    seed: int = 0,
    optimizer: str = "adamw",
    **overrides: Any,
) -> ComputeProfile:
    """:func:`profile_compute` on a model of :data:`empirical.models.MODEL_NAMES` with
    synthetic batches (seeded): token ids in ``[0, vocab)`` of shape
    ``(batch_size, seq_len)`` for the GPT-Neo models, images ``(batch_size, 3, image_size,
    image_size)`` with labels for the ResNets. ``optimizer``: ``"adamw"`` (lr 1e-3) or
    ``"sgd"``. ``overrides`` go to :func:`empirical.models.build_model`.
    """
    import torch

    from empirical import models

    task = models.model_task(model_name)
    validate_one("A", accumulation)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ParameterError("batch_size", batch_size, "integer in [1, inf)")
    _choice("optimizer", optimizer, ("adamw", "sgd"))
    if task == "lm":
        if seq_len is None:
            raise UserInputError("'seq_len' is required for a language model")
        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 2:
            raise ParameterError("seq_len", seq_len, "integer in [2, inf)")
    size = 32 if image_size is None else image_size
    if task == "image" and (isinstance(size, bool) or not isinstance(size, int) or size < 8):
        raise ParameterError("image_size", size, "integer in [8, inf)")
    model = models.build_model(model_name, seed=seed, **overrides).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = (
        torch.optim.AdamW(params, lr=1e-3)
        if optimizer == "adamw"
        else torch.optim.SGD(params, lr=1e-3)
    )
    gen = torch.Generator().manual_seed(seed)
    if task == "lm":
        vocab = int(model.config.vocab_size)
        batches = [
            {"input_ids": torch.randint(0, vocab, (batch_size, seq_len), generator=gen)}
            for _ in range(2)
        ]
    else:
        classes = int(model.fc.out_features) if hasattr(model, "fc") else 10
        batches = [
            (
                torch.randn(batch_size, 3, size, size, generator=gen),
                torch.randint(0, classes, (batch_size,), generator=gen),
            )
            for _ in range(2)
        ]
    batches = [_to_device(b, device) for b in batches]

    def make_batch(i: int) -> Any:
        return batches[i % len(batches)]

    def loss_fn(m: Any, batch: Any) -> Any:
        return models.compute_loss(m, batch, task)

    shape = f"seq_len {seq_len}" if task == "lm" else f"image {image_size or 32}px"
    prof = profile_compute(
        model,
        make_batch,
        loss_fn,
        accumulation=accumulation,
        optimizer=opt,
        repeats=repeats,
        warmup=warmup,
    )
    return dataclasses.replace(
        prof,
        source=f"measure_compute({model_name!r}, batch {batch_size}, {shape}, A = "
        f"{accumulation}, {optimizer}) on {device}: " + prof.source,
    )


def calibrate_local_profile(
    *,
    world_size: int = 2,
    sizes: Sequence[int] = (4096, 65536, 1 << 20, 4 << 20),
    repeats: int = 10,
    trials: int = 3,
    algorithm: str = "ring",
) -> ClusterProfile:
    """The ``"cpu-gloo-local"`` profile: gloo all-reduce on this machine, measured now."""
    meas = measure_allreduce(sizes, world_size=world_size, repeats=repeats, trials=trials)
    link = calibrate_link(meas, algorithm, name="gloo-loopback")
    return ClusterProfile(
        LOCAL_PROFILE,
        world_size,
        link,
        "cpu",
        f"calibrated at run time on this machine ({world_size} gloo processes)",
    )


# ----------------------------------------------------------------------------- DDP overlap


def ddp_bucket_sizes(
    param_bytes: float,
    *,
    first_bucket_bytes: float = DDP_FIRST_BUCKET_BYTES,
    bucket_cap_bytes: float = DDP_BUCKET_CAP_BYTES,
) -> list[float]:
    """DDP's gradient buckets for ``param_bytes`` bytes of gradients (tensors assumed small
    next to the caps): one bucket of at most ``first_bucket_bytes``, then ``bucket_cap_bytes``
    each, the last one partial."""
    total = _number("param_bytes", param_bytes, unit="bytes")
    first = _number("first_bucket_bytes", first_bucket_bytes, low_open=True)
    cap = _number("bucket_cap_bytes", bucket_cap_bytes, low_open=True)
    if total == 0:
        return []
    out = [min(first, total)]
    rest = total - out[0]
    while rest > 1e-9 * total:
        out.append(min(cap, rest))
        rest -= out[-1]
    return out


def ddp_exposed_comm(
    buckets: Sequence[float], K: int, link: LinkProfile, window_s: float, overlap: bool = True
) -> float:
    """Seconds of DDP's gradient all-reduce NOT hidden behind the backward pass.

    Bucket ``i`` (of ``n``) is ready at ``window_s * (bytes up to and including i) / total``
    (uniform gradient production over the last micro-batch's backward pass); all-reduces run
    one after another on the link, each starting when its bucket is ready and the previous
    one is done; the exposed time is ``max(0, finish of the last - window_s)``. Without
    ``overlap`` it is the sum of all bucket all-reduces.
    """
    sizes = np.asarray(list(buckets), dtype=float)
    if sizes.size == 0:
        return 0.0
    times = allreduce_time(sizes, K, link)
    if not overlap:
        return float(times.sum())
    window = _number("window_s", window_s, unit="s")
    ready = window * np.cumsum(sizes) / sizes.sum()
    finish = 0.0
    for r, t in zip(ready, times, strict=True):
        finish = max(finish, float(r)) + float(t)
    return max(finish - window, 0.0)


# ----------------------------------------------------------------------------- step traces


def expected_max_binomial(n: int, q: float, K: int) -> float:
    """``E[max_k G_k]`` for ``K`` independent ``G_k ~ Binomial(n, q)``:
    ``sum_{j=0}^{n-1} (1 - F(j)^K)`` with ``F`` the binomial CDF."""
    from scipy.stats import binom

    if n <= 0:
        return 0.0
    j = np.arange(n)
    return float(np.sum(1.0 - binom.cdf(j, n, q) ** K))


def _round_excess(H: int, p: float, K: int, coins: str) -> float:
    """Expected extra gradient steps per round on the critical path (max over workers minus
    one worker's mean): 0 with shared coins, ``p = 0`` or one worker."""
    if coins == "shared" or p <= 0 or K <= 1:
        return 0.0
    return expected_max_binomial(H, 1.0 - p, K) - H * (1.0 - p)


def step_trace(config: Any, K: int, T: int) -> dict[str, np.ndarray]:
    """The exact step trace of ``T`` steps of an :class:`~empirical.algorithms.AlgorithmConfig`
    on ``K`` workers, from the same counter-based coins the trainer draws.

    Row ``i`` holds cumulative counts after step ``i + 1`` for rank 0: ``step``,
    ``grad_steps``, ``pull_steps``, ``warmup_steps``, ``syncs``, ``allreduce_calls`` and
    ``critical_grad_steps`` (rank 0's gradient steps plus, for every completed round, the
    excess of the round's largest gradient-step count over all workers over rank 0's: the
    gradient steps on the critical path that a sync makes rank 0 wait for).
    """
    from theory.coins import pull_coins

    K = _workers(K)
    validate(T=T)
    T = int(T)
    t = np.arange(T)
    if config.name == "ddp":
        ones = t + 1
        zeros = np.zeros(T, dtype=np.int64)
        return {
            "step": ones,
            "grad_steps": ones,
            "pull_steps": zeros,
            "warmup_steps": zeros,
            "syncs": zeros,
            "allreduce_calls": ones,
            "critical_grad_steps": ones.copy(),
        }
    T0 = int(config.warmup_steps)
    local = t >= T0
    if config.has_pulls:
        coins = pull_coins(
            config.seed,
            config.p,
            t[:, None],
            np.arange(K)[None, :],
            shared=config.coins == "shared",
        )
        pulls = coins & local[:, None]
    else:
        pulls = np.zeros((T, K), dtype=bool)
    grads = ~pulls
    sync = local & ((t - T0 + 1 + config.sync_offset) % config.H == 0)
    # a round is the run of steps that ends with a sync; its id counts earlier syncs
    round_id = np.concatenate([[0], np.cumsum(sync)[:-1]])
    wait = np.zeros(T)
    ends = np.nonzero(sync)[0]  # the j-th sync ends round j
    if ends.size:
        rid = round_id[local]
        g_local = grads[local]
        counts = np.stack(
            [np.bincount(rid, weights=g_local[:, k], minlength=ends.size) for k in range(K)], axis=1
        )[: ends.size]
        wait[ends] = counts.max(axis=1) - counts[:, 0]
    grad0 = np.cumsum(grads[:, 0])
    syncs = np.cumsum(sync)
    warm = np.cumsum(~local)
    return {
        "step": t + 1,
        "grad_steps": grad0,
        "pull_steps": np.cumsum(pulls[:, 0]),
        "warmup_steps": warm,
        "syncs": syncs,
        "allreduce_calls": warm + syncs,
        "critical_grad_steps": grad0 + np.cumsum(wait),
    }


_TRACE_KEYS = ("step", "grad_steps", "pull_steps", "syncs")
_OPTIONAL_KEYS = ("warmup_steps", "allreduce_calls", "critical_grad_steps", "wall_s")


def load_trace(source: Any) -> dict[str, np.ndarray]:
    """A step trace as cumulative numpy arrays, from

    * a mapping of sequences (``step``, ``grad_steps``, ``pull_steps``, ``syncs``; optional
      ``warmup_steps``, ``allreduce_calls``, ``critical_grad_steps``, ``wall_s``), e.g.
      :func:`step_trace` or a run's statistics (scalars give a one-row trace);
    * a list of records (the ``"train"`` records of :mod:`empirical.metrics`);
    * a path: a run's output directory (its ``metrics.jsonl``), a ``metrics.jsonl`` or a
      ``train.csv`` file.
    """
    if isinstance(source, str | Path):
        source = _read_trace_file(Path(source))
    if isinstance(source, Mapping):
        cols = {k: source[k] for k in (*_TRACE_KEYS, *_OPTIONAL_KEYS) if k in source}
    elif isinstance(source, Sequence) and source and all(isinstance(r, Mapping) for r in source):
        recs = [r for r in source if r.get("kind", "train") == "train"]
        cols = {}
        for k in (*_TRACE_KEYS, *_OPTIONAL_KEYS):
            vals = [r.get(k) for r in recs]
            if vals and all(v is not None and v != "" for v in vals):
                cols[k] = vals
    else:
        raise UserInputError(
            "a trace must be a mapping of columns, a list of train records, or a path to a run "
            f"directory / metrics.jsonl / train.csv; got {type(source).__name__}"
        )
    for k in _TRACE_KEYS:
        if k not in cols:
            raise UserInputError(f"the trace is missing the field '{k}'")
    out: dict[str, np.ndarray] = {}
    for k, v in cols.items():
        arr = np.atleast_1d(np.asarray(v, dtype=float))
        if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise UserInputError(f"trace field '{k}' must hold finite nonnegative numbers")
        out[k] = arr
    n = {len(v) for v in out.values()}
    if len(n) != 1:
        raise UserInputError(
            f"trace fields have different lengths: { {k: len(v) for k, v in out.items()} }"
        )
    for k in (*_TRACE_KEYS, "warmup_steps", "allreduce_calls", "critical_grad_steps"):
        if k in out and np.any(np.diff(out[k]) < 0):
            raise UserInputError(f"trace field '{k}' must be cumulative (nondecreasing)")
    return out


def _read_trace_file(path: Path) -> list[dict[str, Any]] | dict[str, Any]:
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.exists():
        raise UserInputError(f"trace file '{path}' does not exist")
    if path.suffix == ".csv":
        import csv

        with open(path, newline="") as fh:
            return [dict(r) for r in csv.DictReader(fh)]
    from empirical.metrics import read_jsonl

    try:
        return read_jsonl(path, kind="train")
    except (OSError, ValueError) as exc:
        raise UserInputError(f"cannot read trace '{path}': {exc}") from None


# ----------------------------------------------------------------------------- the model


def time_breakdown(
    trace: Any,
    *,
    compute: ComputeProfile,
    link: LinkProfile,
    K: int,
    param_bytes: float,
    algorithm: str,
    overlap_ddp: bool = True,
    H: int | None = None,
    p: float = 0.0,
    coins: str = "independent",
    outer_steps_per_sync: int = 1,
    ddp_buckets: Sequence[float] | None = None,
) -> dict[str, np.ndarray]:
    """Modelled cumulative seconds per trace row, by component.

    Components: ``grad_compute`` (``grad_steps * C_g``), ``pull_compute``
    (``pull_steps * C_p``), ``sync_local`` (``syncs * C_sync``), ``straggler_wait`` (gradient
    steps on the critical path beyond this worker's, times ``C_g - C_p``: from the trace's
    ``critical_grad_steps`` when present, else the expected excess per round
    ``E[max_k G_k] - H (1-p)``, ``G_k ~ Binomial(H, 1-p)``, for independent coins) and
    ``communication``: DDP, ``grad_steps`` exposed bucketed all-reduces (module docstring);
    local algorithms, one all-reduce of ``param_bytes`` per warm-up step (``warmup_steps``
    or ``allreduce_calls - syncs`` from the trace) and ``outer_steps_per_sync`` per sync.
    ``total`` is their sum.
    """
    tr = load_trace(trace)
    if not isinstance(compute, ComputeProfile):
        raise UserInputError("'compute' must be a ComputeProfile")
    if not isinstance(link, LinkProfile):
        raise UserInputError("'link' must be a LinkProfile")
    K = _workers(K)
    _choice("algorithm", algorithm, ("ddp", *LOCAL_ALGORITHMS))
    _choice("coins", coins, COIN_MODES)
    nbytes = _number("param_bytes", param_bytes, unit="bytes")
    validate(p=p)
    if (
        isinstance(outer_steps_per_sync, bool)
        or not isinstance(outer_steps_per_sync, int)
        or (outer_steps_per_sync < 1)
    ):
        raise ParameterError("outer_steps_per_sync", outer_steps_per_sync, "integer in [1, inf)")
    grad, pull, syncs = tr["grad_steps"], tr["pull_steps"], tr["syncs"]
    cg, cp = compute.grad_step_s, compute.pull_step_s
    zeros = np.zeros_like(grad)
    out = {
        "grad_compute": grad * cg,
        "pull_compute": pull * cp,
        "sync_local": zeros.copy(),
        "straggler_wait": zeros.copy(),
    }
    if algorithm == "ddp":
        buckets = ddp_buckets if ddp_buckets is not None else ddp_bucket_sizes(nbytes)
        per_step = ddp_exposed_comm(buckets, K, link, compute.overlap_window_s, overlap_ddp)
        out["communication"] = grad * per_step
    else:
        if "warmup_steps" in tr:
            warm = tr["warmup_steps"]
        elif "allreduce_calls" in tr:
            warm = np.maximum(tr["allreduce_calls"] - syncs * outer_steps_per_sync, 0.0)
        else:
            warm = zeros
        t_ar = float(allreduce_time(nbytes, K, link))
        out["communication"] = (warm + syncs * outer_steps_per_sync) * t_ar
        out["sync_local"] = syncs * compute.sync_local_s
        if "critical_grad_steps" in tr:
            extra = np.maximum(tr["critical_grad_steps"] - grad, 0.0)
        elif algorithm == "palsgd" and p > 0:
            if H is None:
                raise UserInputError(
                    "'H' is needed to model the sync waits of PALSGD (or give the trace a "
                    "'critical_grad_steps' column, e.g. from step_trace)"
                )
            validate(H=H)
            extra = syncs * _round_excess(int(H), float(p), K, coins)
        else:
            extra = zeros
        out["straggler_wait"] = extra * max(cg - cp, 0.0)
    out["total"] = sum(out[k] for k in list(out))
    return out


def modelled_time(
    counts_or_metrics: Any,
    *,
    compute: ComputeProfile,
    link: LinkProfile,
    K: int,
    param_bytes: float,
    algorithm: str,
    overlap_ddp: bool = True,
    **kw: Any,
) -> np.ndarray:
    """Cumulative modelled wall-clock (seconds) at every row of a step trace.

    ``counts_or_metrics``: anything :func:`load_trace` reads. Further keywords (``H``, ``p``,
    ``coins``, ``outer_steps_per_sync``, ``ddp_buckets``) as in :func:`time_breakdown`,
    which states the model.
    """
    return time_breakdown(
        counts_or_metrics,
        compute=compute,
        link=link,
        K=K,
        param_bytes=param_bytes,
        algorithm=algorithm,
        overlap_ddp=overlap_ddp,
        **kw,
    )["total"]


def attribute_gain(
    ddp: Any,
    palsgd: Any,
    *,
    compute: ComputeProfile,
    link: LinkProfile,
    K: int,
    param_bytes: float,
    algorithm: str = "palsgd",
    baseline: str = "ddp",
    overlap_ddp: bool = True,
    H: int | None = None,
    p: float = 0.0,
    coins: str = "independent",
    outer_steps_per_sync: int = 1,
    ddp_buckets: Sequence[float] | None = None,
) -> dict[str, Any]:
    """Decompose the modelled time saving of a local method (``palsgd`` trace, run with
    ``algorithm``) over a baseline (``ddp`` trace, run with ``baseline``) at the last row.

    With ``N`` steps, ``G`` gradient steps, ``P`` pull steps (baseline ``b``, method ``m``)::

        saving = T_b - T_m
               = (N_b - N_m) C_g                 fewer_steps_s
               + (P_m - P_b) C_g                 compute_skipped_on_pulls_s
               + (comm_b - comm_m)               communication_saved_s
               - (P_m - P_b) C_p                 pull_cost_s        (negative: a cost)
               - (sync_m - sync_b)               outer_step_cost_s  (local work of syncs)
               - (wait_m - wait_b)               straggler_wait_s

    The parts add up to ``total_saving_s`` exactly (``G = N - P``). ``time_reduction`` is
    ``saving / T_b`` (the "x% faster" of a time-to-target comparison), ``speedup``
    ``T_b / T_m - 1``. When both traces carry ``wall_s`` (measured runs), ``measured``
    holds the measured times and the model's relative error on each.
    """
    common = dict(
        compute=compute,
        link=link,
        K=K,
        param_bytes=param_bytes,
        overlap_ddp=overlap_ddp,
        outer_steps_per_sync=outer_steps_per_sync,
        ddp_buckets=ddp_buckets,
        coins=coins,
    )
    tb, tm = load_trace(ddp), load_trace(palsgd)
    bb = time_breakdown(tb, algorithm=baseline, H=H, p=0.0, **common)
    bm = time_breakdown(tm, algorithm=algorithm, H=H, p=p, **common)

    def last(d: Mapping[str, np.ndarray], k: str) -> float:
        return float(d[k][-1])

    n_b = last(tb, "grad_steps") + last(tb, "pull_steps")
    n_m = last(tm, "grad_steps") + last(tm, "pull_steps")
    dp = last(tm, "pull_steps") - last(tb, "pull_steps")
    parts = {
        "fewer_steps_s": (n_b - n_m) * compute.grad_step_s,
        "compute_skipped_on_pulls_s": dp * compute.grad_step_s,
        "communication_saved_s": last(bb, "communication") - last(bm, "communication"),
        "pull_cost_s": -dp * compute.pull_step_s,
        "outer_step_cost_s": -(last(bm, "sync_local") - last(bb, "sync_local")),
        "straggler_wait_s": -(last(bm, "straggler_wait") - last(bb, "straggler_wait")),
    }
    t_b, t_m = last(bb, "total"), last(bm, "total")
    saving = t_b - t_m
    out: dict[str, Any] = {
        "baseline": baseline,
        "method": algorithm,
        "time_baseline_s": t_b,
        "time_method_s": t_m,
        "total_saving_s": saving,
        "time_reduction": saving / t_b if t_b > 0 else 0.0,
        "speedup": t_b / t_m - 1.0 if t_m > 0 else math.inf,
        "parts_s": parts,
        "parts_fraction_of_baseline": {k: (v / t_b if t_b > 0 else 0.0) for k, v in parts.items()},
        "breakdown_baseline_s": {k: last(bb, k) for k in bb},
        "breakdown_method_s": {k: last(bm, k) for k in bm},
    }
    if "wall_s" in tb and "wall_s" in tm:
        wb, wm = last(tb, "wall_s"), last(tm, "wall_s")
        out["measured"] = {
            "time_baseline_s": wb,
            "time_method_s": wm,
            "total_saving_s": wb - wm,
            "time_reduction": (wb - wm) / wb if wb > 0 else 0.0,
            "model_error_baseline": (t_b - wb) / wb if wb > 0 else math.nan,
            "model_error_method": (t_m - wm) / wm if wm > 0 else math.nan,
        }
    return out


# ----------------------------------------------------------------------------- paper scale

#: The paper's headline results (Naganuma et al., TMLR 2025, abstract): PALSGD's
#: time-to-target reduction against DDP.
PAPER_REPORTED: dict[str, float] = {
    "resnet50-imagenet": 0.184,
    "gptneo-125m-tinystories": 0.244,
    "gptneo-8m-tinystories": 0.211,
}

#: the authors' README run (one definition: :data:`empirical.config.README_8M_RUN`), shared
#: by the two GPT-Neo settings: batch, accumulation, p, H, T0 and the steps assumption
_README = README_8M_RUN
_README_STEP: dict[str, Any] = {
    "samples_per_step": _README["batch_size"] * _README["A"],
    "A": _README["A"],
    "samples_source": f"README run: bs_per_gpu {_README['batch_size']} x grad_accu_step "
    f"{_README['A']} sequences of {_README['seq_len']} tokens",
    "p": _README["p"],
    "H": _README["H"],
    "T0": _README["T0"],
    "hyper_source": "README run (docs/reference-implementation.md §7)",
    "steps": 931,
}

#: The three settings. Numbers come from the authors' code (docs/reference-implementation.md §7)
#: unless marked; ``steps`` (the DDP steps to the target) is an assumption and matters
#: only through the share of warm-up steps.
SETTINGS: dict[str, dict[str, Any]] = {
    "resnet50-imagenet": {
        "label": "ResNet-50 / ImageNet-1K",
        "params": 25_557_032,
        "params_source": "torchvision resnet50 (He et al. 2016), = empirical.models "
        "count_parameters('resnet50-imagenet')",
        "flops_per_sample": 3 * 2 * 4.09e9,
        "flops_source": "forward 4.09e9 multiply-accumulates per 224x224 image (torchvision "
        "ResNet50_Weights.IMAGENET1K_V1 'GFLOPS 4.09'; He et al. 2016 Table 1: "
        "3.8e9), 2 FLOP per multiply-accumulate, training = 3x forward "
        "(backward ~ 2x forward)",
        "samples_per_step": 128 * 16,
        "A": 16,
        "samples_source": "authors' ImageNet argparse defaults: bs_per_gpu 128 x grad_accu_step 16",
        "p": 0.1,
        "H": 100,
        "T0": 100,
        "hyper_source": "authors' ImageNet argparse defaults (prob_no_grad 0.1, sync_interval "
        "100, local_sgd_start_iter 100); the paper's run may differ",
        "steps": 90 * 156,
        "steps_source": "assumption: 90 epochs x 156 steps/epoch (authors' defaults at K = 4)",
        "utilisation": 0.40,
        "utilisation_source": "assumption: 40% of peak tensor throughput",
    },
    "gptneo-125m-tinystories": {
        "label": "GPT-Neo-125M / TinyStories",
        "params": 124_412_160,
        "params_source": "gptneo_125m.yaml, recomputed (docs/reference-implementation.md §7)",
        "layers": 12,
        "d_model": 768,
        "ctx": _README["seq_len"],
        "flops_per_sample": None,
        "flops_source": "6 N per token (Kaplan et al. 2020, §2.1; N includes the tied output "
        "embedding) + 6 n_layer n_ctx d_model per token for attention scores "
        "(Kaplan et al. 2020, Table 1), x 300 tokens per sequence",
        **_README_STEP,
        "steps_source": "assumption: one epoch of TinyStories at the README batch "
        "(docs/reference-implementation.md §7)",
        "utilisation": 0.40,
        "utilisation_source": "assumption: 40% of peak tensor throughput",
    },
    "gptneo-8m-tinystories": {
        "label": "GPT-Neo-8M / TinyStories",
        "params": 8_054_656,
        "params_source": "gptneo_8m.yaml, recomputed (docs/reference-implementation.md §7)",
        "layers": 8,
        "d_model": 128,
        "ctx": _README["seq_len"],
        "flops_per_sample": None,
        "flops_source": "as for gptneo-125m-tinystories",
        **_README_STEP,
        "steps_source": "assumption: one epoch of TinyStories at the README batch",
        "utilisation": 0.10,
        "utilisation_source": "assumption: 10% of peak (hidden size 128: small matrix "
        "products run far from peak)",
    },
}

#: bytes moved per parameter by the O(d) updates (fp32 tensors), for memory-bound time:
#: AdamW reads param, grad, two moments and writes param and two moments (7 x 4 bytes);
#: a pull (lerp) reads x and z and writes x (3 x 4); a sync copies x into a flat buffer,
#: forms Delta, runs Nesterov SGD and copies back (about 10 x 4). Assumptions of the model.
BYTES_PER_PARAM = {"adamw": 28.0, "pull": 12.0, "sync": 40.0}


def _setting(name: str) -> dict[str, Any]:
    if not isinstance(name, str) or name not in SETTINGS:
        raise UserInputError(
            f"unknown setting 'setting' = {name!r}: known settings are "
            f"{', '.join(repr(k) for k in SETTINGS)}"
        )
    s = dict(SETTINGS[name])
    if s["flops_per_sample"] is None:
        per_token = 6.0 * s["params"] + 6.0 * s["layers"] * s["ctx"] * s["d_model"]
        s["flops_per_sample"] = per_token * s["ctx"]
    return s


def gpu_compute_profile(
    flops_per_step: float,
    params: int,
    gpu: GPUSpec | str,
    utilisation: float,
    *,
    accumulation: int = 1,
) -> ComputeProfile:
    """Compute profile of one worker on a GPU from FLOPs: ``C_g = flops / (peak * util)``
    plus the memory-bound AdamW step; pulls and syncs memory-bound (:data:`BYTES_PER_PARAM`
    at the HBM bandwidth)."""
    spec = GPUS.get(gpu) if isinstance(gpu, str) else gpu
    if not isinstance(spec, GPUSpec):
        raise UserInputError(f"unknown GPU 'gpu' = {gpu!r}: known GPUs are {', '.join(GPUS)}")
    util = _number("utilisation", utilisation, low_open=True)
    if util > 1:
        raise ParameterError("utilisation", utilisation, "(0, 1]")
    flops = _number("flops_per_step", flops_per_step, low_open=True, unit="FLOP")
    inner = params * BYTES_PER_PARAM["adamw"] / spec.memory_Bps
    fb = flops / (spec.peak_flops * util)
    return ComputeProfile(
        grad_step_s=fb + inner,
        pull_step_s=params * BYTES_PER_PARAM["pull"] / spec.memory_Bps,
        inner_step_s=inner,
        sync_local_s=params * BYTES_PER_PARAM["sync"] / spec.memory_Bps,
        accumulation=accumulation,
        source=f"{flops:.3g} FLOP per step on {spec.name} at {100 * util:.0f}% of "
        f"{spec.peak_flops:.3g} FLOP/s ({spec.source}); O(d) updates at HBM bandwidth",
    )


def _expected_trace(
    steps: float, *, T0: int, H: int, p: float, K: int, coins: str, method: str
) -> dict[str, np.ndarray]:
    """One-row expected-count trace of a local method run for ``steps`` steps."""
    T0 = min(int(T0), int(steps)) if method != "local_sgd" else 0
    local = max(steps - T0, 0.0)
    syncs = math.floor(local / H)
    grad = T0 + local * (1.0 - p)
    crit = grad + syncs * _round_excess(H, p, K, coins)
    return {
        k: np.asarray([v], dtype=float)
        for k, v in {
            "step": steps,
            "grad_steps": grad,
            "pull_steps": local * p,
            "syncs": syncs,
            "warmup_steps": T0,
            "critical_grad_steps": crit,
        }.items()
    }


def paper_scale_prediction(
    setting: str,
    profile: str | ClusterProfile,
    *,
    method: str = "palsgd",
    p: float | None = None,
    H: int | None = None,
    T0: int | None = None,
    steps: int | None = None,
    step_ratio: float = 1.0,
    utilisation: float | None = None,
    gpu: str | None = None,
    coins: str = "independent",
    overlap_ddp: bool = True,
    outer_steps_per_sync: int = 1,
    bytes_per_param: int = 4,
) -> dict[str, Any]:
    """Predicted time-to-target gain of ``method`` over DDP in one of the paper's settings.

    Per-step compute from a FLOP estimate (:data:`SETTINGS`) on the profile's GPU (or
    ``gpu``) at an assumed ``utilisation``; communication from the cluster profile
    (``bytes_per_param`` 4: fp32 gradients / outer gradients); ``p``, ``H``, ``T0`` default
    to the setting's. ASSUMPTION, stated in the output: DDP needs ``steps`` steps to reach
    the target and the method ``step_ratio * steps`` (1: the same number). Returns the
    inputs, the assumptions, the per-step costs, the predicted ``time_reduction`` next to
    the paper's reported value, and the attribution (:func:`attribute_gain`).
    """
    s = _setting(setting)
    prof = profile if isinstance(profile, ClusterProfile) else cluster_profile(profile)
    _choice("method", method, LOCAL_ALGORITHMS)
    _choice("coins", coins, COIN_MODES)
    p_ = float(s["p"] if p is None else p) if method == "palsgd" else 0.0
    H_ = int(s["H"] if H is None else H)
    T0_ = int(s["T0"] if T0 is None else T0)
    steps_ = int(s["steps"] if steps is None else steps)
    validate(p=p_, H=H_, T0=T0_)
    check_int("steps", steps_, 1)
    ratio = _number("step_ratio", step_ratio, low_open=True)
    util = float(s["utilisation"] if utilisation is None else utilisation)
    gpu_name = gpu or prof.gpu
    if gpu_name not in GPUS:
        raise UserInputError(
            f"unknown GPU 'gpu' = {gpu_name!r} (profile {prof.name!r}): known GPUs are "
            f"{', '.join(GPUS)}"
        )
    A = int(s["A"])
    flops = s["flops_per_sample"] * s["samples_per_step"]
    comp = gpu_compute_profile(flops, s["params"], gpu_name, util, accumulation=A)
    nbytes = s["params"] * int(bytes_per_param)
    K = prof.K
    ddp = {
        k: np.asarray([v], dtype=float)
        for k, v in {"step": steps_, "grad_steps": steps_, "pull_steps": 0, "syncs": 0}.items()
    }
    other = _expected_trace(steps_ * ratio, T0=T0_, H=H_, p=p_, K=K, coins=coins, method=method)
    gain = attribute_gain(
        ddp,
        other,
        compute=comp,
        link=prof.link,
        K=K,
        param_bytes=nbytes,
        algorithm=method,
        overlap_ddp=overlap_ddp,
        H=H_,
        p=p_,
        coins=coins,
        outer_steps_per_sync=outer_steps_per_sync,
    )
    buckets = ddp_bucket_sizes(nbytes)
    assumptions = [
        f"both methods need the same number of steps to reach the target (step_ratio = "
        f"{ratio:g}: the method runs {ratio:g} x {steps_} steps)"
        if ratio == 1.0
        else f"the method needs step_ratio = {ratio:g} times DDP's {steps_} steps to reach the target",
        f"DDP steps to target: {s['steps_source']}",
        f"GPU utilisation {100 * util:.0f}% of peak: "
        + (s["utilisation_source"] if utilisation is None else "given by the caller"),
        f"compute per step: {s['flops_source']}",
        "pulls, inner AdamW step and sync local work are memory-bound O(d) updates "
        f"({BYTES_PER_PARAM} bytes per parameter at the HBM bandwidth)",
        f"communication: {prof.link.algorithm} all-reduce of {bytes_per_param}-byte values on "
        f"the profile's bottleneck link ({prof.link.source})",
        f"PALSGD coins: {coins} (independent: a sync waits for the worker with the most "
        "gradient steps in the round; shared: all workers pull on the same steps, as the "
        "authors' code does)"
        if method == "palsgd"
        else "no pull steps",
        "data loading, evaluation, checkpointing and stragglers other than coin imbalance "
        "are not modelled",
    ]
    return {
        "setting": setting,
        "label": s["label"],
        "profile": prof.name,
        "method": method,
        "K": K,
        "gpu": gpu_name,
        "inputs": {
            "params": s["params"],
            "params_source": s["params_source"],
            "flops_per_step_per_worker": flops,
            "samples_per_step_per_worker": s["samples_per_step"],
            "samples_source": s["samples_source"],
            "p": p_,
            "H": H_,
            "T0": T0_,
            "hyper_source": s["hyper_source"],
            "steps_ddp": steps_,
            "step_ratio": ratio,
            "utilisation": util,
            "param_bytes": nbytes,
            "coins": coins,
            "overlap_ddp": overlap_ddp,
            "outer_steps_per_sync": outer_steps_per_sync,
        },
        "assumptions": assumptions,
        "per_step": {
            "grad_step_s": comp.grad_step_s,
            "pull_step_s": comp.pull_step_s,
            "sync_local_s": comp.sync_local_s,
            "ddp_exposed_comm_s": ddp_exposed_comm(
                buckets, K, prof.link, comp.overlap_window_s, overlap_ddp
            ),
            "sync_allreduce_s": float(allreduce_time(nbytes, K, prof.link)) * outer_steps_per_sync,
        },
        "predicted_time_reduction": gain["time_reduction"],
        "predicted_speedup": gain["speedup"],
        "paper_reported_time_reduction": PAPER_REPORTED[setting],
        "attribution": gain,
    }


# ----------------------------------------------------------------------------- end-to-end check

#: the runs of :func:`emulated_link_check`: AlgorithmConfig fields plus ``T`` (steps)
CHECK_CONFIGS: dict[str, dict[str, Any]] = {
    "ddp": {"name": "ddp", "T": 32},
    "local_sgd": {"name": "local_sgd", "H": 4, "T": 64},
    "palsgd": {"name": "palsgd", "H": 4, "p": 0.3, "eta": 1.0, "seed": 3, "T": 64},
}


def _check_model(seed: int) -> Any:
    """The check's model: a 3-layer tanh MLP (76,296 parameters), seeded initialisation."""
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(seed)
    model = nn.Sequential(
        nn.Linear(32, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 8)
    )
    with torch.no_grad():
        for prm in model.parameters():
            prm.copy_(0.1 * torch.randn(prm.shape, generator=g))
    return model


def _check_worker(rank: int, world: int, spec: dict[str, Any]) -> dict[str, Any]:
    """One rank of :func:`emulated_link_check`: link calibration, then per run a compute
    calibration and the timed run."""
    import copy

    import torch
    import torch.distributed as dist
    from torch import nn

    from empirical.algorithms import AlgorithmConfig, DDPAlgorithm, build_algorithm

    g = torch.Generator().manual_seed(1000 + rank)
    data = [
        (
            torch.randn(spec["batch"], 32, generator=g),
            torch.randint(0, 8, (spec["batch"],), generator=g),
        )
        for _ in range(8)
    ]
    base = _check_model(0)

    def loss_fn(model: Any, b: Any) -> Any:
        return nn.functional.cross_entropy(model(b[0]), b[1])

    delays = {"comm_delay_s": spec["delay_s"], "comm_delay_per_byte_s": spec["delay_per_byte_s"]}
    link_times = time_allreduce(
        spec["cal_sizes"],
        repeats=spec["cal_repeats"],
        warmup=1,
        trials=3,
        delay_s=spec["delay_s"],
        delay_per_byte_s=spec["delay_per_byte_s"],
    )
    runs: dict[str, Any] = {}
    for name, kw in spec["configs"].items():
        kw = dict(kw)
        T = int(kw.pop("T"))
        # compute, right before the run: the real model's gradient step, pull and sync work
        # on a copy, both ranks at once, pausing like the communication-bound run does
        # (after every step for DDP, every H steps for the local methods)
        dist.barrier()
        burst = 1 if kw["name"] == "ddp" else int(kw.get("H", 1))
        comp = profile_compute(
            copy.deepcopy(base),
            lambda i: data[i % len(data)],
            loss_fn,
            repeats=max(spec["compute_repeats"], 2 * burst),
            warmup=2,
            idle_s=spec["delay_s"],
            burst=burst,
        )
        cfg = AlgorithmConfig(**kw, **delays)
        model = copy.deepcopy(base)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        if cfg.name == "ddp" and spec.get("bucket_cap_mb"):
            algo: Any = DDPAlgorithm(
                cfg, model, opt, ddp_kwargs={"bucket_cap_mb": spec["bucket_cap_mb"]}
            )
        else:
            algo = build_algorithm(cfg, model, opt)
        dist.barrier()
        start = time.perf_counter()
        for i in range(T):
            if algo.next_action() == "grad":
                loss_fn(algo.model, data[i % len(data)]).backward()
            algo.step()
        wall = time.perf_counter() - start
        info: dict[str, Any] = {
            "wall_s": wall,
            "compute": comp.to_dict(),
            "stats": {k: v for k, v in algo.stats.items() if k != "last_consensus"},
        }
        if cfg.name == "ddp":
            log = algo.model._get_ddp_logging_data()
            sizes = str(log.get("rebuilt_bucket_sizes") or log.get("bucket_sizes", ""))
            info["buckets"] = [float(x) for x in sizes.split(",") if x.strip()]
            info["grad_bytes"] = sum(prm.numel() * prm.element_size() for prm in model.parameters())
        else:
            # the flat buffer of a sync (parameters, floating-point buffers, one scalar)
            info["sync_bytes"] = algo.n_sync * algo.work.element_size()
        runs[name] = info
    dist.barrier()
    return {"link_times": link_times, "runs": runs}


def _slower(profiles: Sequence[ComputeProfile]) -> ComputeProfile:
    """Every DDP step and every sync waits for the slower worker: its compute profile."""
    slow = max(profiles, key=lambda c: c.grad_step_s)
    return ComputeProfile(
        grad_step_s=slow.grad_step_s,
        inner_step_s=slow.inner_step_s,
        pull_step_s=max(c.pull_step_s for c in profiles),
        sync_local_s=max(c.sync_local_s for c in profiles),
        backward_s=slow.backward_s,
        source="slower rank of: " + slow.source,
    )


def emulated_link_check(
    configs: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    batch: int = 32,
    delay_s: float = 0.06,
    delay_per_byte_s: float = 8e-8,
    cal_sizes: Sequence[int] = (16384, 262144, 1048576),
    cal_repeats: int = 4,
    compute_repeats: int = 10,
    bucket_cap_mb: float | None = None,
    world_size: int = 2,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """End-to-end check of the model on this machine: predicted vs measured wall-clock.

    Spawns ``world_size`` gloo processes on the CPU with an emulated slow link (every
    all-reduce followed by ``delay_s + bytes * delay_per_byte_s``,
    :mod:`empirical.algorithms.slowlink`). In the same processes: the link is calibrated
    (:func:`time_allreduce` through the algorithms' communicator, :func:`calibrate_link`),
    then for every run of ``configs`` (default :data:`CHECK_CONFIGS`; AlgorithmConfig fields
    plus ``T`` steps) the compute is calibrated (:func:`profile_compute` on the same model,
    idle ``delay_s`` before every step for DDP, before every ``H`` steps for the local
    methods) and the run is timed on rank 0. The prediction
    is :func:`modelled_time` of the exact step trace (:func:`step_trace`, checked against the
    run's counts), with the slower rank's compute profile and, for DDP, the buckets DDP
    built. Model: a 76k-parameter MLP, micro-batch ``batch``, AdamW.

    Returns ``{"link", "injected", "runs": {name: {measured_s, predicted_s, error,
    grad_step_s, breakdown}}}`` with ``error = predicted / measured - 1``.
    """
    from empirical.algorithms import AlgorithmConfig
    from empirical.distributed import spawn_workers

    configs = {k: dict(v) for k, v in (configs or CHECK_CONFIGS).items()}
    for name, kw in configs.items():
        if "T" not in kw:
            raise UserInputError(f"check run {name!r} is missing the field 'T'")
        validate(T=kw["T"])
        AlgorithmConfig(**{k: v for k, v in kw.items() if k != "T"})
    K = _workers(world_size)
    if K < 2:
        raise ParameterError("world_size", world_size, "integer in [2, inf)")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ParameterError("batch", batch, "integer in [1, inf)")
    spec = {
        "configs": configs,
        "batch": int(batch),
        "delay_s": _number("delay_s", delay_s),
        "delay_per_byte_s": _number("delay_per_byte_s", delay_per_byte_s),
        "cal_sizes": [int(x) for x in cal_sizes],
        "cal_repeats": int(cal_repeats),
        "compute_repeats": int(compute_repeats),
        "bucket_cap_mb": bucket_cap_mb,
    }
    res = spawn_workers(_check_worker, K, spec, timeout_s=timeout_s)
    meas = _combine_ranks(spec["cal_sizes"], [r["link_times"] for r in res], K)
    link = calibrate_link(meas, "ring", name="emulated")
    runs: dict[str, Any] = {}
    for name, kw in configs.items():
        T = int(kw["T"])
        cfg = AlgorithmConfig(**{k: v for k, v in kw.items() if k != "T"})
        run0 = res[0]["runs"][name]
        stats = run0["stats"]
        comp = _slower([ComputeProfile(**r["runs"][name]["compute"]) for r in res])
        trace = step_trace(cfg, K, T)
        for key in ("grad_steps", "pull_steps", "syncs"):
            if trace[key][-1] != stats[key]:
                raise RuntimeError(
                    f"run {name!r}: step_trace gives {key} = {trace[key][-1]}, the run "
                    f"counted {stats[key]}"
                )
        if cfg.name == "ddp":
            nbytes = float(run0["grad_bytes"])
            kw_model: dict[str, Any] = {"ddp_buckets": run0["buckets"] or None}
        else:
            nbytes = float(run0["sync_bytes"])
            kw_model = {"H": cfg.H, "p": cfg.p, "coins": cfg.coins}
        parts = time_breakdown(
            trace,
            compute=comp,
            link=link,
            K=K,
            param_bytes=nbytes,
            algorithm=cfg.name,
            overlap_ddp=True,
            **kw_model,
        )
        pred = float(parts["total"][-1])
        measured = float(run0["wall_s"])
        runs[name] = {
            "measured_s": measured,
            "predicted_s": pred,
            "error": pred / measured - 1.0,
            "grad_step_s": comp.grad_step_s,
            "steps": T,
            "param_bytes": nbytes,
            "breakdown": {k: float(v[-1]) for k, v in parts.items()},
        }
    return {
        "link": link.to_dict(),
        "link_measurements": [list(m) for m in meas],
        "injected": {"delay_s": spec["delay_s"], "delay_per_byte_s": spec["delay_per_byte_s"]},
        "world_size": K,
        "runs": runs,
    }


# ----------------------------------------------------------------------------- CLI


#: the cluster profile ``palsgd cost predict`` uses when none is given
DEFAULT_PROFILE = "64xGPU-100Gbps"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``palsgd cost {profiles,predict,check,calibrate}``."""
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("profiles", help="list the named cluster profiles (JSON)")
    pr = sub.add_parser("predict", help="paper-scale prediction of the gain over DDP (JSON)")
    pr.add_argument(
        "--setting",
        default="all",
        help=f"one of {', '.join(SETTINGS)}, or 'all' (default: all three)",
    )
    pr.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        help=f"a cluster profile name (default {DEFAULT_PROFILE}; 'palsgd cost profiles')",
    )
    pr.add_argument(
        "--profiles-file",
        default=None,
        help="YAML/JSON file with more cluster profiles {name: {K, link, gpu, source}}",
    )
    pr.add_argument("--method", default="palsgd", help=", ".join(LOCAL_ALGORITHMS))
    pr.add_argument("--p", "--prob_no_grad", dest="p", type=float, default=None)
    pr.add_argument("--H", "--sync_interval", dest="H", type=int, default=None)
    pr.add_argument("--T0", "--local_sgd_start_iter", dest="T0", type=int, default=None)
    pr.add_argument("--steps", "--T", dest="steps", type=int, default=None)
    pr.add_argument("--step-ratio", type=float, default=1.0)
    pr.add_argument("--utilisation", type=float, default=None)
    pr.add_argument("--gpu", default=None, help=", ".join(GPUS))
    pr.add_argument("--coins", default="independent", help="independent | shared")
    pr.add_argument("--no-overlap-ddp", action="store_true")
    ch = sub.add_parser(
        "check",
        help="predicted vs measured wall-clock of DDP, Local SGD and "
        "PALSGD on 2 gloo processes with an emulated slow link (JSON)",
    )
    ch.add_argument("--delay-s", type=float, default=0.06)
    ch.add_argument("--delay-per-byte-s", type=float, default=8e-8)
    ch.add_argument(
        "--steps-scale",
        type=float,
        default=1.0,
        help="multiply the steps of every run (longer runs: more precise)",
    )
    ca = sub.add_parser("calibrate", help="measure gloo all-reduce on this machine, fit a link")
    ca.add_argument("--world-size", type=int, default=2)
    ca.add_argument("--sizes", type=int, nargs="+", default=[4096, 65536, 1 << 20, 4 << 20])
    ca.add_argument("--repeats", type=int, default=10)
    ca.add_argument("--trials", type=int, default=3)
    ca.add_argument("--algorithm", default="ring", help=", ".join(ALLREDUCE_ALGORITHMS))
    for p_ in (pr, ca, ch):
        p_.add_argument("--output", default=None, help="also write the JSON here")


def _emit(obj: Any, output: str | None) -> None:
    from empirical.metrics import atomic_write_json, json_safe

    text = json.dumps(json_safe(obj), indent=2, sort_keys=True, allow_nan=False)
    print(text)
    if output:
        atomic_write_json(output, obj)


def run(args: argparse.Namespace) -> int:
    """Run ``palsgd cost``; bad input raises :class:`UserInputError` (exit 2 via the CLI)."""
    if args.action == "profiles":
        _emit(
            {k: v.to_dict() for k, v in CLUSTER_PROFILES.static().items()}
            | {LOCAL_PROFILE: "calibrated at run time ('palsgd cost calibrate')"},
            None,
        )
        return 0
    if getattr(args, "output", None):
        check_output_file(args.output, "--output")
    if args.action == "predict":
        prof: str | ClusterProfile = args.profile
        if args.profiles_file:
            extra = load_profiles(args.profiles_file)
            if args.profile in extra:
                prof = extra[args.profile]
        names = list(SETTINGS) if args.setting == "all" else [args.setting]
        preds = {
            name: paper_scale_prediction(
                name,
                prof,
                method=args.method,
                p=args.p,
                H=args.H,
                T0=args.T0,
                steps=args.steps,
                step_ratio=args.step_ratio,
                utilisation=args.utilisation,
                gpu=args.gpu,
                coins=args.coins,
                overlap_ddp=not args.no_overlap_ddp,
            )
            for name in names
        }
        _emit(preds[names[0]] if len(names) == 1 else preds, args.output)
        for name, pr_ in preds.items():
            print(
                f"{name:>24}: predicted time reduction over DDP "
                f"{100 * pr_['predicted_time_reduction']:.1f}% (paper: "
                f"{100 * pr_['paper_reported_time_reduction']:.1f}%) on {pr_['profile']}",
                file=sys.stderr,
            )
        return 0
    if args.action == "check":
        scale = _number("steps_scale", args.steps_scale, low_open=True)
        configs = {k: dict(v, T=max(1, round(v["T"] * scale))) for k, v in CHECK_CONFIGS.items()}
        print(
            "palsgd cost: timing DDP, Local SGD and PALSGD on 2 gloo processes ...", file=sys.stderr
        )
        out = emulated_link_check(
            configs, delay_s=args.delay_s, delay_per_byte_s=args.delay_per_byte_s
        )
        _emit(out, args.output)
        for name, r in out["runs"].items():
            print(
                f"{name:>10}: measured {r['measured_s']:.3f} s, predicted "
                f"{r['predicted_s']:.3f} s, error {100 * r['error']:+.1f}%",
                file=sys.stderr,
            )
        return 0
    _choice("algorithm", args.algorithm, ALLREDUCE_ALGORITHMS)
    check_int("world_size", args.world_size, 2)
    check_int("repeats", args.repeats, 1)
    check_int("trials", args.trials, 1)
    for size in args.sizes:
        _number("sizes", size, low_open=True, unit="bytes")
    print(
        f"palsgd cost: timing gloo all-reduce on {args.world_size} processes ...", file=sys.stderr
    )
    meas = measure_allreduce(
        args.sizes, world_size=args.world_size, repeats=args.repeats, trials=args.trials
    )
    link = calibrate_link(meas, args.algorithm, name="gloo-loopback")
    _emit({"measurements": [list(m) for m in meas], "link": link.to_dict()}, args.output)
    return 0
