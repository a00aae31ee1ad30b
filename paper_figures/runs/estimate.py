"""How long the runs of a paper-scale plan take on a placement: the toolkit's cost model
(:mod:`empirical.cost`) per run, and the wall time of the plan with runs side by side.

Per run: the compute of a gradient step from FLOPs (:func:`empirical.cost.gpu_compute_profile`:
``FLOP per step / (peak * utilisation)`` plus the memory-bound optimizer step), times
the ranks that share a GPU; the steps of its algorithm in expectation
(:func:`empirical.cost.trace.expected_trace`: warm-up, gradient and pull steps, syncs and
the wait for the worker with the most gradient steps); communication from an alpha-beta
all-reduce on the placement's link (:func:`empirical.cost.time_breakdown`); the
evaluations (forward passes); and a fixed start-up per launch. Every number that is not
the run's own configuration is an assumption listed by :func:`assumptions`. The estimate
is for planning (which GPUs, how many days), not a measurement: nothing here has been
checked against a GPU run (docs/paper_figures_gpus.md).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from empirical import cost as costmodel
from empirical.cost.paper import paper_setting
from empirical.cost.trace import expected_trace
from paper_figures.runs.placement import Placement
from theory.algorithm import lookup

__all__ = [
    "STARTUP_S",
    "SHARED_LINK",
    "RunEstimate",
    "ScheduledRun",
    "cost_gpu",
    "estimate_run",
    "schedule",
    "assumptions",
]

#: seconds per launch before the first step (torchrun, ``import torch``, CUDA contexts,
#: the model built): an assumption; data preparation (tokenizing TinyStories) is not counted
STARTUP_S = 30.0

#: ranks sharing GPUs all-reduce over gloo: TCP through host memory plus device-host
#: copies. Assumption (not measured on a GPU): 50 us per ring step, 2 GB/s.
SHARED_LINK = costmodel.LinkProfile(
    "gloo-host-loopback",
    50e-6,
    2e9,
    "ring",
    "assumption: gloo ring through host memory on one machine, device-host copies "
    "included; 50 us per ring step, 2 GB/s",
)
#: ranks with a GPU each (NCCL): the link of the 8-GPU NVLink node profile (assumption:
#: the GPUs of the machine are on NVLink; PCIe GPUs communicate several times slower)
_NODE_PROFILE = "8xGPU-NVLink"

#: FP32 (CUDA-core, no TF32) peak of the GPUs of :data:`empirical.cost.GPUS`: the runs of
#: the paper scale train in fp32 and the trainer does not enable TF32
_FP32_PEAK = {
    "A100-SXM4-80GB": (19.5e12, "NVIDIA A100 datasheet (2021): FP32 19.5 TFLOPS"),
    "H100-SXM5-80GB": (67e12, "NVIDIA H100 datasheet (2023): FP32 67 TFLOPS (SXM)"),
    "V100-SXM2-32GB": (15.7e12, "NVIDIA V100 datasheet (2020): FP32 15.7 TFLOPS"),
}
#: what torch reports as a GPU's name -> the entry of :data:`empirical.cost.GPUS` it is
#: estimated as (the H200 has the H100's compute and a faster memory: conservative)
_NAME_TO_GPU = (("H200", "H100-SXM5-80GB"), ("H100", "H100-SXM5-80GB"), ("A100", "A100-SXM4-80GB"))
_NAME_TO_GPU += (("V100", "V100-SXM2-32GB"),)

#: per model: (cost-model setting or None, FLOP per sample of training, parameters,
#: utilisation of the peak, source). GPT-Neo's FLOP depend on the run's sequence length.
_MODELS: dict[str, tuple[str | None, float | None, int | None, float, str]] = {
    "gptneo-8m": ("gptneo-8m-tinystories", None, None, 0.10, "setting gptneo-8m-tinystories"),
    "gptneo-125m": (
        "gptneo-125m-tinystories",
        None,
        None,
        0.40,
        "setting gptneo-125m-tinystories",
    ),
    "resnet50-imagenet": ("resnet50-imagenet", None, None, 0.40, "setting resnet50-imagenet"),
    "resnet18-cifar": (
        None,
        3 * 2 * 0.56e9,
        11_173_962,
        0.25,
        "assumption: 0.56e9 multiply-accumulates per 32x32 image (CIFAR-style ResNet-18, "
        "3x3 stem), training = 3x forward; 25% of peak (small images)",
    ),
}


@dataclass(frozen=True)
class RunEstimate:
    """The estimated seconds of one run: ``total`` = ``train`` + ``evaluation`` +
    ``startup``; ``per_step`` the mean seconds per step of training; ``None`` fields
    when the model has no cost entry (``note`` says why)."""

    total_s: float | None
    train_s: float | None = None
    evaluation_s: float | None = None
    startup_s: float = STARTUP_S
    per_step_s: float | None = None
    note: str = ""


@dataclass(frozen=True)
class ScheduledRun:
    """A run's place in the estimated schedule: its GPU set and start/end seconds."""

    name: str
    slot: int
    start_s: float
    end_s: float


def cost_gpu(device_name: str | None, profile_gpu: str) -> tuple[str, str]:
    """The :data:`empirical.cost.GPUS` entry the estimate uses, and why: the entry matching
    ``device_name`` (torch's name of GPU 0), else the cluster profile's GPU."""
    for needle, entry in _NAME_TO_GPU:
        if device_name and needle in device_name.upper():
            return entry, f"{device_name} estimated as {entry}"
    why = f"{device_name!r} has no cost entry" if device_name else "no GPU seen here"
    return profile_gpu, f"{why}: estimated as {profile_gpu} (the --profile's GPU)"


