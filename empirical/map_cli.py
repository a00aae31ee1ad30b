"""``palsgd map``: when does pulling pay? Every method tuned alike, the truth from the dynamics.

For a heterogeneous problem, a grid of cells ``H x eta x p x zeta x eps`` and budgets, the
least cost at which each method (minibatch SGD, Local SGD, DiLoCo, PALSGD with independent
and shared coins) reaches ``E||grad f||^2 <= eps`` at the model it returns (the anchor after
a sync), each tuned over a grid of the same size (:mod:`theory.compare`):

* ``--engine exact`` (default): exact second moments on quadratics with per-worker diagonal
  Hessians (a generated family, or ``--problem FILE``);
* ``--engine montecarlo``: the simulator with confidence intervals on nonconvex
  heterogeneous problems (``--family``); a method wins a cell only when the intervals
  separate.

Budgets: ``grads`` (gradient evaluations per worker), ``rounds`` (communication rounds) and
``time`` (modelled seconds for the cost model's ``--setting`` on the cluster ``--profile``:
a pull step costs what the cost model says). Beside the truth, the bound map (the same
ratio from the registered upper bounds) and its agreement with the truth.

Output: ``--out DIR`` (``map.json``, ``map.csv``, heatmaps as PNG and PDF, ``summary.txt``),
or ``--json FILE`` / ``--csv FILE`` alone. A resumable cache of finished units lives in
``--cache`` (default ``OUT/.cache``). Exit codes: 0 done, 2 bad input (a problem above the
size caps :data:`MAX_K`, :data:`MAX_D`, :data:`MAX_ENTRIES` included), 70 internal error, 71
out of memory or disk space, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.errors import UserInputError
from core.files import check_output_dir, check_output_file
from theory.compare import BUDGET_KINDS, METHODS, Grid, MapSpec, Prices, ProblemSource
from theory.compare.montecarlo import FAMILIES
from theory.compare.report import format_summary
from theory.compare.spec import CRITERIA

__all__ = ["add_arguments", "run", "prices_for"]


def _budget(text: str) -> tuple[str, float]:
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``palsgd map``."""
    d, g = MapSpec(), Grid()
    parser.epilog = (
        "exit codes: 0 done, 2 bad input, 70 internal error (a bug), 71 out of memory or disk "
        "space, 130 interrupted (the cache keeps the work)."
    )
    a = parser.add_argument_group("cells")
    a.add_argument(
        "--H",
        "--sync_interval",
        type=int,
        nargs="+",
        default=list(d.H),
        metavar="H",
        help=f"sync intervals, integers in [1, inf) (default {' '.join(map(str, d.H))})",
    )
    a.add_argument(
        "--eta",
        type=float,
        nargs="+",
        default=list(d.eta),
        metavar="ETA",
        help=f"PALSGD pull rates in (0, inf) (default {' '.join(f'{x:g}' for x in d.eta)})",
    )
    a.add_argument(
        "--p",
        "--prob_no_grad",
        type=float,
        nargs="+",
        default=list(d.p),
        metavar="P",
        help=f"pull probabilities in (0, 1) (default {' '.join(f'{x:g}' for x in d.p)})",
    )
    a.add_argument(
        "--zeta",
        type=float,
        nargs="+",
        default=None,
        metavar="ZETA",
        help="heterogeneity at the optimum, in [0, inf) (the minimisers are scaled about "
        f"x*; default {' '.join(f'{x:g}' for x in d.zeta)}; with --problem: the "
        "file's own unless given)",
    )
    a.add_argument(
        "--eps",
        type=float,
        nargs="+",
        default=list(d.eps),
        metavar="EPS",
        help=f"targets on E||grad f||^2, in (0, inf) (default {' '.join(f'{x:g}' for x in d.eps)})",
    )
    a.add_argument(
        "--budget",
        type=_budget,
        nargs="+",
        default=None,
        metavar="KIND:B",
        help="budgets: grads:B (gradient evaluations per worker), rounds:B "
        "(communication rounds), time:SECONDS (needs --profile); default grads:2e5",
    )
    a.add_argument(
        "--methods",
        nargs="+",
        choices=list(METHODS),
        default=list(d.methods),
        help="methods to compare (default: all)",
    )
    a.add_argument(
        "--sync-delay",
        type=int,
        default=0,
        metavar="TAU",
        help="overlapped sync of every method with rounds: the outer step lands TAU local "
        "steps after the sync starts, integer in [0, H-1] for the smallest --H; needs --engine "
        "montecarlo; "
        "compare with a map at 0 to read what the delay costs (default 0: blocking sync)",
    )
    p = parser.add_argument_group("problem")
    p.add_argument(
        "--engine",
        choices=["exact", "montecarlo"],
        default="exact",
        help="exact moments on quadratics (default) or Monte Carlo on nonconvex problems",
    )
    p.add_argument(
        "--family",
        choices=sorted(FAMILIES),
        default=None,
        help="nonconvex family of --engine montecarlo (default hetero_cosine)",
    )
    p.add_argument(
        "--family-file",
        metavar="FILE",
        help="--engine montecarlo on your own problem: a YAML/JSON file of per-worker "
        "quadratics plus an optional common cosine (docs/examples/hetero_cosine_family.yaml; "
        "the map computes and states L, sigma2, zeta2, F0); instead of --family (default: none)",
    )
    p.add_argument(
        "--replicas",
        type=int,
        default=64,
        help="Monte Carlo: replicas per configuration while tuning, in [2, inf) (default 64)",
    )
    p.add_argument(
        "--holdout-replicas",
        type=int,
        default=256,
        help="Monte Carlo: fresh replicas of each tuned configuration, in [2, inf) (default 256)",
    )
    p.add_argument(
        "--problem",
        metavar="FILE",
        help="a YAML/JSON problem file (default: the generated family): eigenvalues "
        "(K lists of d numbers), minimisers (K lists of d), x0 (d), sigma2",
    )
    s = ProblemSource()
    only = "; not with --problem (the file gives its own)"
    for flag, key, kind, what, rng, exact_only in (
        ("--K", "K", int, "workers of the generated family", "[2, inf)", False),
        ("--d", "d", int, "dimension of the generated family", "[1, inf)", False),
        ("--L", "L", float, "largest curvature L", "(0, inf)", True),
        ("--lam-min", "lam_min", float, "smallest curvature", "(0, L]", True),
        ("--sigma", "sigma", float, "gradient-noise std sigma", "[0, inf)", False),
        ("--F0", "F0", float, "initial gap f(x0) - f*", "[0, inf)", True),
        ("--seed", "seed", int, "seed of the generated problem", "[0, inf)", False),
    ):
        p.add_argument(
            flag, dest=key, type=kind, default=None,
            help=f"{what}, in {rng} (default {getattr(s, key):g})"
            + ("; exact engine only" if exact_only else "") + only,
        )  # fmt: skip
    a.add_argument(
        "--criterion",
        choices=list(CRITERIA),
        default=d.criterion,
        help="what reaching eps means: 'sustained' (default: the value stays <= eps from "
        "that round on; exact where the round map contracts, else through the end of the "
        "64-round block holding the budget's last round) or 'first' (first passage); the "
        "summary gives the other beside where they differ",
    )
    t = parser.add_argument_group("tuning (the same grid size for every method)")
    for flag, kind, default, text in (
        ("--n-alpha", int, g.n_alpha, "inner steps per outer rate, in [2, inf)"),
        ("--n-outer", int, g.n_outer, "outer rates per inner step, in [1, inf)"),
        ("--span", float, g.span, "decades of inner steps below the stability edge, in (0, inf)"),
        (
            "--max-extend",
            int,
            g.max_extend,
            "inner-step extensions below the grid per cell, in "
            "[0, inf); outer rates extend until the optimum is interior or they pass "
            "[2^-10, 2^14]; 0: no extension at all",
        ),
        ("--mu", float, g.mu, "Nesterov outer momentum, in [0, 1)"),
    ):
        t.add_argument(flag, type=kind, default=default, help=f"{text} (default {default:g})")
    # fmt: skip
    c = parser.add_argument_group("wall-clock prices (for the time budget)")
    c.add_argument(
        "--profile",
        help="a cluster profile of the cost model (palsgd cost profiles; default: none, the time budget unavailable)",
    )
    c.add_argument(
        "--setting",
        default="gptneo-8m-tinystories",
        help="the model whose steps are priced (default gptneo-8m-tinystories)",
    )
    o = parser.add_argument_group("output")
    o.add_argument(
        "--out",
        metavar="DIR",
        help="write map.json, map.csv, plots, summary.txt here (default: not written)",
    )
    o.add_argument(
        "--json",
        dest="json_path",
        metavar="FILE",
        help="write the JSON here (default: not written)",
    )
    o.add_argument(
        "--csv", dest="csv_path", metavar="FILE", help="write the CSV here (default: not written)"
    )
    o.add_argument(
        "--cache",
        metavar="DIR",
        help="resumable cache of the exact engine (default OUT/.cache; none without --out)",
    )
    o.add_argument("--no-bounds", action="store_true", help="skip the bound map and its scores")
    o.add_argument("--no-plots", action="store_true", help="no heatmaps")
    o.add_argument("--no-progress", action="store_true", help="no progress bar")
    # fmt: skip


