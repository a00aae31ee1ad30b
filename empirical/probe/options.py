"""The options of ``palsgd probe`` (and ``python -m empirical.probe``), declared once as
:class:`~core.options.Option` records in four groups (:data:`OPTIONS`); :func:`add_arguments`
hands them to :func:`core.options.declare`. Their values are checked when the command runs
(:mod:`empirical.probe.cli`), with messages that name the parameter and the flag."""

from __future__ import annotations

import argparse

from core.limits import MAX_STEPS, process_cap
from core.options import Group, declare, option
from empirical import models
from empirical.data import DATASET_NAMES

__all__ = ["SOURCE", "ESTIMATION", "SWEEP", "OUTPUT", "OPTIONS", "EPILOG", "add_arguments"]

EPILOG = (
    "Duration: about 1.5 min at the defaults on two idle CPU cores (a 48-step run of "
    "2 ranks, then the estimates at 5 points); it grows with --steps, --points, "
    "--samples and --hvp-iters, and with the load of the machine. Progress bars on stderr."
)

SOURCE = Group(
    "what to probe",
    (
        option(
            "--run",
            metavar="DIR",
            help="output directory of a palsgd train run "
            "(config.json, checkpoints) (default: none: a short run is trained first)",
        ),
        option(
            "--model",
            choices=models.MODEL_NAMES,
            help="model of the run to train (default: gptneo-tiny)",
        ),
        option(
            "--dataset",
            choices=DATASET_NAMES,
            help="dataset of the run to train (default: embedded-text)",
        ),
        option(
            "--data-path",
            dest="data_path",
            metavar="PATH",
            help="file or folder of the dataset (default: none; the embedded datasets need none)",
        ),
        option(
            "--train-preset",
            dest="train_preset",
            metavar="NAME",
            help="trainer preset of the run to train, one of 'palsgd train --list-presets' "
            "(default: a PALSGD run inside the theory: inner SGD, outer averaging, no clipping)",
        ),
        option(
            "--train-config",
            dest="train_config",
            metavar="FILE",
            help="trainer YAML/JSON options of the run to train, at most 4 MiB (default: none)",
        ),
        option(
            "--nproc",
            type=int,
            default=2,
            metavar="K",
            help=f"workers K of the run to train, integer in [1, {process_cap()}] on this "
            "machine (default: %(default)s)",
        ),
        option(
            "--steps",
            type=int,
            default=48,
            metavar="T",
            help=f"steps T of the run to train, integer in [1, {MAX_STEPS:.0e}] "
            "(default: %(default)s)",
        ),
        option(
            "--iid",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="i.i.d. shards (--no-iid: each worker owns a block of the data) (default: the "
            "preset's, i.i.d.)",
        ),
    ),
)

ESTIMATION = Group(
    "estimation",
    (
        option(
            "--points",
            type=int,
            default=5,
            metavar="N",
            help="trajectory points: the initial model and checkpoints, integer in [1, inf) "
            "(default: %(default)s)",
        ),
        option(
            "--samples",
            type=int,
            default=64,
            metavar="N",
            help="per-sample gradients per point for sigma^2, integer in [2, inf) "
            "(default: %(default)s)",
        ),
        option(
            "--max-samples",
            dest="max_samples",
            type=int,
            default=512,
            metavar="N",
            help="probe-set size, integer in [2, inf); all of the data when it is smaller "
            "(default: %(default)s)",
        ),
        option(
            "--hvp-samples",
            dest="hvp_samples",
            type=int,
            default=32,
            metavar="N",
            help="batch of the Hessian-vector products, integer in [1, inf) (default: %(default)s)",
        ),
        option(
            "--hvp-iters",
            dest="hvp_iters",
            type=int,
            default=20,
            metavar="N",
            help="power-iteration steps at most, integer in [1, inf) (default: %(default)s)",
        ),
        option(
            "--hvp-tol",
            dest="hvp_tol",
            type=float,
            default=1e-3,
            metavar="X",
            help="relative stopping tolerance of the power iteration, in (0, 1) "
            "(default: %(default)s)",
        ),
        option(
            "--confidence",
            type=float,
            default=0.95,
            metavar="C",
            help="confidence level of the intervals, in (0, 1) (default: %(default)s)",
        ),
        option(
            "--f-lower",
            dest="f_lower",
            type=float,
            default=0.0,
            metavar="F",
            help="lower bound of the loss, f_star >= f_lower, in (-inf, inf) (default: "
            "%(default)s, right for cross entropy)",
        ),
        option(
            "--seed",
            type=int,
            default=0,
            metavar="S",
            help="seed of every random choice, integer in [0, inf) (default: %(default)s)",
        ),
        option(
            "--device",
            default="cpu",
            metavar="DEV",
            help="cpu, auto, cuda or cuda:N (default: %(default)s)",
        ),
    ),
)

SWEEP = Group(
    "sweep (the bound's dependences against measured ones, empirical/probe/sweep.py)",
    (
        option(
            "--sweep",
            metavar="NAME=V1,V2,V3",
            help="after the probe, short seeded PALSGD runs on the probe's objective at each "
            "value of H or p (at least 3 ascending values, e.g. H=1,2,4,8); the measured "
            "change of (1/T) sum ||grad f||^2 and its exponent against the bound's at the "
            "probed constants, a verdict per dependence; writes sweep.csv, sweep.json, "
            "sweep.png (default: no sweep)",
        ),
        option(
            "--sweep-seeds",
            dest="sweep_seeds",
            type=int,
            default=3,
            metavar="N",
            help="seeded runs per swept value, integer in [3, inf) (default: %(default)s)",
        ),
        option(
            "--sweep-steps",
            dest="sweep_steps",
            type=int,
            default=24,
            metavar="T",
            help="steps of each sweep run, integer in [2, inf) (default: %(default)s)",
        ),
        option(
            "--sweep-record",
            dest="sweep_record",
            type=int,
            default=4,
            metavar="N",
            help="steps between records of ||grad f(xbar)||^2 in a sweep run, integer in "
            "[1, inf) (default: %(default)s)",
        ),
    ),
)

OUTPUT = Group(
    "output",
    (
        option("--out", metavar="DIR", help="output directory (default: RUN/probe, or runs/probe)"),
        option(
            "--json", action="store_true", help="print probe.json instead of text (default: text)"
        ),
        option(
            "--no-progress",
            dest="progress",
            action="store_false",
            help="no progress bars (default: progress bars on stderr)",
        ),
    ),
)

#: every option of ``palsgd probe``, in --help order
OPTIONS = (SOURCE, ESTIMATION, SWEEP, OUTPUT)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``palsgd probe``: :data:`OPTIONS`, and the duration in the epilog."""
    parser.epilog = EPILOG
    declare(parser, OPTIONS)
