"""The paper's three headline settings (Naganuma et al., TMLR 2025) and the predicted
time-to-target gain of a local method over DDP in each, on a named cluster: per-step
compute from FLOPs on the cluster's GPU, communication from its link
(:mod:`empirical.cost.comm`), expected step counts (:func:`empirical.cost.trace.expected_trace`)
and the attribution of :func:`empirical.cost.wallclock.attribute_gain`. Every number is
cited or marked as an assumption, and the assumptions travel with the prediction."""

from __future__ import annotations

from typing import Any

import numpy as np

from core.errors import UserInputError
from core.validation import ParameterError, check_choice, check_int, check_number
from empirical.config import README_8M_RUN
from empirical.cost.comm import allreduce_time, ddp_bucket_sizes, ddp_exposed_comm
from empirical.cost.profiles import GPUS, ClusterProfile, ComputeProfile, GPUSpec, cluster_profile
from empirical.cost.trace import expected_trace
from empirical.cost.wallclock import attribute_gain
from theory.algorithm import COINS, local_choices, lookup
from theory.validation import validate

__all__ = [
    "PAPER_REPORTED",
    "SETTINGS",
    "BYTES_PER_PARAM",
    "paper_setting",
    "gpu_compute_profile",
    "paper_scale_prediction",
    "explain_gap",
]

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


def paper_setting(name: str) -> dict[str, Any]:
    """A copy of :data:`SETTINGS` ``[name]`` with ``flops_per_sample`` filled in (GPT-Neo:
    ``(6 N + 6 n_layer n_ctx d_model) n_ctx``, Kaplan et al. 2020, §2.1 and Table 1)."""
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
    util = check_number("utilisation", utilisation, 0.0, low_open=True)
    if util > 1:
        raise ParameterError("utilisation", utilisation, "(0, 1]")
    flops = check_number("flops_per_step", flops_per_step, 0.0, low_open=True, unit="FLOP")
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
    s = paper_setting(setting)
    prof = profile if isinstance(profile, ClusterProfile) else cluster_profile(profile)
    check_choice("method", method, local_choices())
    check_choice("coins", coins, COINS)
    hp = _hyperparameters(s, method, p, H, T0, steps)
    ratio = check_number("step_ratio", step_ratio, 0.0, low_open=True)
    util = float(s["utilisation"] if utilisation is None else utilisation)
    gpu_name = gpu or prof.gpu
    if gpu_name not in GPUS:
        raise UserInputError(
            f"unknown GPU 'gpu' = {gpu_name!r} (profile {prof.name!r}): known GPUs are "
            f"{', '.join(GPUS)}"
        )
    flops = s["flops_per_sample"] * s["samples_per_step"]
    comp = gpu_compute_profile(flops, s["params"], gpu_name, util, accumulation=int(s["A"]))
    nbytes = s["params"] * int(bytes_per_param)
    inputs = {
        "params": s["params"],
        "params_source": s["params_source"],
        "flops_per_step_per_worker": flops,
        "samples_per_step_per_worker": s["samples_per_step"],
        "samples_source": s["samples_source"],
        "p": hp["p"],
        "H": hp["H"],
        "T0": hp["T0"],
        "hyper_source": s["hyper_source"],
        "steps_ddp": hp["steps"],
        "step_ratio": ratio,
        "utilisation": util,
        "param_bytes": nbytes,
        "coins": coins,
        "overlap_ddp": overlap_ddp,
        "outer_steps_per_sync": outer_steps_per_sync,
    }
    gain = _gain(inputs, comp, prof, method)
    return {
        "setting": setting,
        "label": s["label"],
        "profile": prof.name,
        "method": method,
        "K": prof.K,
        "gpu": gpu_name,
        "inputs": inputs,
        "assumptions": _assumptions(
            s, prof, inputs, method=method, given_util=utilisation is not None, bpp=bytes_per_param
        ),
        "per_step": _per_step(comp, prof, nbytes, overlap_ddp, outer_steps_per_sync),
        "predicted_time_reduction": gain["time_reduction"],
        "predicted_speedup": gain["speedup"],
        "paper_reported_time_reduction": PAPER_REPORTED[setting],
        "attribution": gain,
    }


def explain_gap(pred: dict[str, Any]) -> str:
    """One line on why a :func:`paper_scale_prediction` differs from the paper's reported
    gain: the model's parts (communication saved, gradient steps skipped on pulls, the wait
    for the slowest worker at syncs, as fractions of DDP's time) and the step ratio that
    would give the paper's gain at this profile (time scales with the steps)."""
    att = pred["attribution"]
    frac = att["parts_fraction_of_baseline"]
    base, method = att["time_baseline_s"], att["time_method_s"]
    ratio = pred["inputs"]["step_ratio"]
    comm = att["breakdown_baseline_s"]["communication"] / base
    needed = ratio * (1 - pred["paper_reported_time_reduction"]) * base / method
    return (
        f"why: the model counts per-step costs at {ratio:g} x DDP's steps; DDP's "
        f"communication is {100 * comm:.1f}% of its time on this link, pulls skip "
        f"{100 * frac['compute_skipped_on_pulls_s']:.1f}%, waiting for the slowest worker "
        f"costs {100 * -frac['straggler_wait_s']:.1f}%; the paper's gain needs about "
        f"{needed:.2f} x DDP's steps (--step-ratio) or a slower link (--profile)"
    )


