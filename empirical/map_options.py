"""The options of ``palsgd map``, declared once as data (:mod:`core.options`).

The notation's parameters (``--H``, ``--eta``, ``--p``, ``--zeta``, ``--eps``, ``--K``,
``--d``, ``--L``, ``--sigma``, ``--F0``, ``--mu``) are :func:`theory.options.notation_option`
flags: their names, aliases (``--sync_interval``, ``--prob_no_grad``, ...), meaning and range
come from the notation's table, narrowed where the map needs it (``eta > 0``, ``0 < p``, two
workers at least); the range is checked when the command line is parsed. The map states only
its defaults and what each flag means here. :func:`empirical.map_cli.add_arguments` hands
:data:`OPTIONS` to :func:`core.options.declare`.
"""

from __future__ import annotations

import argparse
import math

from core.options import Group, Option, option
from core.validation import ParamSpec
from theory.compare import BUDGET_KINDS, METHODS, Grid, MapSpec, ProblemSource
from theory.compare.montecarlo import FAMILIES
from theory.compare.spec import CRITERIA
from theory.options import notation_option
from theory.validation import PARAMS

__all__ = ["OPTIONS", "EPILOG", "FAMILY_OPTIONS", "MC_FAMILY_FLAGS"]

EPILOG = (
    "exit codes: 0 done, 2 bad input, 70 internal error (a bug), 71 out of memory or disk "
    "space, 130 interrupted (the cache keeps the work)."
)

_INF = math.inf
_SPEC, _GRID, _SOURCE = MapSpec(), Grid(), ProblemSource()


def _narrower(name: str, low: float, *, low_open: bool = False) -> ParamSpec:
    """The notation's range of ``name`` with a higher (or open) lower end: the map's."""
    s = PARAMS[name]
    return ParamSpec(name, s.meaning, low, s.high, low_open=low_open,
                     high_open=s.high_open, integer=s.integer, unit=s.unit)  # fmt: skip


def _show(values: tuple) -> str:
    return " ".join(f"{x:g}" for x in values)


def _budget(text: str) -> tuple[str, float]:
    """``KIND:B`` (``grads:2e5``) as ``(kind, B)``; argparse's usage error otherwise."""
    kind, sep, value = text.partition(":")
    if not sep or kind not in BUDGET_KINDS:
        raise argparse.ArgumentTypeError(
            f"expected KIND:B with KIND in {', '.join(BUDGET_KINDS)} (e.g. grads:2e5), got {text!r}"
        )
    try:
        return kind, float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"budget {kind}: B must be a number, got {value!r}"
        ) from None


_CELLS = (
    notation_option("H", nargs="+", default=list(_SPEC.H), metavar="H",
                    help=f"the map's sync intervals (default {_show(_SPEC.H)})"),
    notation_option("eta", nargs="+", default=list(_SPEC.eta), metavar="ETA",
                    range=_narrower("eta", 0.0, low_open=True),
                    help=f"PALSGD's cell values (default {_show(_SPEC.eta)})"),
    notation_option("p", nargs="+", default=list(_SPEC.p), metavar="P",
                    range=_narrower("p", 0.0, low_open=True),
                    help=f"PALSGD's cell values (default {_show(_SPEC.p)})"),
    notation_option("zeta", nargs="+", default=None, metavar="ZETA",
                    help="here at the optimum x*, set by scaling the minimisers about it (default "
                    f"{_show(_SPEC.zeta or ())}; with --problem: the file's own unless given)"),
    notation_option("eps", nargs="+", default=list(_SPEC.eps), metavar="EPS",
                    help="here on E||grad f||^2 at the model a method returns (default "
                    f"{_show(_SPEC.eps)})"),
    option("--budget", type=_budget, nargs="+", default=None, metavar="KIND:B",
           help="budgets: grads:B (gradient evaluations per worker), rounds:B "
           "(communication rounds), time:SECONDS (needs --profile); default grads:2e5"),
    option("--methods", nargs="+", choices=list(METHODS), default=list(_SPEC.methods),
           help="methods to compare (default: all)"),
    option("--sync-delay", type=int, default=0, metavar="TAU",
           range=ParamSpec("sync_delay", "outer-step delay of an overlapped sync", 0, _INF,
                           integer=True),
           help="overlapped sync of every method with rounds: the outer step lands TAU local "
           "steps after the sync starts, integer in [0, H-1] for the smallest --H; needs "
           "--engine montecarlo; compare with a map at 0 to read what the delay costs "
           "(default 0: blocking sync)"),
    option("--criterion", choices=list(CRITERIA), default=_SPEC.criterion,
           help="what reaching eps means: 'sustained' (default: the value stays <= eps from "
           "that round on; exact where the round map contracts, else through the end of the "
           "64-round block holding the budget's last round) or 'first' (first passage); the "
           "summary gives the other beside where they differ"),
)  # fmt: skip

_ONLY = "; not with --problem (the file gives its own)"


