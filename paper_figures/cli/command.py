"""``palsgd figures`` end to end: plan, train, calibrate, draw, write the manifest."""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from core import exitcodes
from core.errors import UserInputError
from core.files import check_output_dir
from paper_figures import runs as R
from paper_figures.cli.calibration import calibrate
from paper_figures.cli.manifest import hardware, write_manifest
from paper_figures.cli.options import COST_FIGURES, check_inputs
from paper_figures.cli.plan_view import GpuPlan, gpu_plan, print_plan
from paper_figures.runs.smoke import smoke_plan

__all__ = ["run"]


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


@dataclass(frozen=True)
class Prepared:
    """What an invocation runs: the plan, what this machine lacks for it, the runs
    directory, the figures and (paper scale) where the runs train."""

    plan: R.Plan
    problems: list[str]
    runs_dir: Path
    figures: list[str]
    gpus: GpuPlan | None


def _plan_or_refuse(args: argparse.Namespace) -> Prepared:
    """The plan, what this machine lacks for it, the runs directory, the figures and the
    GPUs; raises :class:`UserInputError` when the paper scale cannot run here."""
    scale, figures, data_paths, nproc = check_inputs(args)
    runs_dir = Path(args.runs_dir) if args.runs_dir else Path(args.out) / "runs"
    plan = R.plan_runs(scale, figures, seed=args.seed, nproc=nproc, data=data_paths)
    gp = None
    problems: list[str] = []
    if scale == "paper":
        gp = gpu_plan(args, nproc)
        if args.smoke_runs:  # embedded data: only the GPUs are needed
            plan = smoke_plan(plan, args.smoke_runs)
            runs_dir = Path(args.out) / "smoke-runs"
            problems = R.check_paper_requirements(replace(plan, runs=[]), {}, gpus=args.gpus)
        else:
            problems = R.check_paper_requirements(plan, data_paths, gpus=args.gpus)
    wants = plan.runs or (set(figures) & COST_FIGURES and not args.smoke_runs)
    if problems and not args.dry_run and wants:
        raise UserInputError(
            "--scale paper cannot run on this machine: "
            + "; ".join(problems)
            + " (use --dry-run to see the plan)"
        )
    return Prepared(plan, problems, runs_dir, figures, gp)


def _smoke(prep: Prepared) -> int:
    """``--smoke-runs``: train the shrunk runs on the GPUs and report; no figure."""
    check_output_dir(prep.runs_dir, "--out (its smoke-runs/ folder)")
    assert prep.gpus is not None
    results = R.execute(
        prep.plan,
        prep.runs_dir,
        progress=False,
        placement=prep.gpus.placement,
        gpu=prep.gpus.gpu,
    )
    failed = {n: r for n, r in results.items() if r.status not in ("finished", "diverged")}
    print(
        f"palsgd figures: smoke: {len(results) - len(failed)}/{len(results)} run(s) finished "
        f"on {prep.gpus.placement.describe()}; in {prep.runs_dir}",
        file=sys.stderr,
    )
    for name, res in failed.items():
        print(f"palsgd figures: smoke: {name} failed: {res.message}", file=sys.stderr)
    return exitcodes.FAILED if failed else exitcodes.OK


def run(args: argparse.Namespace) -> int:
    """Entry point of ``palsgd figures`` (see :mod:`paper_figures.cli` for exit codes)."""
    started = time.perf_counter()
    prep = _plan_or_refuse(args)
    plan, runs_dir, figures = prep.plan, prep.runs_dir, prep.figures
    if args.dry_run:
        print_plan(plan, runs_dir, prep.problems, prep.gpus)
        return 0
    if args.smoke_runs and prep.gpus is not None:
        return _smoke(prep)
    out = Path(args.out)
    progress = not args.no_progress
    check_output_dir(out, "--out")
    if plan.runs and not args.no_train:
        check_output_dir(runs_dir, "--runs-dir" if args.runs_dir else "--out (its runs/ folder)")
    hardware_start = hardware()
    t_runs = time.perf_counter()
    results = R.execute(
        plan,
        runs_dir,
        train_missing=not args.no_train,
        progress=progress,
        placement=prep.gpus.placement if prep.gpus else None,
        gpu=prep.gpus.gpu if prep.gpus else "A100-SXM4-80GB",
    )
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
        placement=prep.gpus.placement.to_dict() if prep.gpus else None,
    )
    print(
        f"palsgd figures: {len(figures) - len(failed_figs)}/{len(figures)} figure(s) in "
        f"{out} ({time.perf_counter() - started:.0f} s; manifest.json)",
        file=sys.stderr,
    )
    for name in failed_runs:
        res = results[name]
        print(
            f"palsgd figures: run {name} failed; its directory: {res.directory}"
            + (f" ({res.message})" if res.message else ""),
            file=sys.stderr,
        )
    if failed_figs:
        print(f"palsgd figures: not drawn: {', '.join(failed_figs)}", file=sys.stderr)
    return exitcodes.FAILED if (failed_figs or failed_runs) else exitcodes.OK
