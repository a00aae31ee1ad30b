"""Step traces: cumulative counts of gradient steps, pull steps, warm-up steps and syncs
per step of a run, exact (from the trainer's own coins and sync rule), expected (for the
paper-scale prediction) or read from a finished run; and the expected sync wait of PALSGD's
independent coins."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import UserInputError
from empirical.cost.checks import check_workers
from empirical.metrics import read_jsonl
from theory.algorithm import is_sync_step, lookup
from theory.coins import expected_max_binomial, pull_coins, round_excess
from theory.validation import validate

__all__ = [
    "expected_max_binomial",
    "round_excess",
    "step_trace",
    "expected_trace",
    "load_trace",
]


def step_trace(config: Any, K: int, T: int) -> dict[str, np.ndarray]:
    """The exact step trace of ``T`` steps of an :class:`~empirical.algorithms.AlgorithmConfig`
    on ``K`` workers, from the same counter-based coins the trainer draws.

    Row ``i`` holds cumulative counts after step ``i + 1`` for rank 0: ``step``,
    ``grad_steps``, ``pull_steps``, ``warmup_steps``, ``syncs``, ``allreduce_calls`` and
    ``critical_grad_steps`` (rank 0's gradient steps plus, for every completed round, the
    excess of the round's largest gradient-step count over all workers over rank 0's: the
    gradient steps on the critical path that a sync makes rank 0 wait for). With an
    overlapped sync (``sync_delay = tau``) also ``window_grad_steps`` and
    ``window_pull_steps``: rank 0's gradient and pull steps between each sync and its
    landing (the ``tau`` steps after it, fewer when the run ends first), counted at the
    sync's row: the compute that hides the sync's all-reduce.
    """
    K = check_workers(K)
    validate(T=T)
    T = int(T)
    t = np.arange(T)
    if not config.spec.local:
        ones = t + 1
        zeros = np.zeros(T, dtype=np.int64)
        return {
            "step": ones,
            "grad_steps": ones,
            "pull_steps": zeros,
            "warmup_steps": zeros,
            "syncs": zeros,
            "allreduce_calls": ones,
            "critical_grad_steps": ones.copy(),
        }
    T0 = int(config.warmup_steps)
    local = t >= T0
    if config.has_pulls:
        coins = pull_coins(
            config.seed,
            config.p,
            t[:, None],
            np.arange(K)[None, :],
            shared=config.coins == "shared",
        )
        pulls = coins & local[:, None]
    else:
        pulls = np.zeros((T, K), dtype=bool)
    grads = ~pulls
    sync = is_sync_step(t, T0, config.H, config.sync_offset)
    # a round is the run of steps that ends with a sync; its id counts earlier syncs
    round_id = np.concatenate([[0], np.cumsum(sync)[:-1]])
    wait = np.zeros(T)
    ends = np.nonzero(sync)[0]  # the j-th sync ends round j
    if ends.size:
        rid = round_id[local]
        g_local = grads[local]
        counts = np.stack(
            [np.bincount(rid, weights=g_local[:, k], minlength=ends.size) for k in range(K)], axis=1
        )[: ends.size]
        wait[ends] = counts.max(axis=1) - counts[:, 0]
    grad0 = np.cumsum(grads[:, 0])
    syncs = np.cumsum(sync)
    warm = np.cumsum(~local)
    out = {
        "step": t + 1,
        "grad_steps": grad0,
        "pull_steps": np.cumsum(pulls[:, 0]),
        "warmup_steps": warm,
        "syncs": syncs,
        "allreduce_calls": warm + syncs,
        "critical_grad_steps": grad0 + np.cumsum(wait),
    }
    tau = int(getattr(config, "sync_delay", 0))
    if tau:
        last = np.minimum(ends + tau, T - 1)  # the window of the sync after step s: s+1..last
        for key, col in (("window_grad_steps", grads), ("window_pull_steps", pulls)):
            before = np.concatenate([[0], np.cumsum(col[:, 0])])
            per_sync = np.zeros(T)
            per_sync[ends] = before[last + 1] - before[ends + 1]
            out[key] = np.cumsum(per_sync)
    return out


def expected_trace(
    steps: float, *, T0: int, H: int, p: float, K: int, coins: str, method: str
) -> dict[str, np.ndarray]:
    """One-row expected-count trace of a local method run for ``steps`` steps."""
    T0 = min(int(T0), int(steps)) if lookup(method).warms_up else 0
    local = max(steps - T0, 0.0)
    syncs = math.floor(local / H)
    grad = T0 + local * (1.0 - p)
    crit = grad + syncs * round_excess(H, p, K, coins)
    return {
        k: np.asarray([v], dtype=float)
        for k, v in {
            "step": steps,
            "grad_steps": grad,
            "pull_steps": local * p,
            "syncs": syncs,
            "warmup_steps": T0,
            "critical_grad_steps": crit,
        }.items()
    }


_TRACE_KEYS = ("step", "grad_steps", "pull_steps", "syncs")
_OPTIONAL_KEYS = (
    "warmup_steps",
    "allreduce_calls",
    "critical_grad_steps",
    "window_grad_steps",
    "window_pull_steps",
    "wall_s",
)


def load_trace(source: Any) -> dict[str, np.ndarray]:
    """A step trace as cumulative numpy arrays, from

    * a mapping of sequences (``step``, ``grad_steps``, ``pull_steps``, ``syncs``; optional
      ``warmup_steps``, ``allreduce_calls``, ``critical_grad_steps``, ``wall_s``), e.g.
      :func:`step_trace` or a run's statistics (scalars give a one-row trace);
    * a list of records (the ``"train"`` records of :mod:`empirical.metrics`);
    * a path: a run's output directory (its ``metrics.jsonl``), a ``metrics.jsonl`` or a
      ``train.csv`` file.
    """
    if isinstance(source, str | Path):
        source = _read_trace_file(Path(source))
    if isinstance(source, Mapping):
        cols = {k: source[k] for k in (*_TRACE_KEYS, *_OPTIONAL_KEYS) if k in source}
    elif isinstance(source, Sequence) and source and all(isinstance(r, Mapping) for r in source):
        recs = [r for r in source if r.get("kind", "train") == "train"]
        cols = {}
        for k in (*_TRACE_KEYS, *_OPTIONAL_KEYS):
            vals = [r.get(k) for r in recs]
            if vals and all(v is not None and v != "" for v in vals):
                cols[k] = vals
    else:
        raise UserInputError(
            "a trace must be a mapping of columns, a list of train records, or a path to a run "
            f"directory / metrics.jsonl / train.csv; got {type(source).__name__}"
        )
    for k in _TRACE_KEYS:
        if k not in cols:
            raise UserInputError(f"the trace is missing the field '{k}'")
    out: dict[str, np.ndarray] = {}
    for k, v in cols.items():
        arr = np.atleast_1d(np.asarray(v, dtype=float))
        if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise UserInputError(f"trace field '{k}' must hold finite nonnegative numbers")
        out[k] = arr
    n = {len(v) for v in out.values()}
    if len(n) != 1:
        raise UserInputError(
            f"trace fields have different lengths: { {k: len(v) for k, v in out.items()} }"
        )
    for k in (*_TRACE_KEYS, *_OPTIONAL_KEYS[:-1]):
        if k in out and np.any(np.diff(out[k]) < 0):
            raise UserInputError(f"trace field '{k}' must be cumulative (nondecreasing)")
    return out


def _read_trace_file(path: Path) -> list[dict[str, Any]] | dict[str, Any]:
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.exists():
        raise UserInputError(f"trace file '{path}' does not exist")
    if path.suffix == ".csv":
        with open(path, newline="") as fh:
            return [dict(r) for r in csv.DictReader(fh)]
    try:
        return read_jsonl(path, kind="train")
    except (OSError, ValueError) as exc:
        raise UserInputError(f"cannot read trace '{path}': {exc}") from None
