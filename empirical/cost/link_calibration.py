"""Link calibration on this machine: timed gloo all-reduces (through the algorithms' own
communicator, so an emulated slow link applies as in training) and the least-squares fit of
latency and bandwidth (:mod:`empirical.cost.comm` for the formulas)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from scipy.optimize import nnls

from core.errors import UserInputError
from core.files import check_memory
from core.limits import check_processes
from core.validation import check_choice, check_int, check_number
from empirical.algorithms.base import Communicator, new_stats
from empirical.algorithms.slowlink import link_delay_fn
from empirical.cost.checks import check_workers
from empirical.cost.comm import allreduce_coefficients
from empirical.cost.profile_types import (
    ALLREDUCE_ALGORITHMS,
    LOCAL_PROFILE,
    ClusterProfile,
    LinkProfile,
)
from empirical.distributed import spawn_workers
from theory.validation import validate

__all__ = [
    "calibrate_link",
    "time_allreduce",
    "combine_ranks",
    "measure_allreduce",
    "calibrate_local_profile",
]


def calibrate_link(
    measurements: Iterable[tuple[float, int, float]],
    algorithm: str = "ring",
    *,
    name: str = "calibrated",
) -> LinkProfile:
    """Least-squares fit of latency and bandwidth to measured all-reduce times.

    ``measurements``: ``(nbytes, K, seconds)`` triples (e.g. from :func:`measure_allreduce`).
    With ``(a_i, b_i)`` the formula's coefficients for ``K_i``, the fit minimises
    ``sum_i ((a_i * latency + b_i * n_i / bandwidth - t_i) / t_i)^2`` (relative residuals, so
    small and large messages weigh alike) under ``latency >= 0``, ``1/bandwidth >= 0``
    (``scipy.optimize.nnls``). Needs at least two different sizes (or worker counts) with
    ``K >= 2``; raises :class:`UserInputError` when the data do not determine a bandwidth.
    """
    check_choice("algorithm", algorithm, ALLREDUCE_ALGORITHMS)
    rows, ys, sizes, ks = [], [], [], set()
    for i, m in enumerate(measurements):
        try:
            nbytes, K, secs = m
        except (TypeError, ValueError):
            raise UserInputError(
                f"measurement {i} must be a triple (nbytes, K, seconds), got {m!r}"
            ) from None
        n = check_number("nbytes", nbytes, 0.0, unit="bytes")
        K = check_workers(K)
        t = check_number("seconds", secs, 0.0, low_open=True, unit="s")
        if K < 2:
            continue
        a, b = allreduce_coefficients(K, algorithm)
        rows.append((a / t, b * n / t))
        ys.append(1.0)
        sizes.append(n)
        ks.add(K)
    if len(rows) < 2:
        raise UserInputError("calibrate_link needs at least two measurements with K >= 2")
    X = np.asarray(rows)
    if np.linalg.matrix_rank(X / np.linalg.norm(X, axis=0).clip(min=1e-300)) < 2:
        raise UserInputError(
            "the measurements do not separate latency from bandwidth: use at least two "
            "different message sizes"
        )
    coef, _ = nnls(X, np.asarray(ys))
    latency, inv_bw = float(coef[0]), float(coef[1])
    if inv_bw <= 0:
        raise UserInputError(
            "the measurements show no bandwidth term (time does not grow with the size): "
            "use larger messages"
        )
    rel = X @ coef - 1.0
    rms = float(np.sqrt(np.mean(rel**2)))
    src = (
        f"least-squares fit ({algorithm}) to {len(rows)} measurements, K in {sorted(ks)}, "
        f"{min(sizes):.0f}..{max(sizes):.0f} bytes; rms relative residual {100 * rms:.1f}%"
    )
    return LinkProfile(
        name=name, latency_s=latency, bandwidth_Bps=1.0 / inv_bw, algorithm=algorithm, source=src
    )


def time_allreduce(
    sizes: Sequence[int],
    *,
    repeats: int = 10,
    warmup: int = 2,
    trials: int = 3,
    group: Any = None,
    delay_s: float = 0.0,
    delay_per_byte_s: float = 0.0,
) -> list[list[float]]:
    """Time ``dist.all_reduce`` of flat fp32 buffers of ``sizes`` bytes in an existing group.

    Collective: every rank of ``group`` must call it with the same arguments. As nccl-tests
    do, each trial times ``repeats`` back-to-back calls after a barrier and reports their
    mean, so the time includes what a training loop sees between consecutive collectives
    (arrival skew of the ranks, wake-up delays), not only one isolated call. Calls go
    through the algorithms' own :class:`~empirical.algorithms.base.Communicator`, so an
    emulated slow link (``delay_s`` + ``delay_per_byte_s`` per byte) is applied exactly as
    in training. Returns, per size, this rank's ``trials`` per-call means in seconds.
    """
    validate(R=repeats)
    comm = Communicator(group, new_stats(), delay=link_delay_fn(delay_s, delay_per_byte_s))
    out: list[list[float]] = []
    for size in sizes:
        buf = torch.ones(max(1, math.ceil(int(size) / 4)), dtype=torch.float32)
        for _ in range(warmup):
            comm.all_reduce_sum(buf)
        means = []
        for _ in range(trials):
            dist.barrier(group=group)
            start = time.perf_counter()
            for _ in range(repeats):
                comm.all_reduce_sum(buf)
            means.append((time.perf_counter() - start) / repeats)
        out.append(means)
    return out


def _allreduce_worker(
    rank: int,
    world: int,
    sizes: list[int],
    repeats: int,
    warmup: int,
    trials: int,
    delay_s: float,
    delay_per_byte_s: float,
) -> list[list[float]]:
    return time_allreduce(
        sizes,
        repeats=repeats,
        warmup=warmup,
        trials=trials,
        delay_s=delay_s,
        delay_per_byte_s=delay_per_byte_s,
    )


def combine_ranks(
    sizes: Sequence[int],
    per_rank: Sequence[Sequence[Sequence[float]]],
    world: int,
    statistic: str = "mean",
) -> list[tuple[int, int, float]]:
    """Per size: ``statistic`` over trials of the slowest rank's per-call mean (a run of
    back-to-back collectives ends when its last participant is done)."""
    check_choice("statistic", statistic, ("mean", "median"))
    reduce = np.mean if statistic == "mean" else np.median
    out = []
    for i, size in enumerate(sizes):
        worst = np.max(np.asarray([r[i] for r in per_rank], dtype=float), axis=0)
        out.append((int(size), int(world), float(reduce(worst))))
    return out


def measure_allreduce(
    sizes: Sequence[int] = (4096, 65536, 1 << 20, 4 << 20),
    *,
    world_size: int = 2,
    repeats: int = 10,
    warmup: int = 2,
    trials: int = 3,
    delay_s: float = 0.0,
    delay_per_byte_s: float = 0.0,
    statistic: str = "mean",
    timeout_s: float = 300.0,
) -> list[tuple[int, int, float]]:
    """Spawn ``world_size`` gloo processes on this machine and time all-reduces of flat fp32
    buffers of ``sizes`` bytes (:func:`time_allreduce`).

    Returns ``(nbytes, world_size, seconds)`` per size: the mean (``statistic="mean"``) or
    median over ``trials`` of the slowest rank's mean time per call in ``repeats``
    back-to-back calls. ``delay_s``,
    ``delay_per_byte_s``: an emulated slow link (:mod:`empirical.algorithms.slowlink`).
    """
    world = check_int("world_size", world_size, 2, integral_floats=True)
    check_processes(world, "world_size")
    sizes = [int(check_number("sizes", s, 0.0, low_open=True, unit="bytes")) for s in sizes]
    if not sizes:
        raise UserInputError("'sizes' must name at least one message size")
    # every process holds one buffer of the largest size, and gloo a copy of it
    check_memory(2.0 * max(sizes) * world, f"sizes {max(sizes)} bytes on {world} processes")
    check_int("repeats", repeats, 1, integral_floats=True)
    check_int("warmup", warmup, 0, integral_floats=True)
    check_int("trials", trials, 1, integral_floats=True)
    per_rank = spawn_workers(
        _allreduce_worker,
        world,
        sizes,
        int(repeats),
        int(warmup),
        int(trials),
        float(delay_s),
        float(delay_per_byte_s),
        timeout_s=timeout_s,
    )
    return combine_ranks(sizes, per_rank, world, statistic)


def calibrate_local_profile(
    *,
    world_size: int = 2,
    sizes: Sequence[int] = (4096, 65536, 1 << 20, 4 << 20),
    repeats: int = 10,
    trials: int = 3,
    algorithm: str = "ring",
) -> ClusterProfile:
    """The ``"cpu-gloo-local"`` profile: gloo all-reduce on this machine, measured now."""
    meas = measure_allreduce(sizes, world_size=world_size, repeats=repeats, trials=trials)
    link = calibrate_link(meas, algorithm, name="gloo-loopback")
    return ClusterProfile(
        LOCAL_PROFILE,
        world_size,
        link,
        "cpu",
        f"calibrated at run time on this machine ({world_size} gloo processes)",
    )
