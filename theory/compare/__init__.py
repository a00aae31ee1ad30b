"""Which method reaches a target cheaper? The answer from the dynamics, every method tuned alike.

The comparison engine behind ``palsgd map`` (README, ``docs/when_pulling_pays.md``):

* ``pairs.py``: exact moments of one round on quadratics whose workers have different
  diagonal Hessians (pair moments of the workers' coin paths, independent or shared coins);
* ``scan.py``: the anchor's round map and the exact first round reaching a target;
* ``exact.py``: first-passage rounds of many configurations of a method;
* ``methods.py``: the compared methods (each an :class:`~theory.algorithm.AlgorithmSpec` of
  the algorithm table), their tuning grids and the cost of a round
  (gradient evaluations, communication rounds, modelled seconds with :class:`Prices`);
* ``tune.py``: grids of one size for every method, extended at their edges;
* ``spec.py``, ``run.py``, ``run_mc.py``, ``records.py``: a map's cells, its resumable
  computation (exact or Monte Carlo) and its typed results; ``summary.py``,
  ``summary_records.py``, ``diagnose.py``, ``report.py``, ``plots.py``: the answer (largest
  ``H`` within a budget, wins and losses, why, as typed records) and its pictures (the
  records' base, shared with verify's: :class:`core.records.JsonRow`, converted to dicts
  only where map.json and map.csv are written);
* ``averages.py``, ``bounds_side.py``: the registered bounds scored against the truth
  (bound map, agreement, tightness at the tuned point, the term that misses).
"""

from theory.compare.methods import (
    BASELINES,
    BUDGET_KINDS,
    METHODS,
    PALSGD_METHODS,
    Method,
    Prices,
    round_cost,
)
from theory.compare.records import CellResult, MapResult
from theory.compare.spec import MapSpec, ProblemSource
from theory.compare.tune import Grid, Tuned

__all__ = [
    "BASELINES",
    "BUDGET_KINDS",
    "METHODS",
    "PALSGD_METHODS",
    "Method",
    "Prices",
    "round_cost",
    "CellResult",
    "MapResult",
    "run_map",
    "MapSpec",
    "ProblemSource",
    "Grid",
    "Tuned",
]


def __getattr__(name: str) -> object:
    """``run_map`` on first use (PEP 562): it imports sympy and scipy, which `palsgd map
    --help` does not need (tests/test_cli_startup.py)."""
    if name == "run_map":
        from theory.compare.run import run_map

        return run_map
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
