"""Throughput of the vectorised simulator (theory.simulate), measured in one run.

Two comparisons, both printed as ratios and written as JSON (``--out``):

1. **Vectorised vs per-worker loops.** The same PALSGD (same problem, noise draws and
   coins; the final iterates are checked to agree) implemented with Python loops over
   replicas and workers, each worker updated with numpy vector operations. Two loop
   versions: "naive" (each worker draws its own noise and calls ``pull_coins`` for its
   own coin, as a per-worker implementation such as the distributed trainer does) and
   "update-only" (noise and coins drawn vectorised once per step, like the simulator, so
   the ratio measures the per-worker update loop alone). Throughput is in
   worker-steps x dimensions per second.
2. **Fraction of memory bandwidth** at large ``d``. The machine's copy bandwidth is
   measured in the same run (``numpy.copyto`` of an array as large as the simulator's
   state, ``2 * nbytes`` per copy counted, single copies timed before, between and after
   the simulator runs). The simulator runs PALSGD on
   a diagonal quadratic with **noise ``"none"``** (noise generation is compute-bound and
   would dominate) and ``pull_fraction = 1``. Bytes it must touch per step: read and write
   the iterates ``X`` (``2 R K d``), read the per-worker centres ``b`` (``K d``), the
   eigenvalues (``d``) and the anchor for pulls (``R d``), float64 each. Each step is
   timed inside one run (timestamps at the per-step noise draw; set-up and the recording
   at step 0 excluded); ratios are given for the medians (steps vs copies) and the best.

3. **Backends** at ``R x K x d = 64 x 4 x 1e5`` (PALSGD p=0.2, diagonal quadratic,
   Gaussian and Rademacher noise): steps/s of the numpy backend and of the torch backend
   (CPU float32 and float64; CUDA float32 when a GPU is present), each step timed inside
   one run as above, and the RNG-inclusive roofline of each: a step must at least draw
   ``R K d`` noise values (at the generator's rate, measured in the same run on a buffer
   as large as the state) and move the bytes above (at the copy bandwidth of a
   ``>= 256 MB`` copy, large enough for the non-temporal store path of ``memcpy``; the
   faster of ``numpy.copyto`` and ``torch.Tensor.copy_``). Reported: the roofline step
   time, the fraction of it reached, and the torch/numpy speed ratio. Torch runs with
   ``--threads`` threads (default 1, the numpy backend's one core).

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_simulate.py [--quick] [--out FILE]``
(``--backends-only`` for section 3 alone).
On a shared machine the numbers move with the load; both sides of each ratio are measured
interleaved in the same run for that reason.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time

import numpy as np
import torch

import theory.simulate.torch_run as simulate_torch
from core.options import declare, option
from theory.coins import pull_coins
from theory.problems import QuadraticProblem, make_problem
from theory.simulate import AlgorithmSpec, simulate


def per_worker_loop(
    prob: QuadraticProblem, spec: AlgorithmSpec, T: int, R: int, seed: int, naive: bool
) -> np.ndarray:
    """PALSGD (T0 = 0, outer averaging, Gaussian noise) with loops over replicas and workers.

    ``naive=True``: every worker draws its own noise (``rng.standard_normal(d)``, which
    continues the generator's stream in the simulator's (r, k) order) and calls
    ``pull_coins`` for its own coin, as a per-worker implementation would. ``naive=False``:
    noise and coins are drawn vectorised once per step and only the updates loop.
    """
    rng = np.random.default_rng(seed)
    K, d = prob.K, prob.d
    X = [[prob.x0() for _ in range(K)] for _ in range(R)]
    Z = [prob.x0() for _ in range(R)]
    lam, b, scale = prob.eigenvalues, prob.b, math.sqrt(prob.sigma2 / d)
    lr, c = spec.alpha / (1 - spec.p), spec.alpha * spec.eta / spec.p
    r_idx, k_idx = np.arange(R)[:, None], np.arange(K)[None, :]
    for t in range(T):
        if not naive:
            noise = prob.draw_randomness(rng, (R,))
            coins = pull_coins(spec.seed, spec.p, t, k_idx, r_idx)
        for r in range(R):
            for k in range(K):
                x = X[r][k]
                if naive:
                    e = rng.standard_normal(d) * scale
                    pull = bool(pull_coins(spec.seed, spec.p, t, k, r))
                else:
                    e, pull = noise[r, k], coins[r, k]
                if pull:
                    X[r][k] = x - c * (x - Z[r])
                else:
                    X[r][k] = x - lr * ((x - b[k]) * lam + e)
            if (t + 1) % spec.H == 0:
                Z[r] = np.mean(X[r], axis=0)
                X[r] = [Z[r].copy() for _ in range(K)]
    return np.array(X)


def _best(fn, reps: int) -> float:
    best = math.inf
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_speedup(d: int, K: int, R: int, T: int, reps: int) -> dict:
    prob = make_problem("quadratic", K=K, d=d, noise="gaussian", zeta=1.0)
    spec = AlgorithmSpec("palsgd", 0.1, H=8, p=0.2, eta=1.0)
    tr = simulate(prob, spec, T=T, R=R, seed=0, record_every=T)
    out = {"d": d, "K": K, "R": R, "T": T}
    work = R * K * T * d
    t_vec = _best(lambda: simulate(prob, spec, T=T, R=R, seed=0, record_every=T), reps)
    out["vectorised_s"] = t_vec
    out["vectorised_throughput"] = work / t_vec
    for label, naive in (("naive_loop", True), ("update_loop", False)):
        X_loop = per_worker_loop(prob, spec, T, R, 0, naive)
        err = float(np.max(np.abs(tr.final_x - X_loop)))
        if not err <= 1e-12 * (1 + float(np.max(np.abs(X_loop)))):
            raise AssertionError(f"vectorised and {label} PALSGD disagree (max abs diff {err})")
        t_loop = _best(lambda naive=naive: per_worker_loop(prob, spec, T, R, 0, naive), 1)
        out[label] = {"s": t_loop, "throughput": work / t_loop, "speedup": t_loop / t_vec,
                      "max_abs_diff": err}  # fmt: skip
    return out


#: smallest reference copy: above about 205 MB glibc's memcpy switches to non-temporal
#: stores, which run 1.5-2x faster than the ordinary stores of a smaller copy
MIN_COPY_BYTES = 256 * 2**20


def copy_times(nbytes: int, n: int) -> list[float]:
    """Times of ``n`` single copies of an array of ``max(nbytes, MIN_COPY_BYTES)`` bytes."""
    nbytes = max(nbytes, MIN_COPY_BYTES)
    src = np.random.default_rng(0).standard_normal(nbytes // 8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        np.copyto(dst, src)
        out.append(time.perf_counter() - t)
    return out


def step_times(prob, spec: AlgorithmSpec, T: int, R: int, blocked: bool) -> np.ndarray:
    """Wall time of each simulator step 1..T-1 of one run (step 0 also records statistics).

    The simulator draws the noise exactly once at the start of every step, so timestamps
    taken there delimit the steps, without the run's set-up.
    """
    stamps: list[float] = []
    orig = prob.draw_randomness

    def stamped(rng, prefix, out=None):
        stamps.append(time.perf_counter())
        return orig(rng, prefix, out)

    prob.draw_randomness = stamped
    try:
        simulate(prob, spec, T=T + 1, R=R, seed=0, record_every=10**9, blocked=blocked)
    finally:
        del prob.draw_randomness
    return np.diff(stamps)[1:]


def bench_bandwidth(d: int, K: int, R: int, T: int) -> dict:
    prob = make_problem("quadratic", K=K, d=d, noise="none", zeta=1.0)
    spec = AlgorithmSpec("palsgd", 0.1, H=10**9, p=0.2, eta=1.0)
    state = R * K * d * 8
    must = 8 * d * (2 * R * K + K + 1 + R)
    copies = copy_times(state, T)
    out: dict = {"d": d, "K": K, "R": R, "state_MB": state / 1e6,
                 "must_touch_MB_per_step": must / 1e6}  # fmt: skip
    for blocked in (True, False):
        st = step_times(prob, spec, T, R, blocked)
        copies += copy_times(state, T)
        out["blocked" if blocked else "unblocked"] = {
            "step_ms_median": 1e3 * float(np.median(st)),
            "step_ms_best": 1e3 * float(np.min(st)),
            "GB_per_s_median": must / float(np.median(st)) / 1e9,
            "GB_per_s_best": must / float(np.min(st)) / 1e9,
        }
    cb = 2 * max(state, MIN_COPY_BYTES)
    out["copy_GB_per_s_median"] = cb / float(np.median(copies)) / 1e9
    out["copy_GB_per_s_best"] = cb / float(np.min(copies)) / 1e9
    for key in ("blocked", "unblocked"):
        for stat in ("median", "best"):
            out[key][f"fraction_{stat}"] = (
                out[key][f"GB_per_s_{stat}"] / out[f"copy_GB_per_s_{stat}"]
            )
    return out


def _copy_rate(nbytes: int, reps: int) -> dict:
    """GB/s (2 * nbytes per copy) of numpy.copyto and torch copy_ on ``nbytes`` buffers."""
    n = nbytes // 8
    out = {}
    a, b = np.ones(n), np.empty(n)
    out["numpy"] = 2 * n * 8 / _best(lambda: np.copyto(b, a), reps) / 1e9
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    out["torch"] = 2 * n * 8 / _best(lambda: tb.copy_(ta), reps) / 1e9
    return out


def _noise_rate(backend: str, dtype: str, noise: str, shape: tuple, device: str) -> float:
    """Noise values per second of the backend's default generator (one draw of ``shape``, best
    of 3), written into the backend's noise buffer."""
    n = math.prod(shape)
    if backend == "numpy":
        rng, buf = np.random.default_rng(0), np.empty(shape)
        if noise == "gaussian":
            return n / _best(lambda: rng.standard_normal(out=buf), 3)
        return n / _best(lambda: rng.integers(0, 2, size=shape, dtype=np.int8), 3)
    prob = make_problem("quadratic", K=shape[1], d=shape[2], noise=noise, zeta=1.0)
    # the generator the backend uses by default (numpy's, copied in, for float64 on the CPU)
    nz = simulate_torch._Noise(prob, shape[0], 0, None, torch.device(device),
                               simulate_torch.DTYPES[dtype])  # fmt: skip

    def draw():
        nz.draw()
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    return n / _best(draw, 3)