def prices_for(setting: str, profile: str) -> Prices:
    """The cost model's per-step prices of ``setting`` on the cluster ``profile``."""
    from empirical.cost import paper_scale_prediction

    pred = paper_scale_prediction(setting, profile)
    ps = pred["per_step"]
    return Prices(
        grad_s=ps["grad_step_s"],
        pull_s=ps["pull_step_s"],
        sync_s=ps["sync_local_s"] + ps["sync_allreduce_s"],
        ddp_step_s=ps["ddp_exposed_comm_s"],
        K=int(pred["K"]),
        source=f"palsgd cost model: {setting} on {profile} ({pred['gpu']}, K = {pred['K']})",
    )


def _spec(args: argparse.Namespace) -> MapSpec:
    budgets = dict(args.budget) if args.budget else {"grads": 2e5}
    if len(budgets) != len(args.budget or [None]):
        raise UserInputError("--budget names a kind twice")
    prices = None
    if args.profile is not None:
        prices = prices_for(args.setting, args.profile)
    elif "time" in budgets:
        raise UserInputError(
            "--budget time:... needs --profile (a cluster profile of the cost model)"
        )
    tau = args.sync_delay
    if tau < 0 or (tau and tau > min(args.H) - 1):
        raise UserInputError(
            f"--sync-delay must be an integer in [0, min(--H) - 1] = [0, {min(args.H) - 1}], "
            f"got {tau}"
        )
    if tau and "time" in budgets:
        raise UserInputError(
            "--budget time:... prices blocking syncs only: with --sync-delay use grads:B or "
            "rounds:B (benchmarks/bench_overlap.py measures the time an overlapped sync hides)"
        )
    if tau and args.engine != "montecarlo":
        raise UserInputError(
            "--sync-delay needs --engine montecarlo: the exact engine's round maps have no "
            "overlapped sync"
        )
    grid = Grid(n_alpha=args.n_alpha, n_outer=args.n_outer, span=args.span,
                max_extend=args.max_extend, mu=args.mu)  # fmt: skip
    zeta = args.zeta
    if zeta is None and args.problem is None and args.family_file is None:
        zeta = list(MapSpec().zeta)
    return MapSpec(H=tuple(args.H), eta=tuple(args.eta), p=tuple(args.p),
                   zeta=None if zeta is None else tuple(zeta), eps=tuple(args.eps),
                   budgets=budgets, methods=tuple(args.methods), grid=grid, prices=prices,
                   sync_delay=tau, criterion=args.criterion)  # fmt: skip


