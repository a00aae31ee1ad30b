"""``palsgd probe``: its options (:func:`add_arguments`, declared in
:mod:`empirical.probe.options`) and entry point (:func:`run`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import UserInputError
from core.files import check_output_dir
from core.io import json_safe
from core.limits import check_processes, check_steps
from core.validation import ParameterError, check_int, with_flag
from empirical import models
from empirical.data import DATASET_NAMES
from empirical.probe.options import add_arguments

if TYPE_CHECKING:
    from empirical.probe.runs import RunInfo
    from empirical.probe.settings import ProbeSettings
    from empirical.probe.sweep_cli import SweepOptions

# torch and the modules that probe are imported by the functions that use them: `palsgd
# probe --help` and a bad flag answer before they load (tests/test_cli_startup.py)

__all__ = ["add_arguments", "run"]


def _device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserInputError(f"device '{name}' requested but CUDA is not available")
    if name != "cpu" and not name.startswith("cuda"):
        raise UserInputError(f"unknown device '{name}': use cpu, cuda or cuda:N")
    return name


#: the options that are fields of :class:`ProbeSettings`
_SETTINGS = (
    "samples",
    "max_samples",
    "hvp_samples",
    "hvp_iters",
    "hvp_tol",
    "confidence",
    "f_lower",
    "seed",
)
#: the options of the run the probe trains that go to :func:`train_reference_run` as they are
_TRAIN_AS_GIVEN = ("model", "dataset", "data_path", "iid", "seed", "progress")


def _settings(args: argparse.Namespace) -> ProbeSettings:
    from empirical.probe.settings import ProbeSettings

    return ProbeSettings(**{name: getattr(args, name) for name in _SETTINGS})


def _existing_run(args: argparse.Namespace) -> tuple[RunInfo, Path]:
    """``--run DIR``: the run and the output folder (default ``DIR/probe``)."""
    from empirical.probe.runs import load_run

    given = [
        f"--{n.replace('_', '-')}"
        for n in ("model", "dataset", "data_path", "train_preset", "train_config", "iid")
        if getattr(args, n) is not None
    ]
    if given:
        raise UserInputError(
            f"--run probes an existing run; {', '.join(given)} apply only "
            "to the run the probe trains itself"
        )
    run_dir = Path(args.run)
    out = Path(args.out) if args.out else run_dir / "probe"
    info = load_run(run_dir)
    check_output_dir(out, "--out" if args.out else "--run (its probe/ folder)")
    return info, out


def _trained_run(args: argparse.Namespace, points: int) -> tuple[RunInfo, Path]:
    """Without ``--run``: train the reference run in ``OUT/run`` (default ``runs/probe``)."""
    from empirical.probe.runs import load_run, train_reference_run

    if args.model is not None:
        models.model_task(args.model)  # unknown names: UserInputError (exit 2)
    if args.dataset is not None and args.dataset not in DATASET_NAMES:
        raise UserInputError(
            f"unknown dataset '{args.dataset}': known datasets are {', '.join(DATASET_NAMES)}"
        )
    nproc = check_int("nproc", args.nproc, 1)
    if nproc > 1:
        check_processes(nproc, "--nproc")
    steps = check_int("steps", args.steps, 1)
    check_steps(steps, "--steps")
    out = Path(args.out) if args.out else Path("runs/probe")
    check_output_dir(out, "--out")
    run_dir = out / "run"
    if args.progress:
        print(
            f"palsgd probe: training the reference run in {run_dir} (K = {nproc}, T = {steps}); "
            "at the defaults the whole probe takes about 1.5 min on two idle CPU cores",
            file=sys.stderr,
        )
    train_reference_run(
        run_dir,
        nproc=nproc,
        steps=steps,
        points=points,
        preset=args.train_preset,
        config_file=args.train_config,
        **{name: getattr(args, name) for name in _TRAIN_AS_GIVEN},
    )
    return load_run(run_dir), out


def run(args: argparse.Namespace) -> int:
    """Entry point of ``palsgd probe``; 0 on success (bad input raises UserInputError)."""
    try:
        return _run(args)
    except ParameterError as exc:
        raise with_flag(exc) from None


def _run(args: argparse.Namespace) -> int:
    import torch

    from empirical.probe.report import probe_run, render, write_outputs

    settings = _settings(args)
    points = check_int("points", args.points, 1)
    device = _device(args.device)
    sweep = _sweep_options(args)
    info, out = _existing_run(args) if args.run is not None else _trained_run(args, points)
    started = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        report = probe_run(info, settings, points=points, device=device, progress=args.progress)
    report["seconds"] = time.perf_counter() - started
    paths = write_outputs(report, out)
    if sweep is not None:
        from empirical.probe.sweep_cli import run_probe_sweep

        report["sweep"] = run_probe_sweep(
            info, report, settings, sweep, out, device=device, progress=args.progress
        )
        paths = write_outputs(report, out)  # probe.json with the sweep
    if args.json:
        print(json.dumps(json_safe(report), indent=2, sort_keys=True))
    else:
        print(render(report))
        print(f"\nwrote {paths['json']} and {paths['csv']}")
        if sweep is not None:
            from empirical.probe.sweep_cli import render_sweep

            print(render_sweep(report["sweep"]))
    return 0


def _sweep_options(args: argparse.Namespace) -> SweepOptions | None:
    """The checked ``--sweep*`` options (before any training), or ``None``."""
    if args.sweep is None:
        return None
    from empirical.probe.sweep import parse_sweep
    from empirical.probe.sweep_cli import SweepOptions

    axis, values = parse_sweep(args.sweep)
    return SweepOptions(
        axis,
        values,
        check_int("sweep_seeds", args.sweep_seeds, 3),
        check_int("sweep_steps", args.sweep_steps, 2),
        check_int("sweep_record", args.sweep_record, 1),
    )