def _flops_and_params(model: str, seq_len: int) -> tuple[float, int, float] | None:
    """FLOP per training sample, parameters and utilisation of ``model`` (None: unknown)."""
    entry = _MODELS.get(model)
    if entry is None:
        return None
    setting, flops, params, util, _ = entry
    if setting is not None:
        s = paper_setting(setting)
        params = int(s["params"])
        flops = float(s["flops_per_sample"])
        if "layers" in s:  # GPT-Neo: the run's own context length
            per_token = 6.0 * params + 6.0 * s["layers"] * seq_len * s["d_model"]
            flops = per_token * seq_len
    assert flops is not None and params is not None
    return flops, params, util


def _gpu_spec(gpu: str, precision: str) -> costmodel.GPUSpec:
    spec = costmodel.GPUS[gpu]
    if precision != "fp32":
        return spec
    peak, source = _FP32_PEAK[gpu]
    return costmodel.GPUSpec(spec.name, peak, spec.memory_Bps, source)


def _trace(cfg: Mapping[str, Any], K: int) -> tuple[dict[str, np.ndarray], str, Any]:
    """The expected step trace of the run, its algorithm name and coins."""
    alg, T = str(cfg["algorithm"]), int(cfg["T"])
    if not lookup(alg).local:  # every step a gradient step and an all-reduce
        one = {"step": T, "grad_steps": T, "pull_steps": 0, "syncs": 0}
        return {k: np.asarray([v], dtype=float) for k, v in one.items()}, alg, "independent"
    coins = cfg.get("coins") or "independent"
    tr = expected_trace(
        T,
        T0=int(cfg.get("T0") or 0),
        H=int(cfg["H"]),
        p=float(cfg.get("p") or 0.0),
        K=K,
        coins=coins,
        method=alg,
    )
    return tr, alg, coins


def estimate_run(cfg: Mapping[str, Any], placement: Placement, gpu: str) -> RunEstimate:
    """The estimated duration of the run ``cfg`` (a resolved TrainConfig dict) with the
    placement's workers on the GPU ``gpu`` (an :data:`empirical.cost.GPUS` entry)."""
    fp = _flops_and_params(str(cfg["model"]), int(cfg.get("seq_len") or 0))
    if fp is None:
        return RunEstimate(None, note=f"no cost entry for model {cfg['model']!r}")
    flops, params, util = fp
    A, batch, K = int(cfg.get("A") or 1), int(cfg["batch_size"]), placement.workers
    spec = _gpu_spec(gpu, str(cfg.get("precision") or "fp32"))
    one = costmodel.gpu_compute_profile(flops * batch * A, params, spec, util, accumulation=A)
    r = placement.ranks_per_gpu  # the ranks on one GPU take turns
    comp = costmodel.ComputeProfile(
        grad_step_s=one.grad_step_s * r,
        pull_step_s=one.pull_step_s * r,
        inner_step_s=one.inner_step_s * r,
        sync_local_s=one.sync_local_s * r,
        accumulation=A,
        source=one.source,
    )
    link = SHARED_LINK if placement.shared else costmodel.cluster_profile(_NODE_PROFILE).link
    tr, alg, coins = _trace(cfg, K)
    parts = costmodel.time_breakdown(
        tr,
        compute=comp,
        link=link,
        K=K,
        param_bytes=4.0 * params,
        algorithm=alg,
        H=int(cfg["H"]) if cfg.get("H") else None,
        p=float(cfg.get("p") or 0.0),
        coins=coins,
        outer_steps_per_sync=int(cfg.get("outer_steps_per_sync") or 1),
        sync_delay=int(cfg.get("sync_delay") or 0),
    )
    train = float(parts["total"][-1])
    interval, batches = int(cfg.get("eval_interval") or 0), int(cfg.get("eval_batches") or 0)
    evals = int(cfg["T"]) // interval + 1 if interval > 0 else 0
    forward = flops / 3.0 / (spec.peak_flops * util)  # per sample, one forward pass
    evaluation = evals * batches * batch * forward * r
    total = train + evaluation + STARTUP_S
    return RunEstimate(total, train, evaluation, STARTUP_S, train / max(int(cfg["T"]), 1))


def schedule(durations: Sequence[tuple[str, float]], parallel: int) -> list[ScheduledRun]:
    """The runs in the given order, each started on the GPU set that frees first (the
    order :func:`paper_figures.runs.execute` launches them in); ``durations``: (name, s)."""
    free = [(0.0, slot) for slot in range(parallel)]
    heapq.heapify(free)
    out = []
    for name, seconds in durations:
        start, slot = heapq.heappop(free)
        out.append(ScheduledRun(name, slot, start, start + seconds))
        heapq.heappush(free, (start + seconds, slot))
    return out


def assumptions(placement: Placement, gpu_note: str) -> list[str]:
    """The assumptions behind every estimate of a plan on ``placement``."""
    link = SHARED_LINK if placement.shared else costmodel.cluster_profile(_NODE_PROFILE).link
    out = [
        f"GPU: {gpu_note}; fp32 runs at the FP32 (no TF32) peak",
        "compute per step from FLOPs at an assumed utilisation of the peak: "
        + "; ".join(f"{m} {100 * e[3]:.0f}% ({e[4]})" for m, e in _MODELS.items()),
        f"communication: {link.algorithm} all-reduce of fp32 values, {link.source}",
        f"{STARTUP_S:.0f} s of start-up per launch; data preparation, checkpoints and "
        "stragglers other than PALSGD's coins are not modelled",
    ]
    if placement.shared:
        out.insert(
            1,
            f"{placement.ranks_per_gpu} ranks on one GPU take turns: {placement.ranks_per_gpu}x "
            "a rank's compute per step (no overlap between the ranks' kernels)",
        )
    return out