def torch_step_times(prob, spec: AlgorithmSpec, T: int, R: int, **kw) -> np.ndarray:
    """Like :func:`step_times` for the torch backend (stamps at its per-step noise draw)."""
    stamps: list[float] = []
    orig = simulate_torch._Noise.draw
    cuda = str(kw.get("device", "cpu")).startswith("cuda")

    def stamped(self):
        if cuda:
            torch.cuda.synchronize()
        stamps.append(time.perf_counter())
        return orig(self)

    simulate_torch._Noise.draw = stamped
    try:
        simulate(prob, spec, T=T + 1, R=R, seed=0, record_every=10**9, backend="torch", **kw)
    finally:
        simulate_torch._Noise.draw = orig
    return np.diff(stamps)[1:]


def bench_backends(threads: int, steps: int, quick: bool, reps: int = 2) -> list[dict]:
    """Section 3: steps/s of each backend at 64 x 4 x 1e5 and the RNG-inclusive roofline.

    The backends run interleaved, ``reps`` runs of ``steps`` timed steps each; the noise
    rate of each generator is measured right after each run (a buffer as large as the
    state) and its median used.
    """
    torch.set_num_threads(threads)
    R, K, d = (16, 4, 10**5) if quick else (64, 4, 10**5)
    spec = AlgorithmSpec("palsgd", 0.1, H=8, p=0.2, eta=1.0)
    runs = [("numpy", "float64", "cpu"), ("torch", "float32", "cpu"),
            ("torch", "float64", "cpu")]  # fmt: skip
    if torch.cuda.is_available():
        runs += [("torch", "float32", "cuda"), ("torch", "float64", "cuda")]
    copy = _copy_rate(max(MIN_COPY_BYTES, R * K * d * 8), 3)
    bw = max(copy.values())
    print(f"backends at R x K x d = {R} x {K} x {d} (PALSGD p=0.2, diagonal quadratic; torch "
          f"threads {threads}); copy of {max(MIN_COPY_BYTES, R * K * d * 8) / 2**20:.0f} MiB: "
          f"numpy {copy['numpy']:.1f} GB/s, torch {copy['torch']:.1f} GB/s")  # fmt: skip
    out = []
    for noise in ("gaussian", "rademacher"):
        prob = make_problem("quadratic", K=K, d=d, noise=noise, zeta=1.0)
        times: dict[tuple, list] = {r: [] for r in runs}
        rates: dict[tuple, list] = {r: [] for r in runs}
        for _ in range(reps):  # interleaved: each backend sees the same load
            for backend, dtype, device in runs:
                if backend == "numpy":
                    st = step_times(prob, spec, steps, R, blocked=True)
                else:
                    st = torch_step_times(prob, spec, steps, R, dtype=dtype, device=device)
                times[(backend, dtype, device)] += list(st)
                rates[(backend, dtype, device)].append(
                    _noise_rate(backend, dtype, noise, (R, K, d), device)
                )
        base = None
        for backend, dtype, device in runs:
            st = np.array(times[(backend, dtype, device)])
            step = float(np.median(st))
            esize = 8 if dtype == "float64" else 4
            must = esize * d * (2 * R * K + K + 1 + R)
            rate = float(np.median(rates[(backend, dtype, device)]))
            dev_bw = bw if device == "cpu" else float("nan")
            roof = R * K * d / rate + (must / (dev_bw * 1e9) if device == "cpu" else 0.0)
            r = {"noise": noise, "backend": backend, "dtype": dtype, "device": device,
                 "step_ms_median": 1e3 * step, "step_ms_best": 1e3 * float(np.min(st)),
                 "steps_per_s": 1 / step, "noise_per_s": rate, "copy_GB_per_s": dev_bw,
                 "must_touch_MB": must / 1e6, "roofline_ms": 1e3 * roof,
                 "roofline_fraction": roof / step}  # fmt: skip
            if backend == "numpy":
                base = r
            r["speedup_vs_numpy"] = base["step_ms_median"] / r["step_ms_median"]
            out.append(r)
            print(f"  {noise:<10} {backend:<5} {dtype} {device:<4}: "
                  f"{r['steps_per_s']:6.2f} steps/s ({r['step_ms_median']:.0f} ms/step, "
                  f"x{r['speedup_vs_numpy']:.2f} vs numpy); noise {rate:.3g}/s, roofline "
                  f"{r['roofline_ms']:.0f} ms/step -> {100 * r['roofline_fraction']:.0f}% "
                  f"of it")  # fmt: skip
    return out


