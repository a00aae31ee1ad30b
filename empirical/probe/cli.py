"""``palsgd probe``: its options (:func:`add_arguments`) and entry point (:func:`run`)."""

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
from core.limits import MAX_STEPS, check_processes, check_steps, process_cap
from core.validation import ParameterError, check_int, with_flag
from empirical import models
from empirical.data import DATASET_NAMES

if TYPE_CHECKING:
    from empirical.probe.runs import RunInfo
    from empirical.probe.settings import ProbeSettings
    from empirical.probe.sweep_cli import SweepOptions

# torch and the modules that probe are imported by the functions that use them: `palsgd
# probe --help` and a bad flag answer before they load (tests/test_cli_startup.py)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``palsgd probe``."""
    parser.epilog = (
        "Duration: about 1.5 min at the defaults on two idle CPU cores (a 48-step run of "
        "2 ranks, then the estimates at 5 points); it grows with --steps, --points, "
        "--samples and --hvp-iters, and with the load of the machine. Progress bars on stderr."
    )
    _source_arguments(parser)
    _estimation_arguments(parser)
    _sweep_arguments(parser)
    _output_arguments(parser)


def _source_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("what to probe")
    src.add_argument(
        "--run",
        metavar="DIR",
        help="output directory of a palsgd train run "
        "(config.json, checkpoints) (default: none: a short run is trained first)",
    )
    src.add_argument(
        "--model",
        choices=models.MODEL_NAMES,
        help="model of the run to train (default: gptneo-tiny)",
    )
    src.add_argument(
        "--dataset",
        choices=DATASET_NAMES,
        help="dataset of the run to train (default: embedded-text)",
    )
    src.add_argument(
        "--data-path",
        dest="data_path",
        metavar="PATH",
        help="file or folder of the dataset (default: none; the embedded datasets need none)",
    )
    src.add_argument(
        "--train-preset",
        dest="train_preset",
        metavar="NAME",
        help="trainer preset of the run to train, one of 'palsgd train --list-presets' "
        "(default: a PALSGD run inside the theory: inner SGD, outer averaging, no clipping)",
    )
    src.add_argument(
        "--train-config",
        dest="train_config",
        metavar="FILE",
        help="trainer YAML/JSON options of the run to train, at most 4 MiB (default: none)",
    )
    src.add_argument(
        "--nproc",
        type=int,
        default=2,
        metavar="K",
        help=f"workers K of the run to train, integer in [1, {process_cap()}] on this machine "
        "(default: %(default)s)",
    )
    src.add_argument(
        "--steps",
        type=int,
        default=48,
        metavar="T",
        help=f"steps T of the run to train, integer in [1, {MAX_STEPS:.0e}] (default: %(default)s)",
    )
    src.add_argument(
        "--iid",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="i.i.d. shards (--no-iid: each worker owns a block of the data) (default: the "
        "preset's, i.i.d.)",
    )


def _estimation_arguments(parser: argparse.ArgumentParser) -> None:
    est = parser.add_argument_group("estimation")
    est.add_argument(
        "--points",
        type=int,
        default=5,
        metavar="N",
        help="trajectory points: the initial model and checkpoints, integer in [1, inf) "
        "(default: %(default)s)",
    )
    est.add_argument(
        "--samples",
        type=int,
        default=64,
        metavar="N",
        help="per-sample gradients per point for sigma^2, integer in [2, inf) (default: %(default)s)",
    )
    est.add_argument(
        "--max-samples",
        dest="max_samples",
        type=int,
        default=512,
        metavar="N",
        help="probe-set size, integer in [2, inf); all of the data when it is smaller "
        "(default: %(default)s)",
    )
    est.add_argument(
        "--hvp-samples",
        dest="hvp_samples",
        type=int,
        default=32,
        metavar="N",
        help="batch of the Hessian-vector products, integer in [1, inf) (default: %(default)s)",
    )
    est.add_argument(
        "--hvp-iters",
        dest="hvp_iters",
        type=int,
        default=20,
        metavar="N",
        help="power-iteration steps at most, integer in [1, inf) (default: %(default)s)",
    )
    est.add_argument(
        "--hvp-tol",
        dest="hvp_tol",
        type=float,
        default=1e-3,
        metavar="X",
        help="relative stopping tolerance of the power iteration, in (0, 1) (default: %(default)s)",
    )
    est.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        metavar="C",
        help="confidence level of the intervals, in (0, 1) (default: %(default)s)",
    )
    est.add_argument(
        "--f-lower",
        dest="f_lower",
        type=float,
        default=0.0,
        metavar="F",
        help="lower bound of the loss, f_star >= f_lower, in (-inf, inf) (default: "
        "%(default)s, right for cross entropy)",
    )
    est.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="S",
        help="seed of every random choice, integer in [0, inf) (default: %(default)s)",
    )
    est.add_argument(
        "--device",
        default="cpu",
        metavar="DEV",
        help="cpu, auto, cuda or cuda:N (default: %(default)s)",
    )


def _sweep_arguments(parser: argparse.ArgumentParser) -> None:
    sw = parser.add_argument_group(
        "sweep (the bound's dependences against measured ones, empirical/probe/sweep.py)"
    )
    sw.add_argument(
        "--sweep",
        metavar="NAME=V1,V2,V3",
        help="after the probe, short seeded PALSGD runs on the probe's objective at each "
        "value of H or p (at least 3 ascending values, e.g. H=1,2,4,8); the measured change "
        "of (1/T) sum ||grad f||^2 and its exponent against the bound's at the probed "
        "constants, a verdict per dependence; writes sweep.csv, sweep.json, sweep.png "
        "(default: no sweep)",
    )
    sw.add_argument(
        "--sweep-seeds",
        dest="sweep_seeds",
        type=int,
        default=3,
        metavar="N",
        help="seeded runs per swept value, integer in [3, inf) (default: %(default)s)",
    )
    sw.add_argument(
        "--sweep-steps",
        dest="sweep_steps",
        type=int,
        default=24,
        metavar="T",
        help="steps of each sweep run, integer in [2, inf) (default: %(default)s)",
    )
    sw.add_argument(
        "--sweep-record",
        dest="sweep_record",
        type=int,
        default=4,
        metavar="N",
        help="steps between records of ||grad f(xbar)||^2 in a sweep run, integer in [1, "
        "inf) (default: %(default)s)",
    )


def _output_arguments(parser: argparse.ArgumentParser) -> None:
    out = parser.add_argument_group("output")
    out.add_argument(
        "--out", metavar="DIR", help="output directory (default: RUN/probe, or runs/probe)"
    )
    out.add_argument(
        "--json", action="store_true", help="print probe.json instead of text (default: text)"
    )
    out.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="no progress bars (default: progress bars on stderr)",
    )


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
