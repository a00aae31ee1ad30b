"""The records of the cost model: link (alpha-beta), per-step compute and cluster profiles,
the all-reduce algorithms and the name of the locally measured cluster.

They are shared by :mod:`empirical.cost.profiles` (the named profiles, which measures
:data:`LOCAL_PROFILE` on first use through :mod:`empirical.cost.link_calibration`) and by the
modules that build or read profiles, :mod:`empirical.cost.link_calibration` and
:mod:`empirical.cost.comm` among them; this module imports neither, so no import cycle
runs through it. Units: seconds, bytes, bytes per second.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from core.errors import UserInputError
from core.validation import ParameterError, check_choice, check_number
from empirical.cost.checks import check_workers
from theory.validation import validate

__all__ = [
    "ALLREDUCE_ALGORITHMS",
    "LOCAL_PROFILE",
    "LinkProfile",
    "ComputeProfile",
    "ClusterProfile",
]

#: the cluster profile measured on this machine when first looked up
#: (:data:`empirical.cost.profiles.CLUSTER_PROFILES`)
LOCAL_PROFILE = "cpu-gloo-local"

#: all-reduce algorithms of the alpha-beta model (:mod:`empirical.cost.comm`)
ALLREDUCE_ALGORITHMS: tuple[str, ...] = ("ring", "tree", "rabenseifner")


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
        object.__setattr__(
            self, "latency_s", check_number("latency_s", self.latency_s, 0.0, unit="s", text=True)
        )
        object.__setattr__(
            self,
            "bandwidth_Bps",
            check_number(
                "bandwidth_Bps", self.bandwidth_Bps, 0.0, low_open=True, unit="B/s", text=True
            ),
        )
        check_choice("algorithm", self.algorithm, ALLREDUCE_ALGORITHMS)

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
            object.__setattr__(
                self, name, check_number(name, getattr(self, name), 0.0, unit="s", text=True)
            )
        if self.backward_s is not None:
            object.__setattr__(
                self,
                "backward_s",
                check_number("backward_s", self.backward_s, 0.0, unit="s", text=True),
            )
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
        object.__setattr__(self, "K", check_workers(self.K))
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
