"""The trainer's steps one by one, each inside a check of host-device synchronisation.

:func:`checked_steps` is a :func:`empirical.distributed.spawn_workers` worker: it builds
the real trainer (``prepare`` -> ``init_distributed`` -> ``Trainer``) with ``--device
cuda`` and runs ``T`` steps through ``Trainer._one_step`` (what the training loop runs
between its logging, evaluation and checkpoint steps), classifying each as a warm-up,
gradient or pull step, with or without a sync after it.

* ``mode="count"`` (no GPU): CUDA faked (:mod:`fake_cuda`, ``gpus`` devices) and every
  step inside a :class:`fake_cuda.SyncCounter`; the batch stream (a host-side pipeline in a
  GPU run too) and the inner optimizer's host-side step counters are not counted.
* ``mode="debug"`` (a real GPU): the steady-state steps (gradient and pull steps with no
  sync after them, after the warm-up) run under ``torch.cuda.set_sync_debug_mode("error")``,
  which raises on a synchronising CUDA call; the message is recorded for the step and the
  steps end there. Meant for one process (a control that stops inside a collective would
  leave other ranks waiting).

Both modes also run controls that read values from the device on purpose (the finiteness
check, the window loss, the step times, the consensus statistic) to show the check sees a
synchronisation when there is one.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = ["STEP_RUNS", "SYNC_MODES", "checked_steps", "checked_runs"]

#: PALSGD with a warm-up, pulls, syncs (an outer Nesterov step, the consensus statistic
#: at every sync), gradient clipping and two micro-batches per step, on GPT-Neo and ResNet
_LM = dict(
    algorithm="palsgd",
    T=14,
    T0=2,
    H=4,
    p=0.5,
    eta=1.0,
    outer="nesterov",
    gamma=0.7,
    mu=0.9,
    A=2,
    batch_size=2,
    seq_len=16,
    eval_interval=0,
    checkpoint_interval=0,
    consensus_interval=1,
    clip_grad_norm=1.0,
    progress=False,
)
STEP_RUNS = {
    "gptneo": _LM,
    "resnet": dict(_LM, model="resnet-tiny", dataset="embedded-images", seq_len=None, T=8),
}
#: every other sync mode on GPT-Neo (the blocking Nesterov sync is ``STEP_RUNS["gptneo"]``):
#: the blocking average, the outer steps interleaved with the next step's micro-batches, the
#: emulated slow link, and the overlapped sync (``--sync-delay``) with an outer optimizer,
#: with the average and with the slow link
SYNC_MODES = {
    "blocking-average": dict(_LM, outer="average", gamma=1.0, mu=0.0),
    "blocking-interleaved": dict(_LM, outer_steps_per_sync=2, interleave_outer_steps=True),
    "blocking-slowlink": dict(_LM, comm_delay_s=1e-3),
    "overlapped-nesterov": dict(_LM, sync_delay=2),
    "overlapped-average": dict(_LM, sync_delay=1, outer="average", gamma=1.0, mu=0.0),
    "overlapped-slowlink": dict(_LM, sync_delay=3, comm_delay_s=1e-3),
}


def _steady(kind: str, synced: bool) -> bool:
    return kind in ("grad", "pull") and not synced


@contextlib.contextmanager
def _sync_errors(errors: list[str]) -> Iterator[None]:
    """The block under ``set_sync_debug_mode("error")``; a raised sync error is noted."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    except RuntimeError as exc:
        if "synchroniz" not in str(exc):
            raise
        errors.append(str(exc).splitlines()[0])
    finally:
        torch.cuda.set_sync_debug_mode("default")


def checked_steps(
    rank: int, world: int, out: str, overrides: dict, mode: str = "count", gpus: int = 2
) -> dict[str, Any]:
    """One rank (see the module docstring); returns the bound device, each step's kind and
    what it synchronised (``calls``), and the count of each control."""
    os.environ["LOCAL_RANK"] = str(rank)
    if mode == "count":
        from harness import fake_cuda

        fake_cuda.install(gpus)
    from empirical.config import resolve_config
    from empirical.distributed import init_distributed
    from empirical.train.prepare import backend_of, prepare
    from empirical.train.trainer import Trainer

    over = {k: v for k, v in overrides.items() if v is not None}
    cfg = resolve_config(overrides={**over, "device": "cuda", "nproc": world, "output_dir": out})
    prep = prepare(cfg)
    bound = torch.device(prep.device)
    trainer = Trainer(prep, init_distributed(backend_of(cfg, prep.device), bound=bound))
    algo, opt = trainer.algo, trainer.state.optimizer

    def host_side(t: torch.Tensor) -> bool:  # AdamW's step counters (not capturable)
        return any(t is s.get("step") for s in opt.state.values())

    if mode == "count":
        counter = fake_cuda.SyncCounter(host_side)
        next_batch = trainer._next_batch

        def batch_uncounted():
            with counter.paused():
                return next_batch()

        trainer._next_batch = batch_uncounted

    def checked(fn: Callable[[], Any], steady: bool = True) -> list[str]:
        if mode == "count":
            with fake_cuda.SyncCounter(host_side) as c:
                fn()
            return c.calls
        errors: list[str] = []
        if steady:
            with _sync_errors(errors):
                fn()
        else:
            fn()
        return errors

    steps = []
    for _ in range(cfg.T):
        s = algo.t
        kind = "warmup" if algo.in_warmup else algo.next_action()
        synced = not algo.in_warmup and algo.sync_due_after(s)
        landed = algo.sync.lands_after(s)  # an overlapped sync's outer step lands after s
        if mode == "count":
            counter.calls.clear()
            with counter:
                trainer._one_step()
            calls = list(counter.calls)
        else:
            calls = checked(trainer._one_step, steady=_steady(kind, synced))
        steps.append({"t": s, "kind": kind, "synced": synced, "landed": landed, "calls": calls})
        if calls and mode == "debug":
            break  # the step stopped where it synchronised: the state is not a step's
    controls = {}
    for name, fn in {
        "consensus": lambda: algo.resolve_timings(),
        "finite": lambda: trainer.monitor.check_finite(algo.t, params=False),
        "log": lambda: trainer.monitor.window_loss(),
        "times": lambda: trainer.monitor.resolve_times(),
        "float(step) on the device": lambda: torch.tensor(float(algo.t), device=trainer.device),
    }.items():
        controls[name] = len(checked(fn))
    return {
        "device": prep.device,
        "steps": steps,
        "controls": controls,
        "consensus": algo.stats["last_consensus"],
    }


def checked_runs(rank: int, world: int, out: str, runs: dict[str, dict]) -> dict[str, Any]:
    """:func:`checked_steps` (``mode="count"``) for each of ``runs`` in turn, in one
    process group (one spawn of the ranks for every run); name -> its result."""
    return {
        name: checked_steps(rank, world, os.path.join(out, name), overrides)
        for name, overrides in runs.items()
    }
