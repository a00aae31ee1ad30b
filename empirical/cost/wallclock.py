"""The wall-clock model of a step trace, by component, and the attribution of a local
method's time saving over a baseline.

``time = grad_steps * C_g + pull_steps * C_p + syncs * C_sync + waits + communication``
(docs/reference-implementation.md §8). DDP: one bucketed gradient all-reduce per step, the
part not hidden behind the backward pass exposed (:func:`empirical.cost.comm.ddp_exposed_comm`).
Local SGD / Post-Local SGD / DiLoCo / PALSGD (:mod:`empirical.algorithms`): one all-reduce
of the flat gradient buffer per warm-up step and ``outer_steps_per_sync`` all-reduces of
the flat parameter buffer per sync (1 in this project; the authors'
``--is_intended_impl False`` runs ``A``, docs/reference-implementation.md §4).

Overlapped sync (``sync_delay = tau``, :mod:`empirical.algorithms.overlap`): a sync's
all-reduce runs while the worker computes the ``tau`` steps after it, so only
``max(0, t_ar - window)`` of it is exposed, ``window`` being the compute of those steps
(``window_grad_steps * C_g + window_pull_steps * C_p`` of the sync, from an exact step
trace; in expectation ``tau ((1-p) C_g + p C_p)``); the rest is reported as
``communication_hidden`` (not part of ``total``). The straggler wait of PALSGD's coins is
modelled as for the blocking sync (not hidden).

Not modelled: waits caused by compute-time variability between workers (only the
imbalance of PALSGD's coins is), data loading, evaluation, checkpoints, the arithmetic
of the reduction, and the compute an overlapped all-reduce takes from the worker (a
collective progressed by host threads, as gloo's, shares the CPU with the steps).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.validation import check_choice, check_int, check_number
from empirical.cost.checks import check_workers
from empirical.cost.comm import allreduce_time, ddp_bucket_sizes, ddp_exposed_comm
from empirical.cost.profiles import ComputeProfile, LinkProfile
from empirical.cost.trace import load_trace, round_excess
from theory.algorithm import COINS, distributed_choices, lookup
from theory.validation import validate

__all__ = ["time_breakdown", "modelled_time", "attribute_gain"]


def _check_inputs(
    compute: Any, link: Any, K: Any, algorithm: Any, coins: Any, param_bytes: Any, p: Any
) -> tuple[int, float]:
    """Validated ``(K, param_bytes)`` of :func:`time_breakdown`."""
    if not isinstance(compute, ComputeProfile):
        raise UserInputError("'compute' must be a ComputeProfile")
    if not isinstance(link, LinkProfile):
        raise UserInputError("'link' must be a LinkProfile")
    K = check_workers(K)
    check_choice("algorithm", algorithm, distributed_choices())
    check_choice("coins", coins, COINS)
    nbytes = check_number("param_bytes", param_bytes, 0.0, unit="bytes")
    validate(p=p)
    return K, nbytes


def _critical_extra(
    tr: Mapping[str, np.ndarray], algorithm: str, H: int | None, p: float, K: int, coins: str
) -> np.ndarray:
    """Gradient steps on the critical path beyond this worker's, per trace row."""
    grad, syncs = tr["grad_steps"], tr["syncs"]
    if "critical_grad_steps" in tr:
        return np.maximum(tr["critical_grad_steps"] - grad, 0.0)
    if lookup(algorithm).pulls and p > 0:
        if H is None:
            raise UserInputError(
                "'H' is needed to model the sync waits of PALSGD (or give the trace a "
                "'critical_grad_steps' column, e.g. from step_trace)"
            )
        validate(H=H)
        return syncs * round_excess(int(H), float(p), K, coins)
    return np.zeros_like(grad)


def _warmup_steps(tr: Mapping[str, np.ndarray], outer_steps_per_sync: int) -> np.ndarray:
    """Warm-up (DDP) steps of a local method's trace, per row."""
    if "warmup_steps" in tr:
        return tr["warmup_steps"]
    if "allreduce_calls" in tr:
        return np.maximum(tr["allreduce_calls"] - tr["syncs"] * outer_steps_per_sync, 0.0)
    return np.zeros_like(tr["grad_steps"])


