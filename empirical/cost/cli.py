"""``palsgd cost {profiles,predict,check,calibrate}``: the cost model's command line.

``check`` and ``calibrate`` time gloo processes and need torch; their modules are imported
when the action runs, so that ``profiles`` and ``predict`` start without it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from empirical.cost.checks import check_choice, check_number
from empirical.cost.paper import SETTINGS, paper_scale_prediction
from empirical.cost.profiles import (
    ALLREDUCE_ALGORITHMS,
    CLUSTER_PROFILES,
    GPUS,
    LOCAL_PROFILE,
    ClusterProfile,
    load_profiles,
)
from theory.algorithm import LOCAL_NAMES
from theory.io import atomic_write_json, json_safe
from theory.validation import check_int, check_output_file

__all__ = ["DEFAULT_PROFILE", "add_arguments", "run"]

#: the cluster profile ``palsgd cost predict`` uses when none is given
DEFAULT_PROFILE = "64xGPU-100Gbps"
#: the options of ``predict`` passed on to :func:`paper_scale_prediction` under their names
_PREDICT_OPTIONS = ("method", "p", "H", "T0", "steps", "step_ratio", "utilisation", "gpu", "coins")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``palsgd cost {profiles,predict,check,calibrate}``."""
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("profiles", help="list the named cluster profiles (JSON)")
    pr = sub.add_parser("predict", help="paper-scale prediction of the gain over DDP (JSON)")
    pr.add_argument(
        "--setting",
        default="all",
        help=f"one of {', '.join(SETTINGS)}, or 'all' (default: all three)",
    )
    pr.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        help=f"a cluster profile name (default {DEFAULT_PROFILE}; 'palsgd cost profiles')",
    )
    pr.add_argument(
        "--profiles-file",
        default=None,
        help="YAML/JSON file with more cluster profiles {name: {K, link, gpu, source}}",
    )
    pr.add_argument("--method", default="palsgd", help=", ".join(LOCAL_NAMES))
    pr.add_argument("--p", "--prob_no_grad", dest="p", type=float, default=None)
    pr.add_argument("--H", "--sync_interval", dest="H", type=int, default=None)
    pr.add_argument("--T0", "--local_sgd_start_iter", dest="T0", type=int, default=None)
    pr.add_argument("--steps", "--T", dest="steps", type=int, default=None)
    pr.add_argument("--step-ratio", type=float, default=1.0)
    pr.add_argument("--utilisation", type=float, default=None)
    pr.add_argument("--gpu", default=None, help=", ".join(GPUS))
    pr.add_argument("--coins", default="independent", help="independent | shared")
    pr.add_argument("--no-overlap-ddp", action="store_true")
    ch = sub.add_parser(
        "check",
        help="predicted vs measured wall-clock of DDP, Local SGD and "
        "PALSGD on 2 gloo processes with an emulated slow link (JSON)",
    )
    ch.add_argument("--delay-s", type=float, default=0.06)
    ch.add_argument("--delay-per-byte-s", type=float, default=8e-8)
    ch.add_argument(
        "--steps-scale",
        type=float,
        default=1.0,
        help="multiply the steps of every run (longer runs: more precise)",
    )
    ca = sub.add_parser("calibrate", help="measure gloo all-reduce on this machine, fit a link")
    ca.add_argument("--world-size", type=int, default=2)
    ca.add_argument("--sizes", type=int, nargs="+", default=[4096, 65536, 1 << 20, 4 << 20])
    ca.add_argument("--repeats", type=int, default=10)
    ca.add_argument("--trials", type=int, default=3)
    ca.add_argument("--algorithm", default="ring", help=", ".join(ALLREDUCE_ALGORITHMS))
    for p_ in (pr, ca, ch):
        p_.add_argument("--output", default=None, help="also write the JSON here")


def _emit(obj: Any, output: str | None) -> None:
    text = json.dumps(json_safe(obj), indent=2, sort_keys=True, allow_nan=False)
    print(text)
    if output:
        atomic_write_json(output, obj)


def _profiles(args: argparse.Namespace) -> int:
    _emit(
        {k: v.to_dict() for k, v in CLUSTER_PROFILES.static().items()}
        | {LOCAL_PROFILE: "calibrated at run time ('palsgd cost calibrate')"},
        None,
    )
    return 0


def _predict(args: argparse.Namespace) -> int:
    prof: str | ClusterProfile = args.profile
    if args.profiles_file:
        extra = load_profiles(args.profiles_file)
        if args.profile in extra:
            prof = extra[args.profile]
    names = list(SETTINGS) if args.setting == "all" else [args.setting]
    options = {k: getattr(args, k) for k in _PREDICT_OPTIONS}
    preds = {
        name: paper_scale_prediction(name, prof, **options, overlap_ddp=not args.no_overlap_ddp)
        for name in names
    }
    _emit(preds[names[0]] if len(names) == 1 else preds, args.output)
    for name, pr_ in preds.items():
        print(
            f"{name:>24}: predicted time reduction over DDP "
            f"{100 * pr_['predicted_time_reduction']:.1f}% (paper: "
            f"{100 * pr_['paper_reported_time_reduction']:.1f}%) on {pr_['profile']}",
            file=sys.stderr,
        )
    return 0


def _check(args: argparse.Namespace) -> int:
    from empirical.cost.check import CHECK_CONFIGS, emulated_link_check

    scale = check_number("steps_scale", args.steps_scale, low_open=True)
    configs = {k: dict(v, T=max(1, round(v["T"] * scale))) for k, v in CHECK_CONFIGS.items()}
    print("palsgd cost: timing DDP, Local SGD and PALSGD on 2 gloo processes ...", file=sys.stderr)
    out = emulated_link_check(configs, delay_s=args.delay_s, delay_per_byte_s=args.delay_per_byte_s)
    _emit(out, args.output)
    for name, r in out["runs"].items():
        print(
            f"{name:>10}: measured {r['measured_s']:.3f} s, predicted "
            f"{r['predicted_s']:.3f} s, error {100 * r['error']:+.1f}%",
            file=sys.stderr,
        )
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from empirical.cost.link_calibration import calibrate_link, measure_allreduce

    check_choice("algorithm", args.algorithm, ALLREDUCE_ALGORITHMS)
    check_int("world_size", args.world_size, 2)
    check_int("repeats", args.repeats, 1)
    check_int("trials", args.trials, 1)
    for size in args.sizes:
        check_number("sizes", size, low_open=True, unit="bytes")
    print(
        f"palsgd cost: timing gloo all-reduce on {args.world_size} processes ...", file=sys.stderr
    )
    meas = measure_allreduce(
        args.sizes, world_size=args.world_size, repeats=args.repeats, trials=args.trials
    )
    link = calibrate_link(meas, args.algorithm, name="gloo-loopback")
    _emit({"measurements": [list(m) for m in meas], "link": link.to_dict()}, args.output)
    return 0


def run(args: argparse.Namespace) -> int:
    """Run ``palsgd cost``; bad input raises :class:`UserInputError` (exit 2 via the CLI)."""
    if args.action == "profiles":
        return _profiles(args)
    if getattr(args, "output", None):
        check_output_file(args.output, "--output")
    actions = {"predict": _predict, "check": _check}
    return actions.get(args.action, _calibrate)(args)
