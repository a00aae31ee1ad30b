"""``palsgd figures`` end to end: plan, train, calibrate, draw, write the manifest."""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core import exitcodes
from core.errors import UserInputError
from core.files import check_output_dir
from paper_figures import runs as R
from paper_figures.cli.calibration import calibrate
from paper_figures.cli.manifest import hardware, write_manifest
from paper_figures.cli.options import COST_FIGURES, check_inputs

__all__ = ["run"]

#: the plan fields printed per run by ``--dry-run``
_PLAN_FIELDS = ("model", "algorithm", "T", "H", "p", "eta", "outer", "gamma", "mu")


def _print_plan(plan: R.Plan, runs_dir: Path, problems: Sequence[str]) -> None:
    dev = R.current_device_kind()
    print(
        f"palsgd figures plan: scale {plan.scale}, {plan.nproc} process(es), seed {plan.seed}, "
        f"{len(plan.runs)} run(s)"
    )
    for note in plan.notes:
        print(f"  note: {note}")
    width = max((len(r.name) for r in plan.runs), default=10)
    seen = set()
    for r in plan.runs:
        cfg = R.resolve_spec(r)
        key = R.run_key(cfg, plan.nproc, dev)
        d = R.run_directory(runs_dir, r, key)
        state = "cached" if R.cached(d, key) else ("same as above" if key in seen else "to train")
        seen.add(key)
        fields = ", ".join(f"{k}={cfg[k]}" for k in _PLAN_FIELDS if cfg.get(k) is not None)
        if r.group == "ablation":
            fields += f"; switch: {r.x}"
        print(f"  {r.name:<{width}}  [{state}]  {fields}")
    if problems:
        print("missing on this machine:")
        for p in problems:
            print(f"  - {p}")


def _cost_setup(
    plan: R.Plan, figures: Sequence[str], loaded: Mapping[str, R.RunData], args, out: Path
) -> Any:
    """The calibrated cost model when a drawn figure uses it (None otherwise)."""
    if not (set(figures) & COST_FIGURES and plan.runs):
        return None
    tasks = sorted({s.task for s in plan.runs})
    mode = args.compute_calibration or ("runs" if plan.scale == "quick" else "measure")
    # the main runs time the compute per step; a plan without them (--only ablation) uses
    # the runs it has (their names go into the profile's source)
    by_task: dict[str, list[R.RunData]] = {}
    fallback: dict[str, list[R.RunData]] = {}
    for s in plan.runs:
        if s.name in loaded:
            into = by_task if s.group == "main" else fallback
            into.setdefault(s.task, []).append(loaded[s.name])
    for task, runs in fallback.items():
        by_task.setdefault(task, runs)
    return calibrate(plan, tasks, out, profile=args.profile, compute=mode, runs=by_task)


def _figure_commands() -> Any:
    """:mod:`paper_figures.cli.draw`, imported when figures are drawn: matplotlib and the
    verifier add seconds to the start-up of ``--dry-run`` and of a refused option."""
    from paper_figures.cli import draw

    return draw


def _draw_one(name: str, inputs: Any) -> dict[str, Any]:
    """Draw one figure; its manifest record (``status`` ok or failed, with the error)."""
    t0 = time.perf_counter()
    try:
        res = _figure_commands().draw(name, inputs)
    except UserInputError as exc:
        print(f"palsgd figures: {name}: not drawn: {exc}", file=sys.stderr)
        return {"status": "failed", "error": str(exc), "duration_s": _since(t0)}
    except Exception as exc:  # noqa: BLE001 - recorded; the other figures are still drawn
        print(f"palsgd figures: {name}: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return {
            "status": "failed",
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
            "duration_s": _since(t0),
        }
    print(f"palsgd figures: {name}: {', '.join(res.files + res.data_files)}", file=sys.stderr)
    return {
        "status": "ok",
        "files": res.files,
        "data_files": res.data_files,
        "summary": res.summary,
        "notes": res.notes,
        "duration_s": _since(t0),
    }


def _since(t0: float) -> float:
    return round(time.perf_counter() - t0, 3)


def _plan_or_refuse(args: argparse.Namespace) -> tuple[R.Plan, list[str], Path, list[str]]:
    """The checked options' plan, the paper scale's problems here, the runs directory and
    the figures; raises :class:`UserInputError` when the paper scale cannot run here."""
    scale, figures, data_paths, nproc = check_inputs(args)
    runs_dir = Path(args.runs_dir) if args.runs_dir else Path(args.out) / "runs"
    plan = R.plan_runs(scale, figures, seed=args.seed, nproc=nproc, data=data_paths)
    problems = R.check_paper_requirements(plan, data_paths) if scale == "paper" else []
    if problems and not args.dry_run and (plan.runs or set(figures) & COST_FIGURES):
        raise UserInputError(
            "--scale paper cannot run on this machine: "
            + "; ".join(problems)
            + " (use --dry-run to see the plan)"
        )
    return plan, problems, runs_dir, figures


def run(args: argparse.Namespace) -> int:
    """Entry point of ``palsgd figures`` (see :mod:`paper_figures.cli` for exit codes)."""
    started = time.perf_counter()
    plan, problems, runs_dir, figures = _plan_or_refuse(args)
    if args.dry_run:
        _print_plan(plan, runs_dir, problems)
        return 0
    out = Path(args.out)
    progress = not args.no_progress
    check_output_dir(out, "--out")
    if plan.runs and not args.no_train:
        check_output_dir(runs_dir, "--runs-dir" if args.runs_dir else "--out (its runs/ folder)")
    hardware_start = hardware()
    t_runs = time.perf_counter()
    results = R.execute(plan, runs_dir, train_missing=not args.no_train, progress=progress)
    runs_elapsed = time.perf_counter() - t_runs
    loaded = {
        name: R.load_run(res.directory, res.spec)
        for name, res in results.items()
        if res.status in ("finished", "diverged")
    }
    failed_runs = sorted(n for n, r in results.items() if r.status == "failed")
    t_cal = time.perf_counter()
    cost = _cost_setup(plan, figures, loaded, args, out)
    cal_elapsed = time.perf_counter() - t_cal if cost is not None else 0.0
    inputs = _figure_commands().Inputs(plan, loaded, cost, args, out, progress)
    records = {name: _draw_one(name, inputs) for name in figures}
    failed_figs = [n for n, r in records.items() if r["status"] != "ok"]
    durations = {
        "training": runs_elapsed,
        "calibration": cal_elapsed,
        "total": time.perf_counter() - started,
    }
    write_manifest(
        out,
        args,
        plan=plan,
        runs_dir=runs_dir,
        results=results,
        cost=cost,
        figures=records,
        durations=durations,
        hardware_start=hardware_start,
    )
    print(
        f"palsgd figures: {len(figures) - len(failed_figs)}/{len(figures)} figure(s) in "
        f"{out} ({time.perf_counter() - started:.0f} s; manifest.json)",
        file=sys.stderr,
    )
    if failed_runs:
        print(f"palsgd figures: failed run(s): {', '.join(failed_runs)}", file=sys.stderr)
    if failed_figs:
        print(f"palsgd figures: not drawn: {', '.join(failed_figs)}", file=sys.stderr)
    return exitcodes.FAILED if (failed_figs or failed_runs) else exitcodes.OK