#: flags of the generated family (``ProblemSource`` fields); those the Monte-Carlo engine reads
_FAMILY_FLAGS = {"K": "--K", "d": "--d", "L": "--L", "lam_min": "--lam-min",
                 "sigma": "--sigma", "F0": "--F0", "seed": "--seed"}  # fmt: skip
_MC_FLAGS = ("K", "d", "sigma", "seed")


def _source(args: argparse.Namespace) -> ProblemSource:
    """The problem of the map from the flags: each refused by the name typed when it does
    not apply (a generated-family flag with ``--problem``; ``--L``, ``--lam-min``, ``--F0``
    with Monte Carlo) or is out of range."""
    given = {k: getattr(args, k) for k in _FAMILY_FLAGS if getattr(args, k) is not None}
    if args.family_file is not None and given:
        flags = ", ".join(_FAMILY_FLAGS[k] for k in given)
        raise UserInputError(
            f"{flags}: the built-in families' setting(s); --family-file FILE gives its own "
            "workers, dimension, curvatures, noise and start (drop them)"
        )
    if args.problem is not None and given:
        flags = ", ".join(_FAMILY_FLAGS[k] for k in given)
        raise UserInputError(
            f"{flags}: the generated family's setting(s); --problem FILE gives its own "
            "workers, dimension, curvatures, noise and start (drop them, or drop --problem)"
        )
    if args.engine == "montecarlo":
        exact_only = [_FAMILY_FLAGS[k] for k in given if k not in _MC_FLAGS]
        if exact_only:
            raise UserInputError(
                f"{', '.join(exact_only)}: settings of the exact engine's quadratic family; "
                "--engine montecarlo builds --family from --K, --d, --sigma and --seed"
            )
    ranges = {"K": (2, " (heterogeneity needs two workers)"), "d": (1, ""), "seed": (0, "")}
    for k, (low, why) in ranges.items():
        if k in given and given[k] < low:
            raise UserInputError(
                f"{_FAMILY_FLAGS[k]} must be an integer in [{low}, inf){why}, got {given[k]}"
            )
    return ProblemSource(path=args.problem, **given)