def _gain(
    inputs: dict[str, Any], comp: ComputeProfile, prof: ClusterProfile, method: str
) -> dict[str, Any]:
    """:func:`attribute_gain` of the expected trace of ``method`` over DDP's trace."""
    steps_, K = inputs["steps_ddp"], prof.K
    T0_, H_, p_, coins = inputs["T0"], inputs["H"], inputs["p"], inputs["coins"]
    ddp = {
        k: np.asarray([v], dtype=float)
        for k, v in {"step": steps_, "grad_steps": steps_, "pull_steps": 0, "syncs": 0}.items()
    }
    other = expected_trace(
        steps_ * inputs["step_ratio"], T0=T0_, H=H_, p=p_, K=K, coins=coins, method=method
    )
    return attribute_gain(
        ddp,
        other,
        compute=comp,
        link=prof.link,
        K=K,
        param_bytes=inputs["param_bytes"],
        algorithm=method,
        overlap_ddp=inputs["overlap_ddp"],
        H=H_,
        p=p_,
        coins=coins,
        outer_steps_per_sync=inputs["outer_steps_per_sync"],
    )


def _hyperparameters(
    s: dict[str, Any], method: str, p: Any, H: Any, T0: Any, steps: Any
) -> dict[str, Any]:
    """``p`` (0 unless PALSGD), ``H``, ``T0`` and DDP's ``steps``: the caller's or the
    setting's, validated."""
    p_ = float(s["p"] if p is None else p) if lookup(method).pulls else 0.0
    H_ = int(s["H"] if H is None else H)
    T0_ = int(s["T0"] if T0 is None else T0)
    steps_ = int(s["steps"] if steps is None else steps)
    validate(p=p_, H=H_, T0=T0_)
    check_int("steps", steps_, 1)
    return {"p": p_, "H": H_, "T0": T0_, "steps": steps_}


def _assumptions(
    s: dict[str, Any],
    prof: ClusterProfile,
    inputs: dict[str, Any],
    *,
    method: str,
    given_util: bool,
    bpp: int,
) -> list[str]:
    """The stated assumptions of a :func:`paper_scale_prediction`."""
    ratio, steps_, util = inputs["step_ratio"], inputs["steps_ddp"], inputs["utilisation"]
    coins = inputs["coins"]
    return [
        f"both methods need the same number of steps to reach the target (step_ratio = "
        f"{ratio:g}: the method runs {ratio:g} x {steps_} steps)"
        if ratio == 1.0
        else f"the method needs step_ratio = {ratio:g} times DDP's {steps_} steps to reach the target",
        f"DDP steps to target: {s['steps_source']}",
        f"GPU utilisation {100 * util:.0f}% of peak: "
        + ("given by the caller" if given_util else s["utilisation_source"]),
        f"compute per step: {s['flops_source']}",
        "pulls, inner AdamW step and sync local work are memory-bound O(d) updates "
        f"({BYTES_PER_PARAM} bytes per parameter at the HBM bandwidth)",
        f"communication: {prof.link.algorithm} all-reduce of {bpp}-byte values on "
        f"the profile's bottleneck link ({prof.link.source})",
        f"PALSGD coins: {coins} (independent: a sync waits for the worker with the most "
        "gradient steps in the round; shared: all workers pull on the same steps, as the "
        "authors' code does)"
        if lookup(method).pulls
        else "no pull steps",
        "data loading, evaluation, checkpointing and stragglers other than coin imbalance "
        "are not modelled",
    ]


def _per_step(
    comp: ComputeProfile,
    prof: ClusterProfile,
    nbytes: float,
    overlap_ddp: bool,
    outer_steps_per_sync: int,
) -> dict[str, float]:
    """Per-step costs of a :func:`paper_scale_prediction` (seconds)."""
    buckets = ddp_bucket_sizes(nbytes)
    return {
        "grad_step_s": comp.grad_step_s,
        "pull_step_s": comp.pull_step_s,
        "sync_local_s": comp.sync_local_s,
        "ddp_exposed_comm_s": ddp_exposed_comm(
            buckets, prof.K, prof.link, comp.overlap_window_s, overlap_ddp
        ),
        "sync_allreduce_s": float(allreduce_time(nbytes, prof.K, prof.link)) * outer_steps_per_sync,
    }
