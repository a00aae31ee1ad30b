"""Benchmark: K PALSGD workers in one process, stepped in a Python loop vs stacked (CPU).

For every ``K`` of ``--K``, two ways of running ``K`` PALSGD workers of a small MLP
(``--width`` hidden units, ``--depth`` hidden layers, float32, cross entropy on random
data) in ONE process, the same coins and syncs:

* ``loop``: ``K`` models, each with its own ``torch.optim`` optimizer and
  :class:`~empirical.algorithms.local.LocalAlgorithm` (the rank's per-worker update),
  stepped one after another; the sync a mean over the ``K`` flat parameter buffers and each
  instance's outer step;
* ``stacked``: :class:`~empirical.algorithms.stacked.StackedWorkers`, the ``K`` workers'
  parameters stacked along a leading axis, forward/backward vmapped, the sync a mean over
  the worker axis.

Reported: seconds per step (the median of ``--repeats`` timed runs of ``--steps`` steps,
after ``--warmup`` untimed steps; syncs included) and ``loop / stacked`` (above 1: the
stacked path is faster). Intra-op threads: ``--threads``. No device is used.

Run: ``python benchmarks/bench_stacked.py [--K 2 4 8] [--width 256] [--steps 32]
[--json FILE]``.
"""

from __future__ import annotations

import argparse
import copy
import platform
import statistics
import sys
import time
from typing import Any

import torch
from torch import nn

from core.io import emit_json
from core.options import Group, declare, option
from empirical.algorithms import AlgorithmConfig
from empirical.algorithms.local import LocalAlgorithm
from empirical.algorithms.stacked import StackedWorkers
from theory.sync import is_sync_step

__all__ = ["OPTIONS", "measure", "main"]

OPTIONS = (
    Group("workers", (
        option("--K", type=int, nargs="+", default=[2, 4, 8], help="workers (default: 2 4 8)"),
        option("--p", type=float, default=0.2, help="pull probability (default: 0.2)"),
        option("--H", type=int, default=8, help="local steps per sync (default: 8)"),
        option("--optimizer", choices=("sgd", "adamw"), default="adamw",
               help="inner optimizer (default: adamw)"),
    )),
    Group("model and data", (
        option("--width", type=int, default=256, help="hidden units (default: 256)"),
        option("--depth", type=int, default=2, help="hidden layers (default: 2)"),
        option("--features", type=int, default=64, help="input features (default: 64)"),
        option("--batch", type=int, default=32, help="micro-batch per worker (default: 32)"),
    )),
    Group("timing", (
        option("--steps", type=int, default=32, help="steps per timed run (default: 32)"),
        option("--warmup", type=int, default=8, help="untimed steps first (default: 8)"),
        option("--repeats", type=int, default=3, help="timed runs (default: 3)"),
        option("--threads", type=int, default=1, help="intra-op threads (default: 1)"),
        option("--json", default=None, help="write the results here ('-': stdout; default: none)"),
    )),
)  # fmt: skip


def _mlp(args: argparse.Namespace) -> nn.Module:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    width = args.features
    for _ in range(args.depth):
        layers += [nn.Linear(width, args.width), nn.GELU()]
        width = args.width
    return nn.Sequential(*layers, nn.Linear(width, 10))


def _loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    return nn.functional.cross_entropy(model(batch[0]), batch[1])


def _optimizer(args: argparse.Namespace, params: Any) -> torch.optim.Optimizer:
    if args.optimizer == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-3)


class _Loop:
    """``K`` LocalAlgorithm instances stepped one after another, synced here."""

    def __init__(self, cfg: AlgorithmConfig, model: nn.Module, args: argparse.Namespace, K: int):
        self.cfg, self.t, self.algos = cfg, 0, []
        for k in range(K):
            m = copy.deepcopy(model)
            algo = LocalAlgorithm(cfg.replace(H=10**6), m, _optimizer(args, m.parameters()))
            algo.pulls.worker = k
            algo.pulls.forget_coins()
            self.algos.append(algo)

    def step(self, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        for k, a in enumerate(self.algos):
            if a.next_action() == "grad":
                _loss(a.model, (batch[0][k], batch[1][k])).backward()
            a.step()
        if is_sync_step(self.t, 0, self.cfg.H):
            with torch.no_grad():
                n = self.algos[0].flat_model.n
                flats = [a.flat_model.flat[:n] for a in self.algos]
                delta = sum(a.anchor.z - f for a, f in zip(self.algos, flats, strict=True))
                delta /= len(self.algos)
                for a in self.algos:
                    a.anchor.outer.step(delta.clone())
                    a.anchor.reset_workers()
        self.t += 1


def _time(stepper: Any, batches: list[Any], args: argparse.Namespace) -> float:
    """Median seconds per step over ``args.repeats`` runs of ``args.steps`` steps."""
    for b in batches[: args.warmup]:
        stepper.step(b)
    runs = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for b in batches[args.warmup : args.warmup + args.steps]:
            stepper.step(b)
        runs.append((time.perf_counter() - start) / args.steps)
    return statistics.median(runs)


def measure(args: argparse.Namespace, K: int) -> dict[str, Any]:
    """Seconds per step of the loop and the stacked path for ``K`` workers."""
    cfg = AlgorithmConfig(
        name="palsgd", H=args.H, p=args.p, eta=0.5, outer="nesterov", gamma=0.7, mu=0.9
    )
    model = _mlp(args)
    g = torch.Generator().manual_seed(1)
    n = args.warmup + args.steps
    xs = torch.randn(n, K, args.batch, args.features, generator=g)
    ys = torch.randint(0, 10, (n, K, args.batch), generator=g)
    batches = [(xs[i], ys[i]) for i in range(n)]
    loop = _time(_Loop(cfg, model, args, K), batches, args)
    opt = _optimizer(args, model.parameters())
    stacked = _time(StackedWorkers(cfg, copy.deepcopy(model), K, opt, _loss), batches, args)
    params = sum(p.numel() for p in model.parameters())
    return {"K": K, "params": params, "loop_s": loop, "stacked_s": stacked,
            "ratio": loop / stacked}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    declare(parser, OPTIONS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = [measure(args, K) for K in args.K]
    print(f"MLP {args.features}-{args.width}x{args.depth}-10, batch {args.batch}, p = {args.p}, "
          f"H = {args.H}, {args.optimizer}, {args.threads} thread(s); ms per step")  # fmt: skip
    print(f"{'K':>3} {'params':>8} {'loop':>9} {'stacked':>9} {'loop/stacked':>13}")
    for r in rows:
        print(f"{r['K']:>3} {r['params']:>8} {1e3 * r['loop_s']:9.3f} "
              f"{1e3 * r['stacked_s']:9.3f} {r['ratio']:13.2f}")  # fmt: skip
    out = {"machine": platform.platform(), "torch": torch.__version__, "args": vars(args),
           "rows": rows}  # fmt: skip
    emit_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
