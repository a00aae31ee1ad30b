"""Benchmark: memory per rank of PALSGD workers with and without FSDP2 sharding (CPU, gloo).

For every ``S`` of ``--shards`` (``1``: one rank per worker), ``K * S`` gloo processes train
``K`` PALSGD workers (outer Nesterov, AdamW) of ``--model`` for ``2 H`` steps on random
tokens, each worker sharding its model over its ``S`` ranks
(:mod:`empirical.algorithms.fsdp`). Reported per rank (the largest over the ranks):

* accounted bytes: the parameters this rank holds (its chunks), the inner optimizer's state
  (AdamW's two moments), and the algorithm's own tensors (``algo.memory_bytes()``: anchor,
  work buffer, outer momentum); their sum is the model-sized state of a rank;
* ``peak_rss_delta``: peak resident set size (``ru_maxrss``) minus the resident size
  before the model is built (torch's own runtime excluded); it also holds FSDP2's
  all-gathered parameters and the activations of a step. The processes run with
  ``MALLOC_MMAP_THRESHOLD_=65536`` so that freed tensors return to the OS (as
  ``bench_algorithms.py`` does).

Run: ``python benchmarks/bench_sharded.py [--model gptneo-8m] [--K 2] [--shards 1 2]
[--H 4] [--batch 4] [--seq-len 64] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
from typing import Any

from core.io import emit_json
from core.options import declare, option
from theory.options import notation_option

__all__ = ["measure", "main"]


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _worker(rank: int, world: int, spec: dict[str, Any]) -> dict[str, Any]:
    import torch

    from empirical import models
    from empirical.algorithms import AlgorithmConfig, build_algorithm
    from empirical.algorithms.fsdp import local_view, shard_model, worker_mesh

    base = _rss_mib()
    model = models.build_model(spec["model"], seed=0)
    wm = worker_mesh(spec["S"], "cpu") if spec["S"] > 1 else None
    if wm is not None:
        shard_model(model, wm)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    cfg = AlgorithmConfig(
        name="palsgd", H=spec["H"], p=0.2, eta=1.0, outer="nesterov", gamma=0.7, mu=0.9
    )
    group = None if wm is None else wm.replicate_group
    algo = build_algorithm(cfg, model, opt, process_group=group)
    vocab = int(model.config.vocab_size)
    g = torch.Generator().manual_seed(rank if wm is None else wm.worker)
    for _ in range(2 * spec["H"]):
        if algo.next_action() == "grad":
            ids = torch.randint(0, vocab, (spec["batch"], spec["seq_len"]), generator=g)
            batch = {"input_ids": ids, "labels": ids, "attention_mask": torch.ones_like(ids)}
            models.compute_loss(model, batch, "lm").backward()
        algo.step()
    params = sum(local_view(p).numel() * local_view(p).element_size() for p in algo.params)
    opt_bytes = 0
    for entry in opt.state.values():
        for v in entry.values():
            if torch.is_tensor(v) and v.dim() > 0:
                t = local_view(v)
                opt_bytes += t.numel() * t.element_size()
    mem = algo.memory_bytes()
    algo_bytes = sum(v for k, v in mem.items() if k != "outer_state_offloaded")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB (Linux)
    return {
        "params_mib": params / 2**20,
        "optimizer_mib": opt_bytes / 2**20,
        "algorithm_mib": algo_bytes / 2**20,
        "accounted_mib": (params + opt_bytes + algo_bytes) / 2**20,
        "peak_rss_delta_mib": peak - base,
        "algorithm_parts": mem,
    }


def measure(model: str, K: int, S: int, H: int, batch: int, seq_len: int) -> dict[str, Any]:
    """One layout: ``K`` workers of ``S`` ranks; the largest per-rank figures."""
    from empirical.distributed import spawn_workers

    spec = {"model": model, "S": S, "H": H, "batch": batch, "seq_len": seq_len}
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", "65536")
    ranks = spawn_workers(_worker, K * S, spec, timeout_s=900)
    keys = ("params_mib", "optimizer_mib", "algorithm_mib", "accounted_mib", "peak_rss_delta_mib")
    return {"K": K, "S": S, "ranks": ranks, **{k: max(r[k] for r in ranks) for k in keys}}


#: the command's options (:func:`core.options.declare`)
OPTIONS = (
    option("--model", default="gptneo-8m"),
    notation_option("K", default=2, help="default 2"),
    option("--shards", nargs="+", type=int, default=[1, 2]),
    notation_option("H", default=4, help="default 4"),
    option("--batch", type=int, default=4),
    option("--seq-len", type=int, default=64),
    option("--json", default=None, help="write the results here ('-': stdout)"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    declare(parser, OPTIONS)
    args = parser.parse_args(argv)
    rows = [measure(args.model, args.K, S, args.H, args.batch, args.seq_len) for S in args.shards]
    print(f"{args.model}, K = {args.K} workers, largest per-rank figures (MiB)")
    print(f"{'S':>3} {'params':>8} {'AdamW':>8} {'PALSGD':>8} {'accounted':>10} {'peak RSS':>9}")
    for r in rows:
        print(
            f"{r['S']:>3} {r['params_mib']:8.1f} {r['optimizer_mib']:8.1f} "
            f"{r['algorithm_mib']:8.1f} {r['accounted_mib']:10.1f} {r['peak_rss_delta_mib']:9.1f}"
        )
    out = {"machine": platform.platform(), "args": vars(args), "layouts": rows}
    emit_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
