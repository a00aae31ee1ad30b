"""Checks on a real GPU (marker ``gpu``; skipped without CUDA). Run by scripts/gpu-check.sh.

Device placement per rank (two processes sharing one GPU over gloo, one NCCL process),
bf16 and fp16 training of the tiny GPT-Neo, GPU vs CPU agreement of a float64 PALSGD run,
checkpoint + resume on the GPU, and the outer-state offload.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from empirical import checkpoint as ck
from empirical.algorithms import AlgorithmConfig, build_algorithm
from empirical.distributed import spawn_workers
from palsgd.cli import main as cli_main

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

BASE = [
    "train",
    "--nproc",
    "1",
    "--no-progress",
    "--T",
    "8",
    "--eval-interval",
    "4",
    "--eval-batches",
    "1",
    "--seq-len",
    "32",
    "--batch-size",
    "4",
    "--H",
    "4",
    "--T0",
    "2",
    "--A",
    "2",
    "--log-interval",
    "2",
    "--device",
    "cuda",
]


def _mlp(device, dtype=torch.float64) -> nn.Module:
    g = torch.Generator().manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 3)).to(dtype)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(0.4 * torch.randn(p.shape, generator=g, dtype=dtype))
    return m.to(device)


def _run(device: str, steps: int = 24, **cfg_kw):
    model = _mlp(device)
    cfg = AlgorithmConfig(
        name="palsgd",
        H=4,
        p=0.3,
        eta=1.0,
        T0=3,
        outer="nesterov",
        gamma=0.7,
        mu=0.9,
        seed=4,
        **cfg_kw,
    )
    algo = build_algorithm(cfg, model, torch.optim.AdamW(model.parameters(), lr=1e-2))

    def batch(i):
        g = torch.Generator().manual_seed(100 + i)
        x = torch.randn(8, 5, generator=g, dtype=torch.float64)
        return x.to(device), torch.randn(8, 3, generator=g, dtype=torch.float64).to(device)

    it = iter(range(10**6))
    for _ in range(steps):
        algo.train_step(
            lambda: batch(next(it)),
            lambda m, b: nn.functional.mse_loss(m(b[0]), b[1]),
            micro_batches=2,
        )
    return model, algo


def test_gpu_and_cpu_runs_agree_in_float64():
    gpu, algo = _run("cuda")
    cpu, _ = _run("cpu")
    assert algo.flat_model.flat.is_cuda and algo.z.is_cuda
    for a, b in zip(gpu.parameters(), cpu.parameters(), strict=True):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-9, atol=1e-11)


def test_outer_offload_keeps_the_trajectory_and_frees_device_memory():
    a, algo_a = _run("cuda", offload_outer_state=True)
    b, algo_b = _run("cuda")
    for x, y in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(x, y)
    mem = algo_a.memory_bytes()
    assert mem["outer_state"] == 0 and mem["outer_state_offloaded"] > 0
    assert algo_b.memory_bytes()["outer_state"] > 0


def _placement(rank: int, world: int) -> dict:
    from empirical.distributed import bind_device

    dev = bind_device("cuda", "gloo", local_rank=rank, world_size=world)
    model = _mlp(dev, torch.float32)
    algo = build_algorithm(
        AlgorithmConfig(name="local_sgd", H=2), model, torch.optim.SGD(model.parameters(), lr=0.1)
    )
    x = torch.randn(4, 5, device=dev)
    for _ in range(4):
        algo.train_step(lambda: x, lambda m, b: m(b).square().mean())
    algo.resolve_timings()
    return {
        "device": str(dev),
        "current": torch.cuda.current_device(),
        "flat": str(algo.flat_model.flat.device),
        "syncs": algo.stats["syncs"],
        "comm_s": algo.stats["time_comm_s"],
    }


def test_two_processes_share_the_gpu_over_gloo_with_bound_devices():
    res = spawn_workers(_placement, 2, timeout_s=300)
    count = torch.cuda.device_count()
    for rank, r in enumerate(res):
        assert r["device"] == f"cuda:{rank % count}" and r["current"] == rank % count
        assert r["flat"] == r["device"] and r["syncs"] == 2 and r["comm_s"] > 0


def test_bf16_and_fp16_training_on_the_gpu(tmp_path):
    for precision in ("bf16", "fp16"):
        out = tmp_path / precision
        assert cli_main([*BASE, "--output-dir", str(out), "--precision", precision]) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["hardware"]["device"].startswith("cuda")


def test_checkpoint_and_resume_on_the_gpu(tmp_path):
    whole, part = tmp_path / "whole", tmp_path / "part"
    extra = ["--checkpoint-interval", "4"]
    assert cli_main([*BASE, "--output-dir", str(whole), *extra]) == 0
    assert cli_main([*BASE, "--output-dir", str(part), *extra, "--max-steps-this-run", "4"]) == 0
    assert cli_main([*BASE, "--output-dir", str(part), *extra, "--resume", "auto"]) == 0

    def final(out: Path) -> dict:
        d = ck.latest_complete(out / "checkpoints")
        return ck.load_rank_state(d, ck.read_manifest(d), 0)

    a, b = final(whole), final(part)
    assert a["step"] == b["step"] == 8
    for key in a["model"]:
        torch.testing.assert_close(a["model"][key], b["model"][key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["gptneo", "resnet"])
def test_steady_state_steps_do_not_synchronise(name, tmp_path):
    """The trainer's steady-state gradient and pull steps under
    ``torch.cuda.set_sync_debug_mode("error")`` (tests/harness/steps.py): none raises, and
    the controls that read values on purpose do."""
    from harness.steps import STEP_RUNS, checked_steps

    run = {**STEP_RUNS[name], "backend": "gloo"}
    (res,) = spawn_workers(checked_steps, 1, str(tmp_path / "run"), run, "debug", timeout_s=300)
    assert res["device"] == "cuda:0"
    steady = [s for s in res["steps"] if s["kind"] in ("grad", "pull") and not s["synced"]]
    assert {s["kind"] for s in steady} == {"grad", "pull"}
    for s in res["steps"]:
        assert s["calls"] == [], s
    c = res["controls"]
    assert c["finite"] == 1 and c["log"] == 1 and c["float(step) on the device"] == 1, c
