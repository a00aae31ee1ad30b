"""``palsgd figures``: regenerate every figure of the paper (and the toolkit's checks) at once.

``palsgd figures [--scale quick|paper] [--only NAME ...] [--out DIR] [--nproc N] [--seed S]
[--dry-run] [--data NAME=PATH ...] [--runs-dir DIR] [--no-train] [--verify-report DIR]
[--profile NAME]``

1. Plan the training runs the selected figures need (:func:`paper_figures.runs.plan_runs`);
   ``--dry-run`` prints the plan and what the machine lacks for it, and stops.
2. Train the runs that are not cached in ``--runs-dir`` (default ``OUT/runs``), all in one
   ``torchrun`` launch of ``--nproc`` processes (quick: 2 gloo processes on the CPU;
   paper: one process per GPU).
3. Calibrate the cost model (cached in ``OUT/calibration.json``): quick scale, the gloo
   all-reduce with the emulated slow link (:func:`empirical.costmodel.measure_allreduce` +
   :func:`~empirical.costmodel.calibrate_link`) and each task's gradient and pull step
   (:func:`~empirical.costmodel.measure_compute`, run in ``--nproc`` concurrent processes as
   the training ranks run); paper scale, the GPU's steps and the link of ``--profile``.
4. Draw each figure (:mod:`paper_figures.figures`) into ``OUT`` with its data (CSV/JSON),
   and write ``OUT/manifest.json``: command line, versions, seed, hardware, scale, plan,
   runs (cached or trained, durations), calibration, and per figure its files and duration.

Exit codes (:mod:`theory.exitcodes`): 0 every figure drawn, 4 some figure or run failed
(listed; the others are drawn), 2 bad input (unknown figure or scale, missing run or report directory, a paper-scale
run on a machine without the GPUs or data it needs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from paper_figures import runs as R
from theory import exitcodes
from theory.validation import UserInputError, check_output_dir

__all__ = ["add_arguments", "run", "calibrate", "DEFAULT_OUT"]

DEFAULT_OUT = "figures_out"
_COST_FIGURES = {"loss_vs_time", "time_to_target", "gain_attribution", "sensitivity", "ablation"}
#: cluster profile whose link models communication at paper scale and in gain_attribution
DEFAULT_PROFILE = "64xGPU-100Gbps"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``palsgd figures``."""
    parser.epilog = (
        f"figures: {', '.join(R.FIGURES)}. Exit codes: 0 all drawn, {exitcodes.FAILED} a "
        "figure or run failed, 2 bad input (README: the exit-code table)."
    )
    parser.add_argument(
        "--scale",
        default="quick",
        metavar="SCALE",
        help="quick (tiny models, 2 CPU processes, ~5 min) or paper (the "
        "paper's models; GPUs and data sets needed). Default quick",
    )
    parser.add_argument(
        "--only", nargs="+", metavar="NAME", help="draw only these figures (default: all)"
    )
    parser.add_argument(
        "--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})"
    )
    parser.add_argument(
        "--nproc",
        type=int,
        default=None,
        help="training processes = workers K (default: 2 at quick scale, 4 at paper scale)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of every run (default 0)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the run plan and what is missing for it, then stop",
    )
    parser.add_argument(
        "--data",
        nargs="+",
        default=[],
        metavar="NAME=PATH",
        help=f"data sets of the paper scale: {', '.join(R.DATA_NAMES)}",
    )
    parser.add_argument(
        "--runs-dir",
        default=None,
        help="directory of cached runs (default OUT/runs; must exist if given)",
    )
    parser.add_argument(
        "--no-train", action="store_true", help="use cached runs only; a missing run is an error"
    )
    parser.add_argument(
        "--verify-report",
        default=None,
        metavar="DIR",
        help="draw the theory figure from this palsgd verify report instead "
        "of running the verification",
    )
    parser.add_argument(
        "--profile",
        default=None,
        help="cluster profile of the paper-scale attribution and of the "
        f"paper-scale cost model (default {DEFAULT_PROFILE})",
    )
    parser.add_argument(
        "--compute-calibration",
        choices=("runs", "measure"),
        default=None,
        help="compute per step of the cost model: from the runs' own timers "
        "(default at quick scale: this machine is shared, a separate "
        "measurement sees a different load) or measured by "
        "empirical.costmodel.measure_compute (default at paper scale)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


# ----------------------------------------------------------------------------- inputs


def _figures(only: Sequence[str] | None) -> list[str]:
    if not only:
        return list(R.FIGURES)
    bad = [f for f in only if f not in R.FIGURES]
    if bad:
        raise UserInputError(
            f"unknown figure(s) {', '.join(repr(b) for b in bad)}: valid "
            f"figures are {', '.join(R.FIGURES)}"
        )
    return [f for f in R.FIGURES if f in only]


def _parse_data(items: Sequence[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not path:
            raise UserInputError(f"--data expects NAME=PATH, got {item!r}")
        if name not in R.DATA_NAMES:
            raise UserInputError(
                f"--data: unknown data set {name!r}: valid names are {', '.join(R.DATA_NAMES)}"
            )
        out[name] = path
    return out


def _check_inputs(args: argparse.Namespace) -> tuple[str, list[str], dict[str, str], int]:
    if args.scale not in R.SCALES:
        raise UserInputError(
            f"unknown scale {args.scale!r}: valid scales are {', '.join(R.SCALES)}"
        )
    figures = _figures(args.only)
    data = _parse_data(args.data)
    nproc = args.nproc if args.nproc is not None else (2 if args.scale == "quick" else 4)
    if nproc < 1:
        raise UserInputError(f"--nproc must be >= 1, got {nproc}")
    if args.seed < 0:
        raise UserInputError(f"--seed must be >= 0, got {args.seed}")
    if args.runs_dir is not None and not Path(args.runs_dir).is_dir():
        raise UserInputError(f"runs directory '{args.runs_dir}' (--runs-dir) does not exist")
    if args.verify_report is not None and not (Path(args.verify_report) / "results.json").is_file():
        raise UserInputError(
            f"verify report '{args.verify_report}' (--verify-report) does not "
            "exist or holds no results.json"
        )
    if args.profile is not None:
        from empirical import costmodel

        static = costmodel.CLUSTER_PROFILES.static()
        if args.profile not in static:
            raise UserInputError(
                f"unknown cluster profile {args.profile!r} (--profile): valid "
                f"profiles are {', '.join(static)}"
            )
    return args.scale, figures, data, nproc


# ----------------------------------------------------------------------------- calibration


def _compute_specs(plan: R.Plan, names: Sequence[str]) -> list[dict[str, Any]]:
    specs = []
    for name in names:
        b = plan.tasks[name].base
        model = str(b["model"])
        spec: dict[str, Any] = {
            "task": name,
            "model_name": model,
            "batch_size": int(b.get("batch_size", 8)),
            "accumulation": int(b.get("A", 1)),
            "optimizer": "adamw" if b.get("optimizer", "adamw") == "adamw" else "sgd",
        }
        if model.startswith("gptneo"):
            spec["seq_len"] = int(b.get("seq_len", 64))
        else:
            spec["image_size"] = 224 if b.get("dataset") == "imagefolder" else 32
        specs.append(spec)
    return specs


def _compute_worker(
    rank: int, world: int, specs: list[dict[str, Any]], device: str, repeats: int
) -> list[dict[str, Any]]:
    from empirical import costmodel

    out = []
    for s in specs:
        kw = {k: v for k, v in s.items() if k != "task"}
        prof = costmodel.measure_compute(device=device, repeats=repeats, **kw)
        out.append(prof.to_dict())
    return out


def _merge_profiles(per_rank: Sequence[Sequence[Mapping[str, Any]]], world: int) -> list[dict]:
    """The slowest rank's time per field (a step ends when its slowest worker finishes)."""
    merged = []
    for i in range(len(per_rank[0])):
        d = dict(per_rank[0][i])
        for key in ("grad_step_s", "pull_step_s", "inner_step_s", "backward_s", "sync_local_s"):
            vals = [r[i][key] for r in per_rank if r[i].get(key) is not None]
            if vals:
                d[key] = max(vals)
        d["inner_step_s"] = min(d["inner_step_s"], d["grad_step_s"])
        d["source"] = (
            f"{d['source']}; {world} concurrent processes (as the training ranks), "
            "slowest rank per field"
        )
        merged.append(d)
    return merged


def _cal_key(plan: R.Plan, names: Sequence[str], profile: str | None) -> str:
    import hashlib

    import torch

    payload = {
        "scale": plan.scale,
        "nproc": plan.nproc,
        "profile": profile,
        "tasks": {n: dict(plan.tasks[n].base) for n in names},
        "link": R.QUICK_LINK if plan.scale == "quick" else None,
        "host": socket.gethostname(),
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[
        :16
    ]


def calibrate(
    plan: R.Plan,
    task_names: Sequence[str],
    out: Path,
    *,
    profile: str | None = None,
    compute: str = "runs",
    runs: Mapping[str, Sequence[R.RunData]] | None = None,
    log=None,
) -> Any:
    """The :class:`paper_figures.analysis.CostSetup` of this machine.

    Link: quick scale with ``K > 1``, fitted to gloo all-reduces through the emulated slow
    link (:data:`paper_figures.runs.QUICK_LINK`); paper scale, the link of the cluster
    ``profile``. Compute per task: ``"runs"``, from the finished runs' own timers
    (:func:`paper_figures.analysis.compute_from_runs`; ``runs`` maps a task to its runs);
    ``"measure"``, :func:`empirical.costmodel.measure_compute` on this machine (CPU at quick
    scale in ``K`` concurrent processes, as the training ranks run; GPU at paper scale).
    Measurements are cached in ``out/calibration.json`` while the plan, host and torch
    version stay the same.
    """
    from empirical import costmodel
    from empirical.metrics import atomic_write_json
    from paper_figures.analysis import CostSetup, compute_from_runs

    if compute not in ("runs", "measure"):
        raise UserInputError(f"unknown compute calibration {compute!r}: valid are runs, measure")
    log = log or (lambda m: print(m, file=sys.stderr))
    names = [n for n in task_names if n in plan.tasks]
    key = _cal_key(plan, names, profile)
    path = out / "calibration.json"
    cached: dict[str, Any] = {}
    if path.is_file():
        try:
            cached = json.loads(path.read_text())
        except ValueError:
            cached = {}
        if cached.get("key") != key:
            cached = {}
    details: dict[str, Any] = {"compute_calibration": compute}
    t0 = time.perf_counter()
    # ---- link
    if plan.scale == "quick":
        link = None
        if plan.nproc > 1:
            if cached.get("link"):
                link = costmodel.link_from_dict(cached["link"])
                details["allreduce_measurements"] = cached.get("allreduce_measurements")
                details["link_cached"] = True
            else:
                log(f"palsgd figures: calibrating the emulated link ({plan.nproc} gloo processes)")
                meas = costmodel.measure_allreduce(
                    (4096, 65536, 262144, 1 << 20),
                    world_size=plan.nproc,
                    repeats=6,
                    delay_s=R.QUICK_LINK["comm_delay_s"],
                    delay_per_byte_s=R.QUICK_LINK["comm_delay_per_byte_s"],
                )
                link = costmodel.calibrate_link(meas, "ring", name="gloo + emulated slow link")
                details["allreduce_measurements"] = [list(m) for m in meas]
        link_source = "link fitted to gloo all-reduces through the emulated slow link"
    else:
        prof_name = profile or DEFAULT_PROFILE
        link = costmodel.cluster_profile(prof_name).link
        link_source = f"link of cluster profile {prof_name!r}"
    # ---- compute
    profiles: dict[str, Any] = {}
    if compute == "runs":
        for name in names:
            rs = list((runs or {}).get(name, []))
            profiles[name] = compute_from_runs(rs)
        comp_source = "compute per step from the runs' own timers"
    else:
        specs = _compute_specs(plan, names)
        if cached.get("measured_compute") and all(
            s["task"] in cached["measured_compute"] for s in specs
        ):
            profs = [cached["measured_compute"][s["task"]] for s in specs]
        else:
            log(f"palsgd figures: measuring the compute of {', '.join(names)}")
            device = "cpu" if plan.scale == "quick" else "cuda"
            if plan.nproc > 1 and device == "cpu":
                from empirical.distributed import spawn_workers

                per_rank = spawn_workers(
                    _compute_worker, plan.nproc, specs, device, 8, timeout_s=900
                )
                profs = _merge_profiles(per_rank, plan.nproc)
            else:
                profs = _compute_worker(0, 1, specs, device, 10)
        profiles = {
            s["task"]: costmodel.ComputeProfile(**p) for s, p in zip(specs, profs, strict=True)
        }
        comp_source = "compute per step measured by empirical.costmodel.measure_compute"
    details["elapsed_s"] = time.perf_counter() - t0
    record = {
        "key": key,
        "link": link.to_dict() if link else cached.get("link"),
        "allreduce_measurements": details.get("allreduce_measurements"),
        "measured_compute": cached.get("measured_compute", {}),
    }
    if compute == "measure":
        record["measured_compute"] = {k: v.to_dict() for k, v in profiles.items()}
    atomic_write_json(path, record)
    return CostSetup(profiles, link, f"{plan.scale} scale: {link_source}; {comp_source}", details)


# ----------------------------------------------------------------------------- manifest


def _hardware() -> dict[str, Any]:
    hw: dict[str, Any] = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "hostname": socket.gethostname(),
    }
    try:
        hw["load_average_1_5_15_min"] = list(os.getloadavg())
    except OSError:  # pragma: no cover
        pass
    try:
        import torch

        hw["cuda"] = (
            [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if torch.cuda.is_available()
            else []
        )
        hw["torch_threads"] = torch.get_num_threads()
    except ImportError:  # pragma: no cover
        pass
    return hw


def _git_commit() -> str | None:
    import subprocess

    try:
        res = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() or None


def _print_plan(plan: R.Plan, runs_dir: Path, problems: Sequence[str]) -> None:
    dev = R._device_kind()
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
        fields = ", ".join(
            f"{k}={cfg[k]}"
            for k in ("model", "algorithm", "T", "H", "p", "eta", "outer", "gamma", "mu")
            if cfg.get(k) is not None
        )
        if r.group == "ablation":
            fields += f"; switch: {r.x}"
        print(f"  {r.name:<{width}}  [{state}]  {fields}")
    if problems:
        print("missing on this machine:")
        for p in problems:
            print(f"  - {p}")


def _carry_over(path: Path, manifest: dict[str, Any]) -> None:
    """Keep the records of figures drawn by an earlier invocation into the same directory
    at the same scale (``--only`` redraws a subset); they are marked with the command that
    drew them."""
    if not path.is_file():
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if old.get("scale") != manifest["scale"]:
        return
    for name, rec in (old.get("figures") or {}).items():
        if name not in manifest["figures"] and rec.get("status") == "ok":
            manifest["figures"][name] = dict(rec, drawn_by=rec.get("drawn_by", old.get("command")))


# ----------------------------------------------------------------------------- drawing


def _main_runs(plan: R.Plan, data: Mapping[str, R.RunData]) -> dict[str, dict[str, R.RunData]]:
    out: dict[str, dict[str, R.RunData]] = {}
    for spec in plan.runs:
        if spec.group == "main" and spec.name in data:
            out.setdefault(spec.task, {})[spec.algorithm] = data[spec.name]
    return out


def _theory_report(
    args: argparse.Namespace, scale: str, seed: int, out: Path, progress: bool
) -> Path:
    if args.verify_report:
        return Path(args.verify_report)
    from theory import verify as V
    from theory.verify.cli import QUICK

    kw: dict[str, Any] = dict(QUICK, quick=True) if scale == "quick" else {}
    settings = V.VerifySettings(seed=seed, **kw).validated()
    target = out / "verify"
    report = V.run_verification(settings, progress=progress)
    V.write_report(report, target)
    return target


def _draw(
    name: str,
    plan: R.Plan,
    data: Mapping[str, R.RunData],
    cost: Any,
    args: argparse.Namespace,
    out: Path,
    progress: bool,
) -> Any:
    from paper_figures import figures as F

    labels = {k: t.label for k, t in plan.tasks.items()}
    shorts = {k: t.short or t.label for k, t in plan.tasks.items()}
    main = _main_runs(plan, data)
    sweep_task = R.SWEEP_TASK[plan.scale]
    if name == "loss_vs_time":
        return F.loss_vs_time(main, cost, out, shorts)
    if name == "time_to_target":
        return F.time_to_target_figure(main, cost, out, labels, shorts)
    if name == "gain_attribution":
        preds = F.paper_predictions([args.profile or DEFAULT_PROFILE])
        return F.gain_attribution(main, cost, out, shorts, predictions=preds)
    if name == "paper_scale":
        return F.paper_scale(out)
    if name == "sensitivity":
        sweeps = {
            k: [data[s.name] for s in plan.by_group(sweep_task, f"sweep_{k}") if s.name in data]
            for k in ("H", "p")
        }
        return F.sensitivity(
            main.get(sweep_task, {}),
            sweeps,
            cost,
            out,
            defaults=dict(plan.tasks[sweep_task].local),
            task_label=labels[sweep_task],
        )
    if name == "ablation":
        specs = plan.by_group(sweep_task, "ablation")
        base = next((data.get(s.name) for s in specs if s.x == "none"), None)
        variants = [data[s.name] for s in specs if s.x != "none" and s.name in data]
        return F.ablation(base, variants, cost, out, task_label=labels[sweep_task])
    if name == "theory":
        report = _theory_report(args, plan.scale, plan.seed, out, progress)
        return F.theory(report, out)
    raise UserInputError(f"unknown figure {name!r}")  # pragma: no cover - checked before


def run(args: argparse.Namespace) -> int:
    """Entry point of ``palsgd figures`` (see the module docstring for exit codes)."""
    started = time.perf_counter()
    scale, figures, data_paths, nproc = _check_inputs(args)
    out = Path(args.out)
    runs_dir = Path(args.runs_dir) if args.runs_dir else out / "runs"
    plan = R.plan_runs(scale, figures, seed=args.seed, nproc=nproc, data=data_paths)
    problems = R.check_paper_requirements(plan, data_paths) if scale == "paper" else []
    if args.dry_run:
        _print_plan(plan, runs_dir, problems)
        return 0
    if problems and (plan.runs or set(figures) & _COST_FIGURES):
        raise UserInputError(
            "--scale paper cannot run on this machine: "
            + "; ".join(problems)
            + " (use --dry-run to see the plan)"
        )
    progress = not args.no_progress
    check_output_dir(out, "--out")
    if plan.runs and not args.no_train:
        check_output_dir(runs_dir, "--runs-dir" if args.runs_dir else "--out (its runs/ folder)")
    hardware_start = _hardware()
    t_runs = time.perf_counter()
    results = R.execute(plan, runs_dir, train_missing=not args.no_train, progress=progress)
    runs_elapsed = time.perf_counter() - t_runs
    loaded: dict[str, R.RunData] = {}
    for name, res in results.items():
        if res.status in ("finished", "diverged"):
            loaded[name] = R.load_run(res.directory, res.spec)
    failed_runs = sorted(n for n, r in results.items() if r.status == "failed")
    cost = None
    cal_elapsed = 0.0
    if set(figures) & _COST_FIGURES and plan.runs:
        t_cal = time.perf_counter()
        tasks = sorted({s.task for s in plan.runs})
        mode = args.compute_calibration or ("runs" if scale == "quick" else "measure")
        by_task: dict[str, list[R.RunData]] = {}
        for s in plan.runs:
            if s.group == "main" and s.name in loaded:
                by_task.setdefault(s.task, []).append(loaded[s.name])
        cost = calibrate(plan, tasks, out, profile=args.profile, compute=mode, runs=by_task)
        cal_elapsed = time.perf_counter() - t_cal
    fig_records: dict[str, Any] = {}
    failed_figs = []
    for name in figures:
        t0 = time.perf_counter()
        try:
            res = _draw(name, plan, loaded, cost, args, out, progress)
            fig_records[name] = {
                "status": "ok",
                "files": res.files,
                "data_files": res.data_files,
                "summary": res.summary,
                "notes": res.notes,
                "duration_s": round(time.perf_counter() - t0, 3),
            }
            print(
                f"palsgd figures: {name}: {', '.join(res.files + res.data_files)}", file=sys.stderr
            )
        except UserInputError as exc:
            failed_figs.append(name)
            fig_records[name] = {
                "status": "failed",
                "error": str(exc),
                "duration_s": round(time.perf_counter() - t0, 3),
            }
            print(f"palsgd figures: {name}: not drawn: {exc}", file=sys.stderr)
        except Exception as exc:  # noqa: BLE001 - recorded; the other figures are still drawn
            failed_figs.append(name)
            fig_records[name] = {
                "status": "failed",
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
                "duration_s": round(time.perf_counter() - t0, 3),
            }
            print(f"palsgd figures: {name}: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    from empirical.metrics import atomic_write_json, package_versions

    manifest = {
        "command": "palsgd figures "
        + " ".join(sys.argv[2:] if sys.argv[1:2] == ["figures"] else sys.argv[1:]),
        "argv": sys.argv,
        "options": {k: v for k, v in vars(args).items()},
        "scale": scale,
        "seed": args.seed,
        "nproc": nproc,
        "figures_requested": figures,
        "versions": package_versions(
            ("palsgd-toolkit", "torch", "numpy", "scipy", "sympy", "matplotlib", "transformers")
        ),
        "git_commit": _git_commit(),
        "hardware": {"start": hardware_start, "end": _hardware()},
        "plan": plan.to_dict(),
        "runs_dir": str(runs_dir),
        "runs": {
            n: {
                "directory": str(r.directory),
                "key": r.key,
                "status": r.status,
                "cached": r.cached,
                "elapsed_s": r.elapsed_s,
                "message": r.message,
                "group": r.spec.group,
                "algorithm": r.spec.algorithm,
            }
            for n, r in results.items()
        },
        "durations_s": {
            "training": round(runs_elapsed, 3),
            "calibration": round(cal_elapsed, 3),
            "total": round(time.perf_counter() - started, 3),
        },
        "calibration": None
        if cost is None
        else {
            "source": cost.source,
            "link": cost.link.to_dict() if cost.link else None,
            "compute": {k: v.to_dict() for k, v in cost.compute.items()},
            "details": dict(cost.details),
        },
        "figures": fig_records,
    }
    _carry_over(out / "manifest.json", manifest)
    atomic_write_json(out / "manifest.json", manifest)
    total = time.perf_counter() - started
    print(
        f"palsgd figures: {len(figures) - len(failed_figs)}/{len(figures)} figure(s) in "
        f"{out} ({total:.0f} s; manifest.json)",
        file=sys.stderr,
    )
    if failed_runs:
        print(f"palsgd figures: failed run(s): {', '.join(failed_runs)}", file=sys.stderr)
    if failed_figs:
        print(f"palsgd figures: not drawn: {', '.join(failed_figs)}", file=sys.stderr)
    return exitcodes.FAILED if (failed_figs or failed_runs) else exitcodes.OK