#: the largest problems the map takes (the exact engine's time grows with workers x
#: dimension: a 256 x 4 problem runs for minutes on two cores)
MAX_K = 4096
MAX_D = 65536
MAX_ENTRIES = 65536  # K x d


def _check_size(K: int, d: int, where: str, names: tuple[str, str]) -> None:
    """Refuse ``K`` workers of dimension ``d`` above the caps (``where``: the flags or the
    file; ``names``: how K and d are named there)."""
    for value, cap, name in ((K, MAX_K, names[0]), (d, MAX_D, names[1])):
        if value > cap:
            raise UserInputError(f"{where}: {name} = {value} is above the cap of {cap}")
    if K * d > MAX_ENTRIES:
        raise UserInputError(
            f"{where}: K x d = {K} x {d} = {K * d} is above the cap of {MAX_ENTRIES} "
            "(the exact engine's time grows with workers x dimension)"
        )


def _check_problem_file(source: ProblemSource) -> None:
    """A problem file is read before any work: one worker is refused as ``--K 1`` is, sizes
    above the caps, and values whose products overflow double precision (named by the
    file's fields, without numpy's warnings)."""
    import numpy as np

    try:
        with np.errstate(over="raise", invalid="raise"):
            prob = source.build(None)
    except FloatingPointError:
        raise UserInputError(
            f"--problem '{source.path}': its 'eigenvalues' times the squared distances "
            "between the 'minimisers' overflow double precision: scale the problem down"
        ) from None
    _check_size(prob.K, prob.d, f"--problem '{source.path}'", ("workers", "dimension"))
    if prob.K < 2:
        raise UserInputError(
            f"--problem '{source.path}': one worker (K = 1): the map compares methods on "
            "heterogeneous workers and needs at least two, as --K does"
        )


def run(args: argparse.Namespace) -> int:
    """Compute the map; exit code 0 (done) or 2 (bad input)."""
    spec = _spec(args)
    source = _source(args)
    if args.problem is None:
        _check_size(source.K, source.d, "the generated family", ("--K", "--d"))
    if args.problem is not None:
        if args.engine == "montecarlo":
            raise UserInputError("--problem is a quadratic for --engine exact; Monte Carlo "
                                 "takes --family")  # fmt: skip
        _check_problem_file(source)  # a bad file fails before any work
    family = args.family or "hetero_cosine"
    if args.family_file is not None:
        if args.engine != "montecarlo":
            raise UserInputError("--family-file is a problem for --engine montecarlo; the "
                                 "exact engine takes a quadratic --problem FILE")  # fmt: skip
        if args.family is not None:
            raise UserInputError("--family and --family-file both name the problem: give one")
        from theory.compare.family_file import load_family_file

        family = load_family_file(args.family_file)
    if args.cache is not None and args.engine == "montecarlo":
        raise UserInputError(
            "--cache keeps the exact engine's finished units; --engine montecarlo has no "
            "cache (drop --cache)"
        )
    if args.cache is not None:
        check_output_dir(args.cache, "--cache")
    out = None if args.out is None else check_output_dir(args.out, "--out")
    json_path = None if args.json_path is None else check_output_file(args.json_path, "--json")
    csv_path = None if args.csv_path is None else check_output_file(args.csv_path, "--csv")
    if json_path is not None and csv_path is not None:
        if Path(json_path).resolve() == Path(csv_path).resolve():
            raise UserInputError(
                f"--json and --csv name the same file '{json_path}': give two paths"
            )
    cache = args.cache or (None if out is None else str(out / ".cache"))
    if args.engine == "montecarlo":
        from theory.compare.run_mc import run_mc_map

        result = run_mc_map(spec, family=family, K=source.K, d=source.d,
                            sigma=source.sigma, seed=source.seed, replicas=args.replicas,
                            holdout_replicas=args.holdout_replicas,
                            progress=not args.no_progress)  # fmt: skip
    else:
        from theory.compare import run_map

        result = run_map(spec, source, cache_dir=cache, progress=not args.no_progress,
                         bounds=not args.no_bounds)  # fmt: skip
    text = format_summary(result)
    if out is not None:
        result.write(out / "map.json", out / "map.csv")
        (out / "summary.txt").write_text(text + "\n")
        if not args.no_plots:
            from theory.compare.plots import plot_map

            plot_map(result, out)
    result.write(json_path, csv_path)
    print(text)
    if out is not None:
        print(f"\nwrote {Path(out) / 'map.json'}, map.csv, summary.txt and the heatmaps")
    sys.stdout.flush()
    return 0
