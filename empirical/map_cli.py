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
``--cache`` (default ``OUT/.cache``). Exit codes: 0 done, 2 bad input, 130 interrupted.
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
    parser.epilog = "exit codes: 0 done, 2 bad input, 130 interrupted (the cache keeps the work)."
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
        default="hetero_cosine",
        help="nonconvex family of --engine montecarlo (default hetero_cosine)",
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
    p.add_argument(
        "--K",
        type=int,
        default=s.K,
        help=f"workers of the generated family, in [2, inf) (default {s.K})",
    )
    p.add_argument(
        "--d",
        type=int,
        default=s.d,
        help=f"dimension of the generated family, in [1, inf) (default {s.d})",
    )
    p.add_argument(
        "--L", type=float, default=s.L, help=f"largest curvature L, in (0, inf) (default {s.L:g})"
    )
    p.add_argument(
        "--lam-min",
        type=float,
        default=s.lam_min,
        help=f"smallest curvature, in (0, L] (default {s.lam_min:g})",
    )
    p.add_argument(
        "--sigma",
        type=float,
        default=s.sigma,
        help=f"gradient-noise std sigma, in [0, inf) (default {s.sigma:g})",
    )
    p.add_argument(
        "--F0",
        type=float,
        default=s.F0,
        help=f"initial gap f(x0) - f*, in [0, inf) (default {s.F0:g})",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=s.seed,
        help=f"seed of the generated problem, in [0, inf) (default {s.seed})",
    )
    t = parser.add_argument_group("tuning (the same grid size for every method)")
    t.add_argument(
        "--n-alpha",
        type=int,
        default=g.n_alpha,
        help=f"inner steps per outer rate, in [2, inf) (default {g.n_alpha})",
    )
    t.add_argument(
        "--n-outer",
        type=int,
        default=g.n_outer,
        help=f"outer rates per inner step, in [1, inf) (default {g.n_outer})",
    )
    t.add_argument(
        "--span",
        type=float,
        default=g.span,
        help=f"decades of inner steps below the stability edge, in (0, inf) (default {g.span:g})",
    )
    t.add_argument(
        "--max-extend",
        type=int,
        default=g.max_extend,
        help=f"edge extensions per cell, in [0, inf) (default {g.max_extend})",
    )
    t.add_argument(
        "--mu",
        type=float,
        default=g.mu,
        help=f"Nesterov outer momentum, in [0, 1) (default {g.mu:g})",
    )
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
        "--cache", metavar="DIR", help="resumable cache (default OUT/.cache; none without --out)"
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
    if zeta is None and args.problem is None:
        zeta = list(MapSpec().zeta)
    return MapSpec(H=tuple(args.H), eta=tuple(args.eta), p=tuple(args.p),
                   zeta=None if zeta is None else tuple(zeta), eps=tuple(args.eps),
                   budgets=budgets, methods=tuple(args.methods), grid=grid, prices=prices,
                   sync_delay=tau)  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Compute the map; exit code 0 (done) or 2 (bad input)."""
    spec = _spec(args)
    source = ProblemSource(path=args.problem, K=args.K, d=args.d, L=args.L, lam_min=args.lam_min,
                           sigma=args.sigma, F0=args.F0, seed=args.seed)  # fmt: skip
    if args.problem is not None:
        source.build(None)  # a bad file fails before any work
    out = None if args.out is None else check_output_dir(args.out, "--out")
    json_path = None if args.json_path is None else check_output_file(args.json_path, "--json")
    csv_path = None if args.csv_path is None else check_output_file(args.csv_path, "--csv")
    cache = args.cache or (None if out is None else str(out / ".cache"))
    if args.engine == "montecarlo":
        from theory.compare.run_mc import run_mc_map

        if args.problem is not None:
            raise UserInputError("--problem is a quadratic for --engine exact; Monte Carlo "
                                 "takes --family")  # fmt: skip
        result = run_mc_map(spec, family=args.family, K=args.K, d=args.d, sigma=args.sigma,
                            seed=args.seed, replicas=args.replicas,
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
