"""The options of ``palsgd figures``, declared once as :class:`~core.options.Option` records
(:data:`OPTIONS`, handed to :func:`core.options.declare`), and the checks of their values
(:func:`check_inputs`, naming the option at fault)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from core import exitcodes
from core.errors import UserInputError
from core.limits import check_processes, process_cap
from core.options import Option, declare, option
from empirical import cost as costmodel
from paper_figures import runs as R

__all__ = [
    "DEFAULT_OUT",
    "DEFAULT_PROFILE",
    "COST_FIGURES",
    "OPTIONS",
    "add_arguments",
    "check_inputs",
]

DEFAULT_OUT = "figures_out"
#: the figures drawn with the calibrated cost model
COST_FIGURES = frozenset(
    {"loss_vs_time", "time_to_target", "gain_attribution", "sensitivity", "ablation"}
)
#: cluster profile whose link models communication at paper scale and in gain_attribution
DEFAULT_PROFILE = "64xGPU-100Gbps"


#: every option of ``palsgd figures``, in --help order
OPTIONS: tuple[Option, ...] = (
    option(
        "--scale",
        default="quick",
        choices=R.SCALES,
        help="quick (tiny models, 2 CPU processes, about 4-6 min on two cores) or paper (the "
        "paper's models; GPUs and data sets needed) (default: %(default)s)",
    ),
    option(
        "--only",
        nargs="+",
        choices=R.FIGURES,
        metavar="NAME",
        help="draw only these figures (default: all; names in the epilog)",
    ),
    option(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help="output directory, created if missing (default: %(default)s)",
    ),
    option(
        "--nproc",
        type=int,
        default=None,
        metavar="K",
        help="training processes = workers K, integer in [1, inf); at quick scale at most "
        f"{process_cap()} on this machine (default: 2 at quick scale, 4 at paper scale)",
    ),
    option(
        "--gpus",
        type=int,
        default=None,
        metavar="G",
        help="paper scale: GPUs to use, the first G torch sees, integer in [1, inf); with "
        "fewer than K the K workers share them (gloo), with 2K or more runs train side by "
        "side; with --dry-run on a machine without GPUs, the GPUs to plan for (default: "
        "every GPU torch sees; a dry run without GPUs plans for K)",
    ),
    option(
        "--max-parallel-runs",
        type=int,
        default=None,
        metavar="N",
        help="paper scale: at most N runs train at the same time, integer in [1, inf) "
        "(default: one per GPU set, G // GPUs per run)",
    ),
    option(
        "--smoke-runs",
        type=int,
        default=None,
        metavar="N",
        help="paper scale: train only the first N runs of the plan, shrunk to 4 steps at "
        "tiny sizes on the embedded data, on the same GPUs, workers and launches, into "
        "OUT/smoke-runs, then stop (no figure): a check of the launch before the long "
        "run, integer in [1, inf) (default: the real plan)",
    ),
    option(
        "--seed",
        type=int,
        default=0,
        metavar="S",
        help="seed of every run, integer in [0, inf) (default: %(default)s)",
    ),
    option(
        "--dry-run",
        action="store_true",
        help="print the run plan and what is missing for it, then stop (default: run it)",
    ),
    option(
        "--data",
        nargs="+",
        default=(),
        metavar="NAME=PATH",
        help=f"data sets of the paper scale, NAME one of {', '.join(R.DATA_NAMES)}; not "
        "read at quick scale (default: none)",
    ),
    option(
        "--runs-dir",
        default=None,
        metavar="DIR",
        help="directory of cached runs, must exist if given (default: OUT/runs)",
    ),
    option(
        "--no-train",
        action="store_true",
        help="use cached runs only; a missing run is an error (default: train missing runs)",
    ),
    option(
        "--verify-report",
        default=None,
        metavar="DIR",
        help="draw the theory figure from this palsgd verify report instead "
        "of running the verification (default: run it)",
    ),
    option(
        "--profile",
        default=None,
        choices=tuple(costmodel.CLUSTER_PROFILES.static()),
        metavar="NAME",
        help="cluster profile of the paper-scale attribution and of the paper-scale cost "
        f"model, one of {', '.join(costmodel.CLUSTER_PROFILES.static())} "
        f"(default: {DEFAULT_PROFILE})",
    ),
    option(
        "--compute-calibration",
        choices=("runs", "measure"),
        default=None,
        help="compute per step of the cost model: from the runs' own timers "
        "(default at quick scale: this machine is shared, a separate "
        "measurement sees a different load) or measured by "
        "empirical.cost.measure_compute (default at paper scale)",
    ),
    option("--no-progress", action="store_true", help="no progress bars (default: progress bars)"),
)


def epilog() -> str:
    """The figures' names and the exit codes, below the options in ``--help``."""
    return (
        f"figures: {', '.join(R.FIGURES)}. Exit codes: 0 all drawn, {exitcodes.FAILED} a "
        "figure or run failed, 2 bad input (README: the exit-code table)."
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``palsgd figures``: :data:`OPTIONS`, and the figures in the epilog."""
    parser.epilog = epilog()
    declare(parser, OPTIONS)


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


def _check_profile(profile: str | None) -> None:
    if profile is None:
        return
    static = costmodel.CLUSTER_PROFILES.static()
    if profile not in static:
        raise UserInputError(
            f"unknown cluster profile {profile!r} (--profile): valid "
            f"profiles are {', '.join(static)}"
        )


def check_inputs(args: argparse.Namespace) -> tuple[str, list[str], dict[str, str], int]:
    """The checked scale, figures, data paths and process count of the options; raises
    :class:`UserInputError` naming the option at fault."""
    R.check_scale(args.scale)
    figures = _figures(args.only)
    data = _parse_data(args.data)
    nproc = args.nproc if args.nproc is not None else (2 if args.scale == "quick" else 4)
    if nproc < 1:
        raise UserInputError(f"--nproc must be >= 1, got {nproc}")
    if args.scale == "quick":
        check_processes(nproc, "--nproc")
        if data:
            print(
                "palsgd figures: note: --data is not read at quick scale (the embedded data "
                "sets are used); it is for --scale paper",
                file=sys.stderr,
            )
    if args.seed < 0:
        raise UserInputError(f"--seed must be >= 0, got {args.seed}")
    if args.runs_dir is not None and not Path(args.runs_dir).is_dir():
        raise UserInputError(f"runs directory '{args.runs_dir}' (--runs-dir) does not exist")
    if args.verify_report is not None and not (Path(args.verify_report) / "results.json").is_file():
        raise UserInputError(
            f"verify report '{args.verify_report}' (--verify-report) does not "
            "exist or holds no results.json"
        )
    _check_profile(args.profile)
    _check_gpu_options(args)
    return args.scale, figures, data, nproc


#: the options read at the paper scale only
_PAPER_ONLY = ("gpus", "max_parallel_runs", "smoke_runs")


def _check_gpu_options(args: argparse.Namespace) -> None:
    """``--gpus``, ``--max-parallel-runs`` and ``--smoke-runs``: integers >= 1, paper
    scale only (a note at the quick scale, which runs on the CPU)."""
    for name in _PAPER_ONLY:
        value = getattr(args, name, None)
        flag = "--" + name.replace("_", "-")
        if value is not None and value < 1:
            raise UserInputError(f"{flag} must be >= 1, got {value}")
        if value is not None and args.scale == "quick":
            print(
                f"palsgd figures: note: {flag} is not read at quick scale (2 CPU processes); "
                "it is for --scale paper",
                file=sys.stderr,
            )
