"""Benchmark of the trainer's input pipeline and of the outer-state offload, in one run.

1. Data time per optimizer step of the GPT-Neo-8M README recipe (micro-batch ``B = 32``,
   ``A = 16`` micro-batches, context 300; :data:`empirical.config.README_8M_RUN`): the
   seconds :class:`empirical.data.BatchStream` takes to hand over one step's ``A``
   micro-batches, for TinyStories-format text tokenised on access (the authors' loaders)
   and pre-tokenised into the memory-mapped cache (:mod:`empirical.token_cache`), each in
   the training process (``num_workers = 0``) and with ``--num-workers`` persistent worker
   processes. The stories are synthetic (seeded, TinyStories-like lengths) and written to a
   temporary directory; the tokenizer is the byte tokenizer unless ``--tokenizer DIR``
   names a local Hugging Face tokenizer (the paper's GPT-2 BPE costs more per story).
2. Peak memory per rank of PALSGD (outer Nesterov, ``mu = 0.9``) on GPT-Neo-8M with and
   without ``offload_outer_state``, after two syncs: on a CUDA device
   ``torch.cuda.max_memory_allocated``; on the CPU the offload does nothing (it moves the
   momentum from a GPU to pinned host memory), so the CPU figures are the algorithm's
   device-memory accounting (``memory_bytes``) and both rows agree by construction.

Usage: ``python benchmarks/bench_data.py [--steps 6] [--stories 20000] [--out results.json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from core.options import declare, option
from empirical.algorithms import AlgorithmConfig, build_algorithm
from empirical.config import README_8M_RUN
from empirical.data import BatchStream, build_dataset
from empirical.models import build_model

WORDS = (
    "once upon a time there was a little girl named lily she loved to play in the park "
    "with her big red ball one day she saw a cat the cat was sad because it lost its toy "
    "tom and sue went to the shop to buy some milk and bread they were happy"
).split()


def write_stories(path: Path, n: int, seed: int = 0) -> None:
    """``n`` stories of 80-300 words, separated as in the TinyStories text release."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as fh:
        for _ in range(n):
            k = int(rng.integers(80, 300))
            fh.write(" ".join(rng.choice(WORDS, size=k)) + ".\n<|endoftext|>\n")


def data_time(ds, args: argparse.Namespace, workers: int) -> float:
    """Median seconds per optimizer step to draw ``A`` micro-batches (first step dropped:
    it starts the worker processes)."""
    B, A = README_8M_RUN["batch_size"], README_8M_RUN["A"]
    stream = BatchStream(ds, B, rank=0, world_size=1, seed=0, num_workers=workers)
    times = []
    for _ in range(args.steps + 1):
        start = time.perf_counter()
        for _ in range(A):
            next(stream)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def peak_memory(offload: bool, device: torch.device) -> dict[str, Any]:
    model = build_model("gptneo-8m", vocab_size=257).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    cfg = AlgorithmConfig(
        name="palsgd",
        H=2,
        p=0.2,
        eta=1.0,
        outer="nesterov",
        gamma=0.1,
        mu=0.9,
        offload_outer_state=offload,
    )
    algo = build_algorithm(cfg, model, opt)
    ids = torch.randint(0, 257, (2, 64), device=device)

    def loss_fn(m, batch):
        return m(input_ids=batch, labels=batch).loss

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for _ in range(4):
        algo.train_step(lambda: ids, loss_fn)
    acc = algo.memory_bytes()
    out = {
        "algorithm_device_bytes": sum(v for k, v in acc.items() if k != "outer_state_offloaded"),
        "offloaded_bytes": acc["outer_state_offloaded"],
        "syncs": algo.stats["syncs"],
    }
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        out["peak_device_bytes"] = torch.cuda.max_memory_allocated(device)
    return out


#: the command's options (:func:`core.options.declare`)
OPTIONS = (
    option("--steps", type=int, default=6, help="measured steps per configuration"),
    option("--stories", type=int, default=20000),
    option("--num-workers", type=int, default=2),
    option("--tokenizer", default=None),
    option("--device", default="cuda" if torch.cuda.is_available() else "cpu"),
    option("--out", default=None),
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    declare(ap, OPTIONS)
    args = ap.parse_args(argv)
    seq = README_8M_RUN["seq_len"]
    result: dict[str, Any] = {"args": vars(args), "data_s_per_step": {}}
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "TinyStories-train.txt"
        write_stories(f, args.stories)
        kw = dict(path=str(f), seq_len=seq, tokenizer=args.tokenizer)
        start = time.perf_counter()
        cached = build_dataset("tinystories", pretokenize=True, **kw)
        result["tokenise_once_s"] = time.perf_counter() - start
        plain = build_dataset("tinystories", **kw)
        for name, ds in (("on_access", plain), ("pretokenized", cached)):
            for workers in (0, args.num_workers):
                key = f"{name}_workers{workers}"
                result["data_s_per_step"][key] = data_time(ds, args, workers)
    d = result["data_s_per_step"]
    result["pretokenized_speedup_in_process"] = d["on_access_workers0"] / d["pretokenized_workers0"]
    dev = torch.device(args.device)
    result["memory"] = {"offload": peak_memory(True, dev), "no_offload": peak_memory(False, dev)}
    B, A = README_8M_RUN["batch_size"], README_8M_RUN["A"]
    print(
        f"data time per step (B={B}, A={A}, context {seq}, {args.stories} synthetic stories, "
        f"tokenizer {args.tokenizer or 'byte'}):"
    )
    for key, val in d.items():
        print(f"  {key:28s} {val * 1e3:8.1f} ms")
    print(
        f"  pre-tokenised / on access (in process): "
        f"{1 / result['pretokenized_speedup_in_process']:.3f}x the time "
        f"(tokenising the file once: {result['tokenise_once_s']:.1f} s)"
    )
    for name, m in result["memory"].items():
        peak = m.get("peak_device_bytes")
        peak_text = f"peak {peak / 2**20:.1f} MiB, " if peak is not None else ""
        print(
            f"  memory {name:11s} {peak_text}algorithm on device "
            f"{m['algorithm_device_bytes'] / 2**20:.1f} MiB, offloaded "
            f"{m['offloaded_bytes'] / 2**20:.1f} MiB ({dev.type})"
        )
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
