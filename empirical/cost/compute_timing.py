"""Compute calibration on this machine: the measured times of a gradient step, a pull step
and a sync's local work, on any model or on a model of :mod:`empirical.models` with seeded
synthetic batches."""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch

from core.errors import UserInputError
from core.validation import check_choice, check_int, check_number
from empirical import models
from empirical.algorithms.flat import FlatLayout, flat_dtype
from empirical.algorithms.outer import OuterOptimizer
from empirical.cost.profiles import ComputeProfile
from theory.algorithm import OUTERS
from theory.validation import validate, validate_one

__all__ = ["profile_compute", "measure_compute"]

Clock = Callable[[], float]


def _clock(device: torch.device) -> Clock:
    """``time.perf_counter`` after synchronising CUDA (on a CUDA device)."""
    cuda = device.type == "cuda"

    def now() -> float:
        if cuda:
            torch.cuda.synchronize(device)
        return time.perf_counter()

    return now


def _time_grad_steps(
    model: Any,
    make_batch: Callable[[int], Any],
    loss_fn: Callable[[Any, Any], Any],
    optimizer: Any,
    *,
    A: int,
    repeats: int,
    warmup: int,
    idle: float,
    burst: int,
    now: Clock,
) -> tuple[list[float], list[float], list[float]]:
    """Per timed repetition: the gradient step, its inner optimizer step and the backward
    pass of its last micro-batch (seconds)."""
    grad_t, inner_t, bwd_t = [], [], []
    batch_index = 0
    for r in range(warmup + repeats):
        if idle and r % burst == 0:
            time.sleep(idle)
        start = now()
        bwd = 0.0
        for m in range(A):
            batch = make_batch(batch_index)
            batch_index += 1
            loss = loss_fn(model, batch) / A
            b0 = now() if m == A - 1 else 0.0
            loss.backward()
            if m == A - 1:
                bwd = now() - b0
        mid = now()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        end = now()
        if r >= warmup:
            grad_t.append(end - start)
            inner_t.append(end - mid)
            bwd_t.append(bwd)
    return grad_t, inner_t, bwd_t


def _time_pull_steps(
    params: list[torch.Tensor],
    z_views: list[torch.Tensor],
    *,
    repeats: int,
    warmup: int,
    now: Clock,
) -> list[float]:
    """Per timed repetition: ``x <- lerp(x, z, 1e-3)`` on every parameter tensor (seconds)."""
    same = all(v.dtype == p.dtype for v, p in zip(z_views, params, strict=True))
    pull_t = []
    with torch.no_grad():
        for r in range(warmup + repeats):
            start = now()
            if same:
                torch._foreach_lerp_(params, z_views, 1e-3)
            else:
                for p, v in zip(params, z_views, strict=True):
                    p.lerp_(v.to(p.dtype), 1e-3)
            end = now()
            if r >= warmup:
                pull_t.append(end - start)
    return pull_t


def _time_syncs(
    params: list[torch.Tensor],
    layout: FlatLayout,
    z: torch.Tensor,
    *,
    outer: str,
    repeats: int,
    warmup: int,
    now: Clock,
) -> list[float]:
    """Per timed repetition: a sync's local work (flat copy, ``Delta = z - x``, the outer
    step, copy back; no collective), in seconds."""
    anchor = z.clone()
    outer_opt = None if outer == "average" else OuterOptimizer(anchor, outer, 0.1, 0.9)
    x = torch.zeros_like(z)
    sync_t = []
    with torch.no_grad():
        for r in range(warmup + repeats):
            start = now()
            layout.gather(params, x)
            x.sub_(anchor).neg_()
            if outer_opt is not None:
                outer_opt.step(x)
            else:
                anchor.sub_(x)
            layout.scatter(anchor, params)
            end = now()
            if r >= warmup:
                sync_t.append(end - start)
    return sync_t