def _family(name: str, what: str, metavar: str, *, exact_only: bool = False, **kw) -> Option:
    """A flag of the generated family (a :class:`ProblemSource` field, ``None`` unless given)."""
    tail = "; exact engine only" if exact_only else ""
    return notation_option(name, default=None, metavar=metavar,
                           help=f"{what} (default {getattr(_SOURCE, name):g}){tail}{_ONLY}",
                           **kw)  # fmt: skip


#: the generated family's flags, in :class:`ProblemSource`'s order (``dest``: the field)
FAMILY_OPTIONS = (
    _family("K", "of the generated family, two at least for heterogeneity", "K",
            range=_narrower("K", 2)),
    _family("d", "of the generated family", "D"),
    _family("L", "here the largest curvature of the generated family", "L", exact_only=True),
    option("--lam-min", dest="lam_min", type=float, default=None,
           help=f"smallest curvature, in (0, L] (default {_SOURCE.lam_min:g}); exact engine "
           f"only{_ONLY}"),
    _family("sigma", "of the generated family", "SIGMA"),
    _family("F0", "of the generated family", "F0", exact_only=True),
    option("--seed", dest="seed", type=int, default=None,
           range=ParamSpec("seed", "seed of the generated problem", 0, _INF, integer=True),
           help=f"seed of the generated problem, integer in [0, inf) (default {_SOURCE.seed})"
           f"{_ONLY}"),
)  # fmt: skip

#: the family flags the Monte-Carlo engine reads (the others are the exact engine's)
MC_FAMILY_FLAGS = ("K", "d", "sigma", "seed")

_PROBLEM = (
    option("--engine", choices=["exact", "montecarlo"], default="exact",
           help="exact moments on quadratics (default) or Monte Carlo on nonconvex problems"),
    option("--family", choices=sorted(FAMILIES), default=None,
           help="nonconvex family of --engine montecarlo (default hetero_cosine)"),
    option("--family-file", metavar="FILE",
           help="--engine montecarlo on your own problem: a YAML/JSON file of per-worker "
           "quadratics plus an optional common cosine (docs/examples/hetero_cosine_family.yaml; "
           "the map computes and states L, sigma2, zeta2, F0); instead of --family (default: "
           "none)"),
    option("--replicas", type=int, default=64,
           help="Monte Carlo: replicas per configuration while tuning, in [2, inf) (default 64)"),
    option("--holdout-replicas", type=int, default=256,
           help="Monte Carlo: fresh replicas of each tuned configuration, in [2, inf) "
           "(default 256)"),
    option("--problem", metavar="FILE",
           help="a YAML/JSON problem file (default: the generated family): eigenvalues "
           "(K lists of d numbers), minimisers (K lists of d), x0 (d), sigma2"),
    *FAMILY_OPTIONS,
)  # fmt: skip

_TUNING = (
    option("--n-alpha", type=int, default=_GRID.n_alpha,
           help=f"inner steps per outer rate, in [2, inf) (default {_GRID.n_alpha})"),
    option("--n-outer", type=int, default=_GRID.n_outer,
           help=f"outer rates per inner step, in [1, inf) (default {_GRID.n_outer})"),
    option("--span", type=float, default=_GRID.span,
           help="decades of inner steps below the stability edge, in (0, inf) (default "
           f"{_GRID.span:g})"),
    option("--max-extend", type=int, default=_GRID.max_extend,
           help="inner-step extensions below the grid per cell, in [0, inf); outer rates "
           "extend until the optimum is interior or they pass [2^-10, 2^14]; 0: no extension "
           f"at all (default {_GRID.max_extend})"),
    notation_option("mu", default=_GRID.mu, metavar="MU",
                    help=f"Nesterov's, of the tuning grid (default {_GRID.mu:g})"),
)  # fmt: skip

_PRICES = (
    option("--profile",
           help="a cluster profile of the cost model (palsgd cost profiles; default: none, the "
           "time budget unavailable)"),
    option("--setting", default="gptneo-8m-tinystories",
           help="the model whose steps are priced (default gptneo-8m-tinystories)"),
)  # fmt: skip

_OUTPUT = (
    option("--out", metavar="DIR",
           help="write map.json, map.csv, plots, summary.txt here (default: not written)"),
    option("--json", dest="json_path", metavar="FILE",
           help="write the JSON here (default: not written)"),
    option("--csv", dest="csv_path", metavar="FILE",
           help="write the CSV here (default: not written)"),
    option("--cache", metavar="DIR",
           help="resumable cache of the exact engine (default OUT/.cache; none without --out)"),
    option("--no-bounds", action="store_true", help="skip the bound map and its scores"),
    option("--no-plots", action="store_true", help="no heatmaps"),
    option("--no-progress", action="store_true", help="no progress bar"),
)  # fmt: skip

#: every option of ``palsgd map``, in the order of ``--help``
OPTIONS: tuple[Group, ...] = (
    Group("cells", _CELLS),
    Group("problem", _PROBLEM),
    Group("tuning (the same grid size for every method)", _TUNING),
    Group("wall-clock prices (for the time budget)", _PRICES),
    Group("output", _OUTPUT),
)
