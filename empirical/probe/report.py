"""The end-to-end probe of a run (:func:`probe_run`), its text summary (:func:`render`) and
its files (``probe.json``, ``points.csv``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from torch import nn

from core.io import atomic_write_json, write_csv
from empirical.probe.compare import (
    checker_algorithm,
    compare_with_theory,
    theory_scope,
    theory_values,
    warmup_steps,
)
from empirical.probe.runs import RunInfo, run_points, run_problem
from empirical.probe.settings import ProbeSettings
from empirical.probe.trajectory import POINT_FIELDS, ProbeResult, measured_rate, probe_points


def _theory_section(
    info: RunInfo, res: ProbeResult, model: nn.Module, T: int, T0: int
) -> dict[str, Any]:
    """``theory`` of the report: the scope of the run and, with a local phase, the checker's
    verdicts and the measured-vs-bound comparison."""
    cfg, alg = info.config, info.algorithm
    outside = theory_scope(cfg, alg, model)
    theory: dict[str, Any] = {
        "inside_theory": not outside,
        "outside": outside,
        "info": ["K = 1: a single worker, zeta = 0 trivially"] if info.world_size == 1 else [],
    }
    if T - T0 < 1:
        theory["comparison"] = []
        theory["text"] = "no local phase (T <= T0): nothing to check"
        return theory
    values = theory_values(
        res.estimates, K=info.world_size, T=T - T0, alpha=cfg.alpha, algorithm=alg, A=cfg.A
    )
    theory.update(
        compare_with_theory(
            values,
            None if res.rate is None else res.rate["value"],
            algorithm=checker_algorithm(alg),
            outside=outside,
            start_grad_sq=_start_grad_sq(res),
        )
    )
    return theory


def _start_grad_sq(res: ProbeResult) -> float | None:
    """The run's own starting ``||grad f(x0)||^2`` (the point at step 0), if probed."""
    first = min(res.points, key=lambda p: p.step)
    return float(first.grad_norm_sq) if first.step == 0 else None


def _source_section(info: RunInfo, T: int, T0: int) -> dict[str, Any]:
    """``source`` of the report: the run and its hyperparameters."""
    cfg = info.config
    return {
        "run_dir": str(info.directory),
        "model": cfg.model,
        "dataset": cfg.dataset,
        "K": info.world_size,
        "T": T,
        "T0": T0,
        "iid": cfg.iid,
        "algorithm": info.algorithm,
        "optimizer": cfg.optimizer,
        "alpha": cfg.alpha,
        "A": cfg.A,
        "batch_size": cfg.batch_size,
        "checkpoints": [s for s, _ in info.checkpoints],
    }


def probe_run(
    info: RunInfo,
    settings: ProbeSettings,
    *,
    points: int = 5,
    device: str = "cpu",
    progress: bool = True,
) -> dict[str, Any]:
    """Probe a run end to end: constants at its points, measured rate, theory check."""
    cfg = info.config
    problem = run_problem(info, device=device)
    settings = ProbeSettings(**{**asdict(settings), "step_batch": cfg.A * cfg.batch_size})
    pts = run_points(info, problem, points)
    res = probe_points(problem, pts, settings, iid=cfg.iid, progress=progress)
    T0, T = warmup_steps(info.algorithm), info.steps_done
    res.rate = measured_rate(res.points, T, T0)
    theory = _theory_section(info, res, problem.model, T, T0)
    best_eval = info.best_eval_loss()
    if best_eval is not None:
        res.estimates["F0"]["best_eval_loss"] = best_eval
    return {
        "probe_version": 1,
        "source": _source_section(info, T, T0),
        "objective": {
            "definition": "f = (1/K) sum_k f_k, f_k = mean over the probe set P_k of shard k "
            "of the per-sample loss (language models: per-sequence mean token "
            "cross entropy); model in eval mode",
            "split": "train",
            "num_samples": len(problem.dataset),
            "parameters": problem.dim,
            "exact": res.plan.probe_sizes == res.plan.shard_sizes,
            **res.plan.to_dict(),
        },
        "settings": asdict(res.settings),
        "points": [asdict(p) for p in res.points],
        "estimates": res.estimates,
        "measured_rate": res.rate,
        "theory": theory,
    }


# ----------------------------------------------------------------------------- output
def _fmt(x: Any, spec: str = ".4g") -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return format(x, spec) if isinstance(x, int | float) else str(x)


