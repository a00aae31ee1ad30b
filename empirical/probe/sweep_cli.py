"""``palsgd probe --sweep``: the sweep on the probed run's objective, after the probe.

The objective is the probe's ``f_P`` (:class:`empirical.probe.sweep_run.ModelObjective`: the
run's model at its initialisation, its ``K`` shards, minibatches of the run's ``A * B``
samples, ``||grad f||^2`` over the probe sets); the runs take the run's ``alpha``, ``H``,
``p`` and ``eta`` except the swept one, inner SGD and outer averaging (inside the theory
whatever the probed run used). The bound is PALSGD's (``local_sgd_ours`` at ``p = 0``) at
the constants the probe fed it (``L``, ``sigma``, ``zeta``, ``F0``) with the sweep's ``K``
and ``T``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from empirical.probe.runs import RunInfo, run_problem
from empirical.probe.settings import ProbeSettings, make_plan
from empirical.probe.sweep import SweepSpec, run_sweep, write_sweep
from empirical.probe.sweep_run import ModelObjective

__all__ = ["SweepOptions", "render_sweep", "run_probe_sweep"]


@dataclass(frozen=True)
class SweepOptions:
    """The checked ``--sweep*`` options: the axis and its values, the seeds per value, the
    steps per run and the steps between records of ``||grad f||^2``."""

    axis: str
    values: tuple[float, ...]
    seeds: int
    steps: int
    record_every: int


def run_probe_sweep(
    info: RunInfo,
    report: Mapping[str, Any],
    settings: ProbeSettings,
    opts: SweepOptions,
    out: Path,
    *,
    device: str = "cpu",
    progress: bool = True,
) -> dict[str, Any]:
    """Run the sweep on the probed run (module docstring); write ``sweep.csv``,
    ``sweep.json`` and ``sweep.png`` under ``out``; return the JSON-ready report with the
    paths."""
    cfg, alg = info.config, info.algorithm
    problem = run_problem(info, device=device)
    plan = make_plan(problem.shards, settings, iid=cfg.iid)
    objective = ModelObjective(problem, plan.probe, cfg.A * cfg.batch_size, settings.chunk_size)
    p = float(alg.get("p") or 0.0)
    spec = SweepSpec(
        opts.axis,
        opts.values,
        opts.seeds,
        opts.steps,
        opts.record_every,
        H=int(alg.get("H") or 1),
        p=p,
        eta=float(alg.get("eta") or 0.0),
        alpha=float(cfg.alpha),
    )
    values = report["theory"].get("values") or {}
    consts = {k: float(values[k]) for k in ("L", "sigma", "zeta", "F0") if k in values}
    if len(consts) < 4:
        est = report["estimates"]
        consts = {
            "L": float(est["L"]["value"]),
            "sigma": max(float(est["sigma2"]["value"]), 0.0) ** 0.5,
            "zeta": max(float(est["zeta2"]["value"]), 0.0) ** 0.5,
            "F0": float(est["F0"]["lower_bound"]),
        }
    bound = "palsgd" if opts.axis == "p" or p > 0 else "local_sgd_ours"

    def say(msg: str) -> None:
        if progress:
            print(f"palsgd probe: {msg}", file=sys.stderr)

    rep = run_sweep(
        objective, spec, consts, bound=bound, confidence=settings.confidence, progress=say
    )
    paths = write_sweep(rep, out)
    return {**asdict(rep), "files": {k: str(v) for k, v in paths.items()}}


def render_sweep(sweep: Mapping[str, Any]) -> str:
    """The sweep's lines of the text report: one per swept value, one per dependence."""
    spec = sweep["spec"]
    axis = spec["axis"]
    lines = [
        "",
        f"sweep over {axis} ({spec['seeds']} seeds x {spec['T']} steps per value; bound "
        f"{sweep['bound']} at the probed constants):",
        f"  {axis:>6} {'rate':>10} {'change':>10} {'change CI':>23} {'bound':>10} {'bound change':>12}",
    ]
    for r in sweep["rows"]:
        ci = f"[{r['change_lo']:.4g}, {r['change_hi']:.4g}]"
        lines.append(
            f"  {r[axis]:>6g} {r['rate']:>10.4g} {r['change']:>10.4g} {ci:>23} "
            f"{r['predicted']:>10.4g} {r['predicted_change']:>12.4g}"
        )
    for d in sweep["dependences"]:
        ci = d["measured_exponent_ci"]
        ex = "undefined" if d["measured_exponent"] is None else f"{d['measured_exponent']:.3g}"
        ci_s = "" if ci is None else f" [{ci[0]:.3g}, {ci[1]:.3g}]"
        pex = d["predicted_exponent"]
        lines.append(
            f"  {d['parameter']}: measured exponent {ex}{ci_s}, the bound's "
            f"{'n/a' if pex is None else f'{pex:.3g}'}: {d['verdict_text']}"
        )
    files = sweep.get("files", {})
    if files:
        lines.append(f"wrote {files['csv']}, {files['json']} and {files['png']}")
    return "\n".join(lines)
