"""The algorithm table and the algorithm spec: every algorithm the toolkit knows, once.

:data:`ALGORITHMS` is the one table of algorithm definitions (:class:`Algorithm`: name,
aliases, local steps or not, sync rule, pull steps or not, warm-up, allowed outer updates,
coin models, exact oracle, simulator, distributed name and implementation). Every list of
names, argparse choice and help text of the toolkit is derived from it; :data:`VARIANTS`
names compositions of its parts (SlowMo over Local SGD is the Local-SGD rounds of
``diloco`` with outer SGD momentum).

:class:`AlgorithmSpec` is the one description of an algorithm run: a table name and its
hyperparameters, validated against the table. The simulator (:mod:`theory.simulate`), the
exact moment recursions (:mod:`theory.moments`), the verifier (a bound holds the spec it is
stated for, :class:`theory.bound.Bound`), the checker, the map (:mod:`theory.compare`) and
the distributed configuration (:class:`empirical.algorithms.AlgorithmConfig` holds one plus
its own switches) all take it. Rules that belong to an algorithm are the spec's methods:
the pull coefficient ``alpha*eta/p`` and its stability verdict (:func:`pull_stability`),
the allowed ``p``, outer updates, coins and warm-up, the authors' sync offset.

Notation (Naganuma et al., TMLR 2025, Algorithm 1; README): ``K`` workers, ``H`` local steps
between syncs (pull steps count), ``p`` pull probability, ``alpha`` inner learning rate,
``eta`` pull rate (pull coefficient ``alpha*eta/p``), ``T0`` warm-up steps, ``gamma, mu``
outer learning rate and momentum. The sync schedule and the outer update are
:mod:`theory.sync` (re-exported here).

Files: ``table.py`` (the table, the presets, the name lists and choices derived from them,
the sync-delay and authors'-offset rules of a row), ``spec.py`` (:class:`AlgorithmSpec`,
its rules, the pull coefficient and its verdict, what a bound records of its spec).
"""

from __future__ import annotations

from theory.algorithm.spec import (
    PULL_EDGE,
    AlgorithmSpec,
    PullStability,
    covered_names,
    fields_fixed,
    pull_coefficient,
    pull_stability,
    spec_from_summary,
    spec_summary,
)
from theory.algorithm.table import (
    ALGORITHMS,
    COINS,
    DILOCO_DEFAULT_GAMMA,
    DILOCO_DEFAULT_MU,
    DISTRIBUTED_NAMES,
    IMPLEMENTATION_KEYS,
    KINDS,
    LABELS,
    LOCAL_NAMES,
    NAMES,
    SYNC_RULES,
    VARIANTS,
    WARMUP_NAMES,
    Algorithm,
    Variant,
    authors_sync_offset,
    check_sync_delay,
    describe_choices,
    distributed_choices,
    local_choices,
    lookup,
)
from theory.sync import OUTERS, is_landing_step, is_sync_step, outer_step

__all__ = [
    "Algorithm", "Variant", "AlgorithmSpec", "PullStability", "ALGORITHMS", "VARIANTS",
    "NAMES", "KINDS", "LABELS", "DISTRIBUTED_NAMES", "LOCAL_NAMES", "WARMUP_NAMES", "OUTERS", "COINS",
    "SYNC_RULES", "IMPLEMENTATION_KEYS",
    "DILOCO_DEFAULT_GAMMA", "DILOCO_DEFAULT_MU", "PULL_EDGE", "lookup", "fields_fixed",
    "covered_names", "spec_summary", "spec_from_summary", "distributed_choices",
    "describe_choices", "local_choices", "pull_coefficient", "pull_stability", "is_sync_step", "is_landing_step",
    "check_sync_delay", "authors_sync_offset", "outer_step",
]  # fmt: skip
