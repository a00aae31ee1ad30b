"""Communication time: the alpha-beta model of one all-reduce and DDP's bucketed gradient
all-reduce overlapped with the backward pass.

All-reduce of ``n`` bytes per worker over ``K`` workers, latency ``a``, bandwidth ``B``
(Hockney, "The communication challenge for MPP", Parallel Computing 20(3), 1994):

* ``ring``: ``2 (K-1) a + 2 (K-1)/K n/B`` (reduce-scatter then all-gather around a ring;
  bandwidth optimal: Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters
  of workstations", JPDC 69(2), 2009; Thakur, Rabenseifner & Gropp, "Optimization of
  collective communication operations in MPICH", IJHPCA 19(1), 2005, §4.4).
* ``tree``: ``2 ceil(log2 K) a + 2 n/B`` (pipelined reduce then broadcast on a (double)
  binary tree, whose bandwidth term tends to ``n/B`` per phase: Sanders, Speck & Träff,
  "Two-tree algorithms for full bandwidth broadcast, reduction and scan", Parallel Computing
  35(12), 2009; NCCL's tree all-reduce).
* ``rabenseifner``: ``2 ceil(log2 K) a + 2 (K-1)/K n/B`` (recursive halving reduce-scatter +
  recursive doubling all-gather; Thakur et al. 2005, §4.4).

The arithmetic of the reduction is not modelled (it is memory-bound and small next to the
transfer on the links of interest). ``K = 1`` costs nothing.

DDP buckets its gradients (torch ``DistributedDataParallel``: the first bucket holds at
most ``1 MiB``, the others ``bucket_cap_mb = 25 MiB``; Li et al., "PyTorch Distributed:
experiences on accelerating data parallel training", VLDB 2020, §3.2); a bucket's
all-reduce starts when its gradients are ready during the last micro-batch's backward pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from core.errors import UserInputError
from core.validation import ParameterError, check_number
from empirical.cost.checks import check_workers
from empirical.cost.profile_types import LinkProfile

__all__ = [
    "DDP_FIRST_BUCKET_BYTES",
    "DDP_BUCKET_CAP_BYTES",
    "allreduce_coefficients",
    "allreduce_time",
    "ddp_bucket_sizes",
    "ddp_exposed_comm",
]

#: torch DDP's bucket limits (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES and the
#: ``bucket_cap_mb=25`` default of ``DistributedDataParallel``)
DDP_FIRST_BUCKET_BYTES = 1024 * 1024
DDP_BUCKET_CAP_BYTES = 25 * 1024 * 1024


def allreduce_coefficients(K: int, algorithm: str) -> tuple[float, float]:
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
    K = check_workers(K)
    if not isinstance(link, LinkProfile):
        raise UserInputError("'link' must be a LinkProfile")
    n = np.asarray(nbytes, dtype=float)
    if n.size and (not np.all(np.isfinite(n)) or np.any(n < 0)):
        raise ParameterError("nbytes", nbytes, "[0, inf) bytes")
    a, b = allreduce_coefficients(K, link.algorithm)
    return a * link.latency_s + b * n / link.bandwidth_Bps


def ddp_bucket_sizes(
    param_bytes: float,
    *,
    first_bucket_bytes: float = DDP_FIRST_BUCKET_BYTES,
    bucket_cap_bytes: float = DDP_BUCKET_CAP_BYTES,
) -> list[float]:
    """DDP's gradient buckets for ``param_bytes`` bytes of gradients (tensors assumed small
    next to the caps): one bucket of at most ``first_bucket_bytes``, then ``bucket_cap_bytes``
    each, the last one partial."""
    total = check_number("param_bytes", param_bytes, 0.0, unit="bytes")
    first = check_number("first_bucket_bytes", first_bucket_bytes, 0.0, low_open=True)
    cap = check_number("bucket_cap_bytes", bucket_cap_bytes, 0.0, low_open=True)
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
    window = check_number("window_s", window_s, 0.0, unit="s")
    ready = window * np.cumsum(sizes) / sizes.sum()
    finish = 0.0
    for r, t in zip(ready, times, strict=True):
        finish = max(finish, float(r)) + float(t)
    return max(finish - window, 0.0)


# ----------------------------------------------------------------------------- step traces
