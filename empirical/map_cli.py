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

The options are declared once, as data, in :mod:`empirical.map_options`; the ranges of the
notation's flags (``--H``, ``--eta``, ``--p``, ...) and of ``--seed`` and ``--sync-delay``
are checked when the command line is parsed, the rules between flags here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.errors import UserInputError
from core.files import check_output_dir, check_output_file
from core.options import declare
from empirical.map_options import EPILOG, FAMILY_OPTIONS, MC_FAMILY_FLAGS, OPTIONS
from theory.compare import Grid, MapSpec, Prices, ProblemSource
from theory.compare.report import format_summary

__all__ = ["add_arguments", "run", "prices_for"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``palsgd map`` (:data:`empirical.map_options.OPTIONS`)."""
    parser.epilog = EPILOG
    declare(parser, OPTIONS)


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
    tau = args.sync_delay  # >= 0: checked at parse time
    if tau > min(args.H) - 1:
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


#: flags of the generated family (``ProblemSource`` field -> flag)
_FAMILY_FLAGS = {o.dest: o.names[0] for o in FAMILY_OPTIONS}


def _source(args: argparse.Namespace) -> ProblemSource:
    """The problem of the map from the flags: each refused by the name typed when it does
    not apply (a generated-family flag with ``--problem``; ``--L``, ``--lam-min``, ``--F0``
    with Monte Carlo); the ranges of ``--K``, ``--d`` and ``--seed`` are checked when the
    command line is parsed."""
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
        exact_only = [_FAMILY_FLAGS[k] for k in given if k not in MC_FAMILY_FLAGS]
        if exact_only:
            raise UserInputError(
                f"{', '.join(exact_only)}: settings of the exact engine's quadratic family; "
                "--engine montecarlo builds --family from --K, --d, --sigma and --seed"
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