def _sync_comm(
    tr: Mapping[str, np.ndarray], t_sync: float, compute: ComputeProfile, sync_delay: int, p: float
) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative (exposed, hidden) seconds of the syncs' all-reduces, ``t_sync`` each
    (module docstring: the overlapped sync hides up to its window's compute)."""
    syncs = tr["syncs"]
    if not sync_delay:
        return syncs * t_sync, np.zeros_like(syncs)
    cg, cp = compute.grad_step_s, compute.pull_step_s
    if "window_grad_steps" in tr and "window_pull_steps" in tr:
        d_sync = np.diff(syncs, prepend=0.0)
        window = np.diff(tr["window_grad_steps"], prepend=0.0) * cg
        window += np.diff(tr["window_pull_steps"], prepend=0.0) * cp
        per = np.divide(window, d_sync, out=np.zeros_like(window), where=d_sync > 0)
        exposed = np.cumsum(d_sync * np.maximum(t_sync - per, 0.0))
    else:
        validate(p=p)
        per = sync_delay * ((1.0 - p) * cg + p * cp)
        exposed = syncs * max(t_sync - per, 0.0)
    return exposed, syncs * t_sync - exposed


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
    sync_delay: int = 0,
) -> dict[str, np.ndarray]:
    """Modelled cumulative seconds per trace row, by component.

    Components: ``grad_compute`` (``grad_steps * C_g``), ``pull_compute``
    (``pull_steps * C_p``), ``sync_local`` (``syncs * C_sync``), ``straggler_wait`` (gradient
    steps on the critical path beyond this worker's, times ``C_g - C_p``: from the trace's
    ``critical_grad_steps`` when present, else the expected excess per round
    ``E[max_k G_k] - H (1-p)``, ``G_k ~ Binomial(H, 1-p)``, for independent coins) and
    ``communication``: DDP, ``grad_steps`` exposed bucketed all-reduces (module docstring);
    local algorithms, one all-reduce of ``param_bytes`` per warm-up step (``warmup_steps``
    or ``allreduce_calls - syncs`` from the trace) and ``outer_steps_per_sync`` per sync,
    of which an overlapped sync (``sync_delay``) exposes only what its window of compute
    does not hide (module docstring; the hidden part is ``communication_hidden``).
    ``total`` is the sum of the exposed components.
    """
    tr = load_trace(trace)
    K, nbytes = _check_inputs(compute, link, K, algorithm, coins, param_bytes, p)
    check_int("outer_steps_per_sync", outer_steps_per_sync, 1)
    grad, pull, syncs = tr["grad_steps"], tr["pull_steps"], tr["syncs"]
    cg, cp = compute.grad_step_s, compute.pull_step_s
    zeros = np.zeros_like(grad)
    out = {
        "grad_compute": grad * cg,
        "pull_compute": pull * cp,
        "sync_local": zeros.copy(),
        "straggler_wait": zeros.copy(),
    }
    local = lookup(algorithm).local
    if not local:
        buckets = ddp_buckets if ddp_buckets is not None else ddp_bucket_sizes(nbytes)
        per_step = ddp_exposed_comm(buckets, K, link, compute.overlap_window_s, overlap_ddp)
        out["communication"] = grad * per_step
    else:
        warm = _warmup_steps(tr, outer_steps_per_sync)
        t_ar = float(allreduce_time(nbytes, K, link))
        tau = check_int("sync_delay", sync_delay, 0)
        exposed, hidden = _sync_comm(tr, outer_steps_per_sync * t_ar, compute, tau, p)
        out["communication"] = warm * t_ar + exposed
        out["sync_local"] = syncs * compute.sync_local_s
        extra = _critical_extra(tr, algorithm, H, p, K, coins)
        out["straggler_wait"] = extra * max(cg - cp, 0.0)
    out["total"] = sum(out[k] for k in list(out))
    if local:
        out["communication_hidden"] = hidden
    return out


def modelled_time(counts_or_metrics: Any, **kw: Any) -> np.ndarray:
    """Cumulative modelled wall-clock (seconds) at every row of a step trace.

    ``counts_or_metrics``: anything :func:`load_trace` reads. Keywords: those of
    :func:`time_breakdown`, which states the model (``compute``, ``link``, ``K``,
    ``param_bytes`` and ``algorithm`` required; ``overlap_ddp``, ``H``, ``p``, ``coins``,
    ``outer_steps_per_sync``, ``ddp_buckets`` optional).
    """
    return time_breakdown(counts_or_metrics, **kw)["total"]


def _last(d: Mapping[str, np.ndarray], k: str) -> float:
    return float(d[k][-1])


def _saving_parts(
    tb: Mapping[str, np.ndarray],
    tm: Mapping[str, np.ndarray],
    bb: Mapping[str, np.ndarray],
    bm: Mapping[str, np.ndarray],
    compute: ComputeProfile,
) -> dict[str, float]:
    """The parts of :func:`attribute_gain` from the traces and their breakdowns."""
    n_b = _last(tb, "grad_steps") + _last(tb, "pull_steps")
    n_m = _last(tm, "grad_steps") + _last(tm, "pull_steps")
    dp = _last(tm, "pull_steps") - _last(tb, "pull_steps")
    return {
        "fewer_steps_s": (n_b - n_m) * compute.grad_step_s,
        "compute_skipped_on_pulls_s": dp * compute.grad_step_s,
        "communication_saved_s": _last(bb, "communication") - _last(bm, "communication"),
        "pull_cost_s": -dp * compute.pull_step_s,
        "outer_step_cost_s": -(_last(bm, "sync_local") - _last(bb, "sync_local")),
        "straggler_wait_s": -(_last(bm, "straggler_wait") - _last(bb, "straggler_wait")),
    }


def _measured(
    tb: Mapping[str, np.ndarray], tm: Mapping[str, np.ndarray], t_b: float, t_m: float
) -> dict[str, float]:
    """Measured times of two traces with ``wall_s`` and the model's relative errors."""
    wb, wm = _last(tb, "wall_s"), _last(tm, "wall_s")
    return {
        "time_baseline_s": wb,
        "time_method_s": wm,
        "total_saving_s": wb - wm,
        "time_reduction": (wb - wm) / wb if wb > 0 else 0.0,
        "model_error_baseline": (t_b - wb) / wb if wb > 0 else math.nan,
        "model_error_method": (t_m - wm) / wm if wm > 0 else math.nan,
    }


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
    parts = _saving_parts(tb, tm, bb, bm, compute)
    t_b, t_m = _last(bb, "total"), _last(bm, "total")
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
        "breakdown_baseline_s": {k: _last(bb, k) for k in bb},
        "breakdown_method_s": {k: _last(bm, k) for k in bm},
    }
    if "wall_s" in tb and "wall_s" in tm:
        out["measured"] = _measured(tb, tm, t_b, t_m)
    return out
