"""The options of ``palsgd cost {profiles,predict,check,calibrate}``, declared once as data.

Each action is an :class:`Action` (its name, one-line help, description and options,
:mod:`core.options` records); :func:`empirical.cost.cli.add_arguments` makes one sub-parser
per action of :data:`ACTIONS` and hands it the options. The notation's parameters of
``predict`` (``--p``, ``--H``, ``--T0``, ``--steps``) are
:func:`theory.options.notation_option` flags: names, authors'-code aliases, meaning and
range from the notation's table, the range checked when the command line is parsed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from core.limits import MAX_PLANNED_S, PROCESSES_PER_CORE, process_cap
from core.options import Group, Option, option
from empirical.cost.paper import SETTINGS
from empirical.cost.profiles import ALLREDUCE_ALGORITHMS, CLUSTER_PROFILES, GPUS
from theory.algorithm import COINS, local_choices
from theory.options import notation_option

__all__ = ["Action", "ACTIONS", "DEFAULT_PROFILE", "PREDICT_OPTIONS"]

#: the cluster profile ``palsgd cost predict`` uses when none is given
DEFAULT_PROFILE = "64xGPU-100Gbps"


@dataclass(frozen=True)
class Action:
    """One action of ``palsgd cost``: a sub-parser and its options."""

    name: str
    help: str
    description: str
    options: tuple[Option | Group, ...] = ()


#: ``--output`` of every action that prints JSON
OUTPUT = option(
    "--output",
    default=None,
    metavar="FILE",
    help="also write the JSON to this regular file (replaced atomically; a symbolic link is "
    "followed; a device, FIFO or directory is refused) (default: stdout only)",
)

_SETTING = "(default: the setting's)"

#: ``predict``'s options; the notation's flags first by the command's name (``--steps``
#: before its alias ``--T``, as the cost model has always shown it)
PREDICT_OPTIONS = (
    option("--setting", default="all", choices=[*SETTINGS, "all"],
           help="the paper's setting ('all': the three) (default: %(default)s)"),
    option("--profile", default=DEFAULT_PROFILE, metavar="NAME",
           help=f"a cluster profile: {', '.join(CLUSTER_PROFILES.static())}, or a name of "
           "--profiles-file (default: %(default)s)"),
    option("--profiles-file", default=None, metavar="FILE",
           help="YAML/JSON file of more cluster profiles {name: {K, link, gpu, source}}, at "
           "most 4 MiB (default: none)"),
    option("--method", default="palsgd", choices=local_choices(),
           help="the local method (default: %(default)s)"),
    notation_option("p", default=None, metavar="P", help=f"PALSGD's {_SETTING}"),
    notation_option("H", default=None, metavar="H", help=f"the local method's {_SETTING}"),
    notation_option("T0", default=None, metavar="T0", help=f"before the local method {_SETTING}"),
    replace(notation_option("T", dest="steps", default=None, metavar="N",
                            help="here DDP's steps to the target (default: the setting's "
                            "assumption)"), names=("--steps", "--T")),
    option("--step-ratio", type=float, default=1.0, metavar="R",
           help="the method's steps to the target / DDP's, in (0, inf) (default: %(default)s)"),
    option("--utilisation", type=float, default=None, metavar="U",
           help="fraction of the GPU's peak throughput reached, in (0, 1] "
           "(default: the setting's assumption)"),
    option("--gpu", default=None, choices=list(GPUS), help="the GPU (default: the profile's)"),
    option("--coins", default="independent", choices=COINS,
           help="PALSGD coins: one per worker, or shared (the authors' code) (default: "
           "%(default)s)"),
    option("--no-overlap-ddp", action="store_true",
           help="DDP's all-reduce does not overlap the backward pass (default: it overlaps)"),
    OUTPUT,
)  # fmt: skip

_CHECK_OPTIONS = (
    option("--delay-s", type=float, default=0.06, metavar="S",
           help="seconds added to every all-reduce, in [0, inf) (default: %(default)s)"),
    option("--delay-per-byte-s", type=float, default=8e-8, metavar="S",
           help="seconds per payload byte added to every all-reduce, in [0, inf) "
           "(default: %(default)s)"),
    option("--steps-scale", type=float, default=1.0, metavar="X",
           help="multiply the steps of every run (longer runs: more precise), in (0, inf) "
           "(default: %(default)s: 32 DDP steps, 64 local steps)"),
    option("--yes", action="store_true",
           help=f"run even when the plan exceeds {MAX_PLANNED_S / 3600:g} h (default: refuse)"),
    OUTPUT,
)  # fmt: skip

_CALIBRATE_OPTIONS = (
    option("--world-size", type=int, default=2, metavar="N",
           help=f"processes, integer in [2, {process_cap()}] on this machine (at most "
           f"{PROCESSES_PER_CORE} per CPU core) (default: %(default)s)"),
    option("--sizes", type=int, nargs="+", default=[4096, 65536, 1 << 20, 4 << 20],
           metavar="BYTES",
           help="message sizes in bytes, each an integer in [1, inf) whose buffers fit in "
           "memory (default: %(default)s)"),
    option("--repeats", type=int, default=10, metavar="N",
           help="back-to-back calls per trial, integer in [1, inf) (default: %(default)s)"),
    option("--trials", type=int, default=3, metavar="N",
           help="trials per size, integer in [1, inf) (default: %(default)s)"),
    option("--algorithm", default="ring", choices=ALLREDUCE_ALGORITHMS,
           help="all-reduce algorithm of the fitted link (default: %(default)s)"),
    OUTPUT,
)  # fmt: skip

#: the actions of ``palsgd cost``, in the order of ``--help``
ACTIONS = (
    Action("profiles", "list the named cluster profiles (JSON)",
           "List the named cluster profiles, every number with its source (JSON)."),
    Action("predict", "paper-scale prediction of the gain over DDP (JSON; instant)",
           "Predict the time-to-target gain of a local method over DDP in the paper's "
           "settings on a named cluster (JSON on stdout, one line per setting on stderr with "
           "the paper's value and why they differ). Takes well under a second.",
           PREDICT_OPTIONS),
    Action("check", "predicted vs measured wall-clock on 2 gloo processes with an emulated "
           "slow link (JSON; about 1-2 min)",
           "Time DDP, Local SGD and PALSGD on 2 gloo processes with an emulated slow link and "
           "compare with the cost model's prediction (JSON on stdout, progress and one line "
           "per run on stderr). About 1-2 minutes on two CPU cores at the defaults; longer "
           "with --steps-scale or larger delays. A plan whose emulated delays alone exceed "
           f"{MAX_PLANNED_S / 3600:g} h is refused unless --yes is given.",
           _CHECK_OPTIONS),
    Action("calibrate", "measure gloo all-reduce on this machine, fit a link (JSON; about 20 s)",
           "Time gloo all-reduces between local processes and fit latency and bandwidth (JSON "
           "on stdout). About 20 s at the defaults on two CPU cores.",
           _CALIBRATE_OPTIONS),
)  # fmt: skip
