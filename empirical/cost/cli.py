"""``palsgd cost {profiles,predict,check,calibrate}``: the cost model's command line.

``check`` and ``calibrate`` time gloo processes and need torch; their modules are imported
when the action runs, so that ``profiles`` and ``predict`` start without it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from core.files import check_memory, check_output_file
from core.io import atomic_write_json, json_safe
from core.limits import check_duration, check_processes
from core.options import declare
from core.validation import ParameterError, check_choice, check_int, check_number, with_flag
from empirical.cost.options import ACTIONS, DEFAULT_PROFILE
from empirical.cost.paper import SETTINGS, explain_gap, paper_scale_prediction
from empirical.cost.profiles import (
    ALLREDUCE_ALGORITHMS,
    CLUSTER_PROFILES,
    LOCAL_PROFILE,
    ClusterProfile,
    load_profiles,
)

__all__ = ["DEFAULT_PROFILE", "add_arguments", "run"]

#: the options of ``predict`` passed on to :func:`paper_scale_prediction` under their names
_PREDICT_OPTIONS = ("method", "p", "H", "T0", "steps", "step_ratio", "utilisation", "gpu", "coins")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``palsgd cost {profiles,predict,check,calibrate}``: one sub-parser per action of
    :data:`empirical.cost.options.ACTIONS`."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action in ACTIONS:
        declare(
            sub.add_parser(action.name, help=action.help, description=action.description),
            action.options,
        )


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
        print(f"{'':>24}  {explain_gap(pr_)}", file=sys.stderr)
    return 0


def _check(args: argparse.Namespace) -> int:
    from empirical.cost.check import CHECK_CONFIGS, emulated_link_check, planned_delay_s

    scale = check_number("steps_scale", args.steps_scale, 0.0, low_open=True)
    delay = check_number("delay_s", args.delay_s, 0.0)
    per_byte = check_number("delay_per_byte_s", args.delay_per_byte_s, 0.0)
    configs = {k: dict(v, T=max(1, round(v["T"] * scale))) for k, v in CHECK_CONFIGS.items()}
    planned = planned_delay_s(configs, delay_s=delay, delay_per_byte_s=per_byte)
    check_duration(
        planned,
        f"the emulated delays (--delay-s {args.delay_s:g}, --delay-per-byte-s "
        f"{args.delay_per_byte_s:g}, --steps-scale {args.steps_scale:g})",
        confirmed=args.yes,
    )
    print(
        "palsgd cost check: timing DDP, Local SGD and PALSGD on 2 gloo processes "
        f"(emulated delays alone: {planned:.0f} s; about a minute more of start-up and compute)",
        file=sys.stderr,
    )
    out = emulated_link_check(
        configs, delay_s=delay, delay_per_byte_s=per_byte, timeout_s=600.0 + 2 * planned
    )
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
    check_processes(args.world_size, "--world-size")
    check_int("repeats", args.repeats, 1)
    check_int("trials", args.trials, 1)
    for size in args.sizes:
        check_number("sizes", size, 0.0, low_open=True, unit="bytes")
    # every process holds one buffer of the largest size, and gloo a copy of it
    check_memory(
        2.0 * max(args.sizes) * args.world_size,
        f"--sizes {max(args.sizes)} bytes on --world-size {args.world_size} processes",
    )
    print(
        f"palsgd cost: timing gloo all-reduce on {args.world_size} processes, "
        f"{len(args.sizes)} sizes x {args.trials} trials ...",
        file=sys.stderr,
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
    try:
        return actions.get(args.action, _calibrate)(args)
    except ParameterError as exc:
        raise with_flag(exc) from None