def render(report: Mapping[str, Any]) -> str:
    """The readable summary printed by ``palsgd probe``."""
    src, obj, est = report["source"], report["objective"], report["estimates"]
    lines = [
        f"palsgd probe: {src['model']} on {src['dataset']}, K = {src['K']} "
        f"({'i.i.d.' if src['iid'] else 'non-i.i.d.'} shards), {src['algorithm']['name']}, "
        f"T = {src['T']}, run {src['run_dir']}",
        f"objective: {obj['definition']}",
        f"  probe set {sum(obj['probe_sizes'])} of {sum(obj['shard_sizes'])} sharded samples "
        f"({'exact' if obj['exact'] else 'subsampled'}); {obj['parameters']} parameters; "
        f"{sum(obj['noise_sizes'])} per-sample gradients and a Hessian batch of "
        f"{obj['hvp_size']} per point",
        "",
        f"{'step':>6} {'loss':>8} {'||grad f||^2':>12} {'L power':>9} {'L secant':>9} "
        f"{'sigma2 step':>11} {'zeta2':>10}",
    ]
    for p in report["points"]:
        lines.append(
            f"{p['step']:>6} {_fmt(p['loss'], '.4f'):>8} {_fmt(p['grad_norm_sq'], '.4g'):>12} "
            f"{_fmt(p['L_power'], '.4g'):>9} {_fmt(p['L_secant'], '.4g'):>9} "
            f"{_fmt(p['sigma2_step'], '.4g'):>11} {_fmt(p['zeta2'], '.3g'):>10}"
        )
    L, s2, z2, f0 = est["L"], est["sigma2"], est["zeta2"], est["F0"]
    lines += [
        "",
        "constants fed to the bound:",
        f"  L       = {_fmt(L['value'])}  (power max {_fmt(L['power_max'])} at step "
        f"{L['power_max_step']}, secant max {_fmt(L['secant_max'])}; a local lower estimate "
        "of the global L)",
        f"  sigma^2 = {_fmt(s2['value'])}  [{_fmt(s2['ci'][0])}, {_fmt(s2['ci'][1])}] "
        f"({100 * s2['confidence']:.0f}% CI) for a step of {s2['step_batch']} samples; per "
        f"sample {_fmt(s2['per_sample'])}; {s2['pooling']}",
        f"  zeta^2  = {_fmt(z2['value'])}  ({z2['fed']}; measured {_fmt(z2['measured'])} = raw "
        f"{_fmt(z2['raw'])} - noise {_fmt(z2['noise'])})",
        f"  F0      = {_fmt(f0['lower_bound'])}  (f(x0) = {_fmt(f0['f_x0'])} +- "
        f"{_fmt(f0['f_x0_se'])} minus f_lower = {_fmt(f0['f_lower'])}; best loss in the run "
        f"{_fmt(f0['best_loss'])} at step {f0['best_loss_step']} gives "
        f"{_fmt(f0['reference'])}, reported only)",
    ]
    rate = report.get("measured_rate")
    if rate is None:
        lines.append("measured rate: n/a (no recorded point in the local phase)")
    else:
        lines.append(
            f"measured (1/T) sum ||grad f(xbar_t)||^2 = {_fmt(rate['value'])} over steps "
            f"[{rate['covered'][0]}, {rate['covered'][1]}) from {len(rate['points'])} points "
            "(replayed checkpoints, left Riemann sum)"
        )
    lines += _render_theory(report["theory"])
    return "\n".join(lines)


def _render_theory(th: Mapping[str, Any]) -> list[str]:
    """The scope of the run and the measured-vs-bound lines of :func:`render`."""
    lines = [""]
    if th["inside_theory"]:
        lines.append(
            "theory: the run is inside the assumptions of the bounds "
            "(SGD inside, plain averaging, independent coins, no clipping)"
        )
    else:
        lines.append("theory: the run is OUTSIDE the theory; the numbers are an indication:")
        lines += [f"  - {o}" for o in th["outside"]]
    lines += [f"  info: {o}" for o in th.get("info", [])]
    if th.get("text"):
        lines += ["", th["text"]]
    comp = th.get("comparison") or []
    if comp:
        lines += ["", "measured vs bound:"]
        for c in comp:
            lines.append(
                f"  {c['bound']}: bound {_fmt(c['value'])}, measured "
                f"{_fmt(c['measured'])}, ratio {_fmt(c['ratio'])}: {c['verdict']}"
            )
    elif th.get("check") is not None:
        lines += ["", "measured vs bound: no bound was evaluated for this configuration"]
    return lines


def write_outputs(report: Mapping[str, Any], out: Path) -> dict[str, Path]:
    """``probe.json`` (everything) and ``points.csv`` (:data:`POINT_FIELDS`) under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    js = atomic_write_json(out / "probe.json", report)
    path = write_csv(out / "points.csv", report["points"], POINT_FIELDS)
    return {"json": js, "csv": path}