def profile_compute(
    model: Any,
    make_batch: Callable[[int], Any],
    loss_fn: Callable[[Any, Any], Any],
    *,
    accumulation: int = 1,
    optimizer: Any = None,
    repeats: int = 10,
    warmup: int = 2,
    outer: str = "nesterov",
    statistic: str = "mean",
    idle_s: float = 0.0,
    burst: int = 1,
    source: str = "",
) -> ComputeProfile:
    """Measure the compute of one gradient step, one pull step and a sync's local work.

    ``model`` (an ``nn.Module`` on its device), ``make_batch(i)`` the i-th micro-batch,
    ``loss_fn(model, batch)`` a scalar loss, ``optimizer`` the inner optimizer (default
    ``AdamW(lr=1e-3)``; it is stepped, so pass a copy of the model if it matters).
    Gradient step: ``accumulation`` forward/backward passes plus ``optimizer.step()`` and
    ``zero_grad``. Pull step: ``torch._foreach_lerp_`` of every trainable tensor toward an
    anchor (what :class:`~empirical.algorithms.LocalAlgorithm` runs). Sync: flat copy of
    the parameters, ``Delta = z - x``, one ``outer`` optimizer step on ``z`` (``"average"``,
    ``"sgd"`` or ``"nesterov"``), copy back (collective excluded). ``statistic`` over the
    ``repeats`` timed repetitions (after ``warmup`` untimed ones): ``"mean"`` (the right
    estimate for a total of many steps) or ``"median"`` (robust to rare outliers). CUDA is
    synchronised before every reading. ``idle_s``: seconds slept before every ``burst``
    consecutive gradient steps (outside the timing). On a dedicated machine it changes
    nothing; on a shared, oversubscribed CPU a process that computes without pause gets only
    its fair share of a core, whereas a communication-bound run computes in short bursts
    after waits and is scheduled at once, so a calibration for such a run should pause like
    it (e.g. for the duration of an all-reduce, in bursts of the steps between two
    collectives: 1 for DDP, ``H`` for Local SGD).
    """
    validate(A=accumulation, R=repeats)
    check_choice("outer", outer, OUTERS)
    check_choice("statistic", statistic, ("mean", "median"))
    idle = check_number("idle_s", idle_s, 0.0, unit="s")
    check_int("burst", burst, 1)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise UserInputError("the model has no trainable parameters")
    device = params[0].device
    now = _clock(device)
    if optimizer is None:
        optimizer = torch.optim.AdamW(params, lr=1e-3)
    A = int(accumulation)
    timing = dict(repeats=repeats, warmup=warmup, now=now)
    grad_t, inner_t, bwd_t = _time_grad_steps(
        model, make_batch, loss_fn, optimizer, A=A, idle=idle, burst=burst, **timing
    )
    layout = FlatLayout(params)
    z = torch.zeros(layout.numel, dtype=flat_dtype(params), device=device)
    layout.gather(params, z)
    pull_t = _time_pull_steps(params, layout.views(z), **timing)
    sync_t = _time_syncs(params, layout, z, outer=outer, **timing)
    med = statistics.fmean if statistic == "mean" else statistics.median
    return ComputeProfile(
        grad_step_s=med(grad_t),
        pull_step_s=med(pull_t),
        inner_step_s=min(med(inner_t), med(grad_t)),
        backward_s=med(bwd_t),
        sync_local_s=med(sync_t),
        accumulation=A,
        source=source
        or (
            f"measured on {device} ({torch.get_num_threads()} threads): {statistic}s of {repeats} "
            f"repetitions, {layout.numel} parameters, A = {A}"
        ),
    )


def _to_device(batch: Any, device: str) -> Any:
    if isinstance(batch, Mapping):
        return {k: v.to(device) for k, v in batch.items()}
    return tuple(t.to(device) for t in batch)


def _check_shape(task: str, seq_len: Any, size: Any) -> None:
    """The sequence length (``lm``) or image size (``image``) of :func:`measure_compute`."""
    if task == "lm":
        if seq_len is None:
            raise UserInputError("'seq_len' is required for a language model")
        check_int("seq_len", seq_len, 2)
    if task == "image":
        check_int("image_size", size, 8)


def _synthetic_batches(
    model: Any, task: str, batch_size: int, seq_len: int | None, size: int, seed: int
) -> list[Any]:
    """Two seeded batches: token ids in ``[0, vocab)`` (``lm``) or images with labels."""
    gen = torch.Generator().manual_seed(seed)
    if task == "lm":
        vocab = int(model.config.vocab_size)
        return [
            {"input_ids": torch.randint(0, vocab, (batch_size, seq_len), generator=gen)}
            for _ in range(2)
        ]
    classes = int(model.fc.out_features) if hasattr(model, "fc") else 10
    return [
        (
            torch.randn(batch_size, 3, size, size, generator=gen),
            torch.randint(0, classes, (batch_size,), generator=gen),
        )
        for _ in range(2)
    ]


def measure_compute(
    model_name: str,
    *,
    batch_size: int,
    seq_len: int | None = None,
    image_size: int | None = None,
    accumulation: int = 1,
    device: str = "cpu",
    repeats: int = 10,
    warmup: int = 2,
    seed: int = 0,
    optimizer: str = "adamw",
    **overrides: Any,
) -> ComputeProfile:
    """:func:`profile_compute` on a model of :data:`empirical.models.MODEL_NAMES` with
    synthetic batches (seeded): token ids in ``[0, vocab)`` of shape
    ``(batch_size, seq_len)`` for the GPT-Neo models, images ``(batch_size, 3, image_size,
    image_size)`` with labels for the ResNets. ``optimizer``: ``"adamw"`` (lr 1e-3) or
    ``"sgd"``. ``overrides`` go to :func:`empirical.models.build_model`.
    """
    task = models.model_task(model_name)
    validate_one("A", accumulation)
    check_int("batch_size", batch_size, 1)
    check_choice("optimizer", optimizer, ("adamw", "sgd"))
    size = 32 if image_size is None else image_size
    _check_shape(task, seq_len, size)
    model = models.build_model(model_name, seed=seed, **overrides).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt_class = torch.optim.AdamW if optimizer == "adamw" else torch.optim.SGD
    batches = _synthetic_batches(model, task, batch_size, seq_len, size, seed)
    batches = [_to_device(b, device) for b in batches]
    prof = profile_compute(
        model,
        lambda i: batches[i % len(batches)],
        lambda m, batch: models.compute_loss(m, batch, task),
        accumulation=accumulation,
        optimizer=opt_class(params, lr=1e-3),
        repeats=repeats,
        warmup=warmup,
    )
    shape = f"seq_len {seq_len}" if task == "lm" else f"image {image_size or 32}px"
    return dataclasses.replace(
        prof,
        source=f"measure_compute({model_name!r}, batch {batch_size}, {shape}, A = "
        f"{accumulation}, {optimizer}) on {device}: " + prof.source,
    )
