"""Measured step costs of GPT-Neo on one device, written as a profile for the cost model.

For each model (default GPT-Neo-8M and GPT-Neo-125M with the GPT-2 vocabulary, micro-batch
32 x context 300 as in the authors' README) on one device: forward+backward of one
micro-batch (``--precision``, fp32 master weights), the inner AdamW step, a PALSGD pull
(``x <- x - c (x - z)`` on every tensor), a flat all-reduce of the parameters in a
one-process group of the device's backend (NCCL on a GPU), the consensus norm's host time,
and the peak memory of PALSGD (model, AdamW, work buffer, anchor, outer momentum). Times are
CUDA events (medians of ``--reps``), or ``time.perf_counter`` on the CPU.

Outputs in ``--out``:

* ``gpu-measurements.json``: every figure, plus the utilisation implied by the measured
  gradient step against the cost model's FLOP count
  (:data:`empirical.cost.SETTINGS`, :func:`empirical.cost.gpu_compute_profile`);
* ``gpu-profile.json``: a cluster profile in the format ``palsgd cost predict
  --profiles-file`` reads (``{name: {K, link, gpu, source}}``). One device has no
  interconnect to measure, so the link is the all-reduce of ``--link-workers`` gloo
  processes on this machine fitted by :func:`empirical.cost.calibrate_link` (host
  staged; a lower bound on what NVLink gives), and ``gpu`` names the device when the cost
  model knows it, otherwise the known device of the same compute peak (H200 -> H100 SXM5,
  both 989 dense BF16 TFLOP/s; the name measured is kept in ``source``).

* ``throughput`` (in ``gpu-measurements.json``, for each of ``--throughput-models``,
  default GPT-Neo-125M): a plain training loop at the same sizes (forward, backward, AdamW
  step, ``zero_grad``), eager, compiled (:func:`empirical.models.compile_model`, the
  model ``palsgd train --compile`` runs; its first steps, the compilation, timed apart)
  and compiled with the attention through ``scaled_dot_product_attention``
  (``attention="sdpa"``, :mod:`empirical.models.gptneo`),
  each as seconds per step, tokens/s, TFLOP/s by ``6 N`` per token (``N``: every
  parameter) and the fraction of the bf16 matmul rate measured on the device in the same
  run (``8192^3`` products). The issue's target: the compiled step at 40% of it or more.

``--dry-run``: the tiny GPT-Neo on the CPU with small batches and few repetitions (checks
the script end to end in seconds; compiled with ``aot_eager``, no code generated).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from core.options import declare, option
from empirical import cost
from empirical.algorithms import AlgorithmConfig, build_algorithm
from empirical.algorithms.sync import sq_norm
from empirical.cost.paper import paper_setting
from empirical.distributed import cleanup, init_distributed
from empirical.models import build_model, compile_model
from theory.options import notation_option

#: device name -> the cost model's GPU of the same dense BF16 peak
SAME_PEAK = {"H200": "H100-SXM5-80GB", "H100": "H100-SXM5-80GB", "A100": "A100-SXM4-80GB"}


class Timer:
    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def __call__(self, fn, reps: int) -> float:
        """Median seconds of ``fn()`` over ``reps`` calls (after one warm-up call)."""
        fn()
        times = []
        for _ in range(reps):
            if self.cuda:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) / 1e3)
            else:
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
        return statistics.median(times)


def profile_model(name: str, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    timer = Timer(device)
    vocab = 257 if args.dry_run else 50257
    model = build_model(name, vocab_size=vocab).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    cfg = AlgorithmConfig(name="palsgd", H=4, p=0.2, eta=1.0, outer="nesterov", gamma=0.1, mu=0.9)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    algo = build_algorithm(cfg, model, opt)
    B, S = args.batch, args.context
    ids = torch.randint(0, vocab, (B, S), device=device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)

    def fwd_bwd() -> None:
        if dtype is None:
            loss = model(input_ids=ids, labels=ids).loss
        else:
            with torch.autocast(device.type, dtype=dtype):
                loss = model(input_ids=ids, labels=ids).loss
        loss.backward()

    t_fb = timer(fwd_bwd, args.reps)
    t_inner = timer(opt.step, args.reps)
    opt.zero_grad(set_to_none=True)
    for _ in range(2 * cfg.H):  # syncs: anchor and momentum allocated
        algo.train_step(lambda: ids, lambda m, b: m(input_ids=b, labels=b).loss)
    t_pull = timer(algo.pulls.pull, args.reps)
    flat = algo.flat_model.flat[: algo.flat_model.n]
    t_ar = timer(lambda: dist.all_reduce(flat), args.reps)
    t_sync = timer(algo.sync._sync, args.reps)
    host = []
    for _ in range(args.reps):
        start = time.perf_counter()
        sq_norm(flat)
        host.append(time.perf_counter() - start)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    n = sum(p.numel() for p in model.parameters())
    out = {
        "params": n,
        "micro_batch": [B, S],
        "precision": args.precision,
        "fwd_bwd_s": t_fb,
        "inner_step_s": t_inner,
        "pull_s": t_pull,
        "flat_allreduce_1proc_s": t_ar,
        "sync_local_s": t_sync,
        "consensus_host_s": statistics.median(host),
        "algorithm_bytes": algo.memory_bytes(),
    }
    if device.type == "cuda":
        out["peak_memory_bytes"] = torch.cuda.max_memory_allocated(device)
    return out


def matmul_peak(device: torch.device, dry_run: bool) -> float:
    """FLOP/s of a bf16 (fp32 in the dry run) ``n x n`` matrix product on ``device``
    (``n = 8192``; 256 in the dry run), the median of 10."""
    n, dtype = (256, torch.float32) if dry_run else (8192, torch.bfloat16)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    return 2.0 * n**3 / Timer(device)(lambda: a @ b, 10)


#: the loops timed by :func:`throughput`: name -> (attention, compiled)
LOOPS = {"eager": ("eager", False), "compiled": ("eager", True), "compiled_sdpa": ("sdpa", True)}


def throughput(
    name: str, args: argparse.Namespace, device: torch.device, loop: str, peak: float
) -> dict[str, Any]:
    """The plain training loop of ``name`` (module docstring) as :data:`LOOPS` names it."""
    attention, compiled = LOOPS[loop]
    vocab = 257 if args.dry_run else 50257
    model = build_model(name, vocab_size=vocab, attention=attention).to(device)
    if compiled:
        compile_model(model, backend="aot_eager" if args.dry_run else None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    B, S = args.batch, args.context
    ids = torch.randint(0, vocab, (B, S), device=device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)

    def step() -> None:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    start = time.perf_counter()
    for _ in range(3):  # compiles (forward and backward) when compiled
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    first_s = time.perf_counter() - start
    t = Timer(device)(step, args.reps)
    n = sum(p.numel() for p in model.parameters())
    flops = 6.0 * n * B * S / t
    return {"attention": attention, "compiled": compiled, "step_s": t, "tokens_per_s": B * S / t,
            "tflops_6n": flops / 1e12, "fraction_of_measured_peak": flops / peak,
            "first_3_steps_s": first_s}  # fmt: skip


def implied_utilisation(name: str, fb: dict[str, Any], gpu: str) -> float | None:
    """Utilisation at which the cost model's FLOP estimate of one micro-batch takes the
    measured forward+backward time (pass it as ``palsgd cost predict --utilisation``)."""
    setting = {"gptneo-8m": "gptneo-8m-tinystories", "gptneo-125m": "gptneo-125m-tinystories"}
    key = setting.get(name)
    if key is None or gpu not in cost.GPUS:
        return None
    s = paper_setting(key)  # FLOPs per sample from params, layers, context 300
    if fb["micro_batch"][1] != s["ctx"]:
        return None
    flops = s["flops_per_sample"] * fb["micro_batch"][0]  # one micro-batch
    return float(flops) / (cost.GPUS[gpu].peak_flops * fb["fwd_bwd_s"])


#: the command's options (:func:`core.options.declare`)
OPTIONS = (
    option("--models", nargs="+", default=["gptneo-8m", "gptneo-125m"]),
    option("--batch", type=int, default=32),
    option("--context", type=int, default=300),
    notation_option(
        "A", default=16, help="default 16 (the README's), for the reported grad_step_s"
    ),
    option("--precision", default="bf16", choices=["fp32", "bf16", "fp16"]),
    option("--reps", type=int, default=10),
    option("--link-workers", type=int, default=2),
    option("--out", default="gpu-check-out"),
    option("--dry-run", action="store_true", help="tiny model on the CPU"),
    option(
        "--throughput-models", nargs="*", default=["gptneo-125m"],
        help="models of the eager/compiled loop (none: skip it)",
    ),
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    declare(ap, OPTIONS)
    args = ap.parse_args(argv)
    if args.dry_run:
        args.models, args.batch, args.context, args.reps = ["gptneo-tiny"], 2, 32, 2
        args.precision = "fp32"
        args.throughput_models = ["gptneo-tiny"] if args.throughput_models else []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    use_cuda = torch.cuda.is_available() and not args.dry_run
    ctx = init_distributed(device="cuda" if use_cuda else "cpu")
    try:
        device = ctx.device
        name = torch.cuda.get_device_name(device) if use_cuda else "cpu"
        result: dict[str, Any] = {"device": name, "backend": ctx.backend, "models": {}}
        for m in args.models:
            result["models"][m] = profile_model(m, args, device)
            print(f"{m}: {json.dumps(result['models'][m])}", flush=True)
        if args.throughput_models:
            peak = matmul_peak(device, args.dry_run)
            result["measured_matmul_flops"] = peak
            result["throughput"] = {}
            for m in args.throughput_models:
                rows = {loop: throughput(m, args, device, loop, peak) for loop in LOOPS}
                result["throughput"][m] = rows
                for loop, r in rows.items():
                    print(f"{m} {loop}: "
                          f"{1e3 * r['step_s']:.1f} ms/step, {r['tokens_per_s']:.0f} tokens/s, "
                          f"{r['tflops_6n']:.1f} TFLOP/s by 6N = "
                          f"{100 * r['fraction_of_measured_peak']:.1f}% of the measured "
                          f"{peak / 1e12:.0f} TFLOP/s", flush=True)  # fmt: skip
    finally:
        cleanup(ctx)
    gpu = next((v for k, v in SAME_PEAK.items() if k in name), name)
    if args.dry_run:
        gpu = "H100-SXM5-80GB"  # any known GPU: the dry run checks the file, not a device
        name = "cpu (dry run: no GPU measured)"
    for m, fb in result["models"].items():
        fb["implied_utilisation"] = implied_utilisation(m, fb, gpu)
        fb["grad_step_s"] = args.A * fb["fwd_bwd_s"] + fb["inner_step_s"]
    # up to 16 MiB in the dry run too: on a busy CPU the small messages' times are noise,
    # and a fit without a size that takes clearly longer finds no bandwidth term
    sizes = [4096, 65536, 1 << 20, 16 << 20]
    meas = cost.measure_allreduce(sizes, world_size=args.link_workers, repeats=3, trials=3)
    link = cost.calibrate_link(meas, "ring", name="gloo-host-local")
    link_d = link.to_dict()
    link_d["source"] = (
        f"gloo all-reduce of {args.link_workers} processes on this machine (host staged), "
        f"fitted by empirical.cost.calibrate_link: {link.source}"
    )
    profile = {
        "measured-local": {
            "K": 4,
            "link": link_d,
            "gpu": gpu,
            "source": f"benchmarks/gpu_profile.py on {name}"
            + ("" if gpu == name else f" (cost model GPU of the same peak: {gpu})"),
        }
    }
    result["link"] = link_d
    (out / "gpu-measurements.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "gpu-profile.json").write_text(json.dumps(profile, indent=2) + "\n")
    print(f"wrote {out / 'gpu-measurements.json'} and {out / 'gpu-profile.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
