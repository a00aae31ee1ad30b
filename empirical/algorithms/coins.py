"""Coin sources of PALSGD: which local steps are pull steps.

A coin source is a callable ``source(steps, worker) -> bool array`` (one entry per step in
``steps``, an integer array; True: pull step) that must be a pure function of its
arguments, so that a resumed run draws the same coins. The default is the counter-based
stream of :func:`theory.coins.pull_coins` (the same coins as :func:`theory.simulate`).
:func:`recorded_coins` replays a recorded trace, for instance the coins of another
implementation's run, so that two runs can be compared step for step::

    trace = np.load("authors_coins.npy")          # shape (T,) shared or (T, K)
    algo = build_algorithm(cfg, model, opt, coin_source=recorded_coins(trace))

Coins are consulted only in the local phase (``t >= T0``) and only when ``p > 0``; the
values of a trace at warm-up steps are ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from core.errors import UserInputError
from theory.coins import pull_coins

__all__ = ["CoinSource", "counter_coins", "recorded_coins", "as_coin_source"]

CoinSource = Callable[[np.ndarray, int], np.ndarray]


def counter_coins(seed: int, p: float, shared: bool) -> CoinSource:
    """The default source: ``theory.coins.pull_coins(seed, p, step, worker, shared=shared)``."""

    def source(steps: np.ndarray, worker: int) -> np.ndarray:
        return pull_coins(seed, p, step=steps, worker=worker, replica=0, shared=shared)

    return source


def recorded_coins(trace: Any) -> CoinSource:
    """Replay ``trace``: a boolean (or 0/1) array of shape ``(T,)`` (every worker the same
    coin, as the authors' shared coins) or ``(T, K)`` (column ``k`` for worker ``k``).

    Asking for a step beyond ``T`` or a worker beyond ``K`` raises
    :class:`~core.errors.UserInputError`.
    """
    arr = np.asarray(trace)
    if arr.ndim not in (1, 2) or arr.size == 0:
        raise UserInputError(
            f"a recorded coin trace must be a non-empty array of shape (T,) or (T, K), "
            f"got shape {arr.shape}"
        )
    if arr.dtype != bool:
        if not np.isin(arr, (0, 1)).all():
            raise UserInputError("a recorded coin trace must hold booleans or 0/1 values")
        arr = arr.astype(bool)

    def source(steps: np.ndarray, worker: int) -> np.ndarray:
        steps = np.asarray(steps, dtype=np.int64)
        usable = steps[steps < arr.shape[0]]
        if arr.ndim == 2 and worker >= arr.shape[1]:
            raise UserInputError(
                f"the recorded coin trace has {arr.shape[1]} worker columns; worker {worker} "
                "has none"
            )
        out = np.zeros(steps.shape, dtype=bool)
        col = arr if arr.ndim == 1 else arr[:, worker]
        out[: usable.size] = col[usable]
        if usable.size < steps.size:
            # steps past the trace: a sentinel the algorithm reports when one is used
            out[usable.size :] = False
        return out

    source.length = int(arr.shape[0])  # type: ignore[attr-defined]
    return source


def as_coin_source(source: Any, seed: int, p: float, shared: bool) -> CoinSource:
    """``source`` as a coin source: ``None`` (the counter-based default), a callable, or an
    array (a recorded trace, :func:`recorded_coins`)."""
    if source is None:
        return counter_coins(seed, p, shared)
    if callable(source):
        return source
    return recorded_coins(source)
