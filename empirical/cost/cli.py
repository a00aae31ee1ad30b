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
from core.limits import (
    MAX_PLANNED_S,
    PROCESSES_PER_CORE,
    check_duration,
    check_processes,
    process_cap,
)
from core.validation import ParameterError, check_choice, check_int, check_number, with_flag
from empirical.cost.paper import SETTINGS, explain_gap, paper_scale_prediction
from empirical.cost.profiles import (
    ALLREDUCE_ALGORITHMS,
    CLUSTER_PROFILES,
    GPUS,
    LOCAL_PROFILE,
    ClusterProfile,
    load_profiles,
)
from theory.algorithm import COINS, LOCAL_NAMES

__all__ = ["DEFAULT_PROFILE", "add_arguments", "run"]

#: the cluster profile ``palsgd cost predict`` uses when none is given
DEFAULT_PROFILE = "64xGPU-100Gbps"
#: the options of ``predict`` passed on to :func:`paper_scale_prediction` under their names
_PREDICT_OPTIONS = ("method", "p", "H", "T0", "steps", "step_ratio", "utilisation", "gpu", "coins")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``palsgd cost {profiles,predict,check,calibrate}``."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    sub.add_parser(
        "profiles",
        help="list the named cluster profiles (JSON)",
        description="List the named cluster profiles, every number with its source (JSON).",
    )
    pr = sub.add_parser(
        "predict",
        help="paper-scale prediction of the gain over DDP (JSON; instant)",
        description="Predict the time-to-target gain of a local method over DDP in the "
        "paper's settings on a named cluster (JSON on stdout, one line per setting on stderr "
        "with the paper's value and why they differ). Takes well under a second.",
    )
    pr.add_argument(
        "--setting",
        default="all",
        choices=[*SETTINGS, "all"],
        help="the paper's setting ('all': the three) (default: %(default)s)",
    )
    pr.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        metavar="NAME",
        help=f"a cluster profile: {', '.join(CLUSTER_PROFILES.static())}, or a name of "
        "--profiles-file (default: %(default)s)",
    )
    pr.add_argument(
        "--profiles-file",
        default=None,
        metavar="FILE",
        help="YAML/JSON file of more cluster profiles {name: {K, link, gpu, source}}, at "
        "most 4 MiB (default: none)",
    )
    pr.add_argument(
        "--method",
        default="palsgd",
        choices=LOCAL_NAMES,
        help="the local method (default: %(default)s)",
    )
    pr.add_argument(
        "--p", "--prob_no_grad", dest="p", type=float, default=None, metavar="P",
        help="pull probability of PALSGD, in [0, 1) (default: the setting's)",
    )  # fmt: skip
    pr.add_argument(
        "--H", "--sync_interval", dest="H", type=int, default=None, metavar="H",
        help="local steps between syncs, integer in [1, inf) (default: the setting's)",
    )  # fmt: skip
    pr.add_argument(
        "--T0", "--local_sgd_start_iter", dest="T0", type=int, default=None, metavar="T0",
        help="DDP warm-up steps, integer in [0, inf) (default: the setting's)",
    )  # fmt: skip
    pr.add_argument(
        "--steps", "--T", dest="steps", type=int, default=None, metavar="N",
        help="DDP steps to the target, integer in [1, inf) (default: the setting's assumption)",
    )  # fmt: skip
    pr.add_argument(
        "--step-ratio", type=float, default=1.0, metavar="R",
        help="the method's steps to the target / DDP's, in (0, inf) (default: %(default)s)",
    )  # fmt: skip
    pr.add_argument(
        "--utilisation", type=float, default=None, metavar="U",
        help="fraction of the GPU's peak throughput reached, in (0, 1] "
        "(default: the setting's assumption)",
    )  # fmt: skip
    pr.add_argument(
        "--gpu", default=None, choices=list(GPUS), help="the GPU (default: the profile's)"
    )
    pr.add_argument(
        "--coins", default="independent", choices=COINS,
        help="PALSGD coins: one per worker, or shared (the authors' code) (default: %(default)s)",
    )  # fmt: skip
    pr.add_argument(
        "--no-overlap-ddp",
        action="store_true",
        help="DDP's all-reduce does not overlap the backward pass (default: it overlaps)",
    )
    ch = sub.add_parser(
        "check",
        help="predicted vs measured wall-clock on 2 gloo processes with an emulated slow "
        "link (JSON; about 1-2 min)",
        description="Time DDP, Local SGD and PALSGD on 2 gloo processes with an emulated "
        "slow link and compare with the cost model's prediction (JSON on stdout, progress "
        "and one line per run on stderr). About 1-2 minutes on two CPU cores at the "
        "defaults; longer with --steps-scale or larger delays. A plan whose emulated delays "
        f"alone exceed {MAX_PLANNED_S / 3600:g} h is refused unless --yes is given.",
    )
    ch.add_argument(
        "--delay-s", type=float, default=0.06, metavar="S",
        help="seconds added to every all-reduce, in [0, inf) (default: %(default)s)",
    )  # fmt: skip
    ch.add_argument(
        "--delay-per-byte-s", type=float, default=8e-8, metavar="S",
        help="seconds per payload byte added to every all-reduce, in [0, inf) "
        "(default: %(default)s)",
    )  # fmt: skip
    ch.add_argument(
        "--steps-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="multiply the steps of every run (longer runs: more precise), in (0, inf) "
        "(default: %(default)s: 32 DDP steps, 64 local steps)",
    )
    ch.add_argument(
        "--yes",
        action="store_true",
        help=f"run even when the plan exceeds {MAX_PLANNED_S / 3600:g} h (default: refuse)",
    )
    ca = sub.add_parser(
        "calibrate",
        help="measure gloo all-reduce on this machine, fit a link (JSON; about 20 s)",
        description="Time gloo all-reduces between local processes and fit latency and "
        "bandwidth (JSON on stdout). About 20 s at the defaults on two CPU cores.",
    )
    ca.add_argument(
        "--world-size", type=int, default=2, metavar="N",
        help=f"processes, integer in [2, {process_cap()}] on this machine (at most "
        f"{PROCESSES_PER_CORE} per CPU core) (default: %(default)s)",
    )  # fmt: skip
    ca.add_argument(
        "--sizes", type=int, nargs="+", default=[4096, 65536, 1 << 20, 4 << 20], metavar="BYTES",
        help="message sizes in bytes, each an integer in [1, inf) whose buffers fit in memory "
        "(default: %(default)s)",
    )  # fmt: skip
    ca.add_argument(
        "--repeats", type=int, default=10, metavar="N",
        help="back-to-back calls per trial, integer in [1, inf) (default: %(default)s)",
    )  # fmt: skip
    ca.add_argument(
        "--trials", type=int, default=3, metavar="N",
        help="trials per size, integer in [1, inf) (default: %(default)s)",
    )  # fmt: skip
    ca.add_argument(
        "--algorithm",
        default="ring",
        choices=ALLREDUCE_ALGORITHMS,
        help="all-reduce algorithm of the fitted link (default: %(default)s)",
    )
    for p_ in (pr, ca, ch):
        p_.add_argument(
            "--output",
            default=None,
            metavar="FILE",
            help="also write the JSON to this regular file (replaced atomically; a "
            "symbolic link is followed; a device, FIFO or directory is refused) "
            "(default: stdout only)",
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
