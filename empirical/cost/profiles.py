"""Profiles of the cost model: links (alpha-beta), per-step compute, accelerators and the
named clusters, with readers for profile files. The records (:class:`LinkProfile`,
:class:`ComputeProfile`, :class:`ClusterProfile`) are :mod:`empirical.cost.profile_types`'s,
re-exported here: :mod:`empirical.cost.link_calibration`, which measures
:data:`LOCAL_PROFILE` for :data:`CLUSTER_PROFILES`, imports them from there, so the two
modules import no cycle.

Every number of a named profile is cited or marked as an assumption in its ``source``.
Units: seconds, bytes, bytes per second, FLOP/s.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import UserInputError
from core.files import read_mapping_file
from empirical.cost.profile_types import (
    ALLREDUCE_ALGORITHMS,
    LOCAL_PROFILE,
    ClusterProfile,
    ComputeProfile,
    LinkProfile,
)

__all__ = [
    "ALLREDUCE_ALGORITHMS",
    "LinkProfile",
    "ComputeProfile",
    "ClusterProfile",
    "GPUSpec",
    "GPUS",
    "LOCAL_PROFILE",
    "CLUSTER_PROFILES",
    "cluster_profile",
    "link_from_dict",
    "cluster_from_dict",
    "load_profiles",
]


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


def _calibrate_local_profile() -> ClusterProfile:
    """:func:`empirical.cost.link_calibration.calibrate_local_profile`, imported on first use
    (it needs torch; it takes the records from :mod:`empirical.cost.profile_types`)."""
    from empirical.cost.link_calibration import calibrate_local_profile

    return calibrate_local_profile()


class _ClusterProfiles(Mapping[str, ClusterProfile]):
    """The named clusters. ``"cpu-gloo-local"`` is measured on this machine the first time it
    is looked up (2 gloo processes, a few seconds; cached for the process)."""

    def __init__(self, static: Mapping[str, ClusterProfile]) -> None:
        self._static = dict(static)
        self._local: ClusterProfile | None = None

    def __getitem__(self, name: str) -> ClusterProfile:
        if name == LOCAL_PROFILE:
            if self._local is None:
                self._local = _calibrate_local_profile()
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