#: the command's options (:func:`core.options.declare`)
OPTIONS = (
    option("--quick", action="store_true", help="smaller sizes, fewer repetitions"),
    option("--out", help="write the results as JSON to this file"),
    option("--backends-only", action="store_true", help="section 3 only"),
    option("--threads", type=int, default=1, help="torch CPU threads (default 1)"),
    option(
        "--steps", type=int, default=8, help="steps per backend run (>= 2; the first is not timed)"
    ),
)


def main() -> int:
    """Run the sections and print the results (JSON with ``--out``)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    declare(ap, OPTIONS)
    args = ap.parse_args()
    if args.steps < 2:
        ap.error(
            f"--steps must be at least 2 (the first step of a run is not timed), got {args.steps}"
        )
    if args.backends_only:
        res = {"backends": bench_backends(args.threads, args.steps, args.quick)}
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(res, fh, indent=1)
        return 0
    reps = 2 if args.quick else 3
    res: dict = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")},
        "speedup": [], "bandwidth": [],
    }  # fmt: skip
    sp_cfgs = [(10, 8, 64, 40), (1000, 8, 8, 40)] if args.quick else [
        (10, 8, 128, 100), (100, 8, 32, 100), (1000, 8, 8, 100)]  # fmt: skip
    print("vectorised vs per-worker loops (PALSGD p=0.2, gaussian noise; worker-steps*dims/s)")
    for d, K, R, T in sp_cfgs:
        r = bench_speedup(d, K, R, T, reps)
        res["speedup"].append(r)
        n, u = r["naive_loop"], r["update_loop"]
        print(
            f"  d={d:>5} K={K} R={R:>3} T={T}: vectorised {r['vectorised_throughput']:.3g}/s; "
            f"naive loop {n['throughput']:.3g}/s ({n['speedup']:.0f}x); "
            f"update-only loop {u['throughput']:.3g}/s ({u['speedup']:.0f}x)"
        )
    bw_cfgs = [(2**17, 8, 4, 6)] if args.quick else [(2**20, 8, 2, 12), (10**5, 8, 16, 12)]
    print("fraction of copy bandwidth (PALSGD p=0.2, noise 'none', diagonal quadratic)")
    print("  (median over steps / median over copies; best = minimum of each)")
    for d, K, R, T in bw_cfgs:
        r = bench_bandwidth(d, K, R, T)
        res["bandwidth"].append(r)
        b, u = r["blocked"], r["unblocked"]
        print(
            f"  d={d} K={K} R={R} (state {r['state_MB']:.0f} MB, must touch "
            f"{r['must_touch_MB_per_step']:.0f} MB/step), copy "
            f"{r['copy_GB_per_s_median']:.2f} GB/s: blocked {b['step_ms_median']:.1f} ms/step "
            f"= {b['GB_per_s_median']:.2f} GB/s ({100 * b['fraction_median']:.0f}%, best "
            f"{100 * b['fraction_best']:.0f}%); unblocked {u['step_ms_median']:.1f} ms "
            f"({100 * u['fraction_median']:.0f}%, best {100 * u['fraction_best']:.0f}%)"
        )
    res["backends"] = bench_backends(args.threads, args.steps, args.quick)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
