"""Device binding, CUDA-event timing and mixed precision, on the CPU (CUDA mocked where a
GPU would be needed; the same checks on a real GPU are in tests/test_gpu.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from core.errors import UserInputError
from empirical import distributed as dmod
from empirical.algorithms import AlgorithmConfig, build_algorithm
from empirical.config import resolve_config
from empirical.schedules import rate_at
from empirical.timing import DeviceClock


@pytest.fixture
def fake_cuda(monkeypatch):
    """Two fake GPUs: records set_device calls."""
    bound = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: bound.append(torch.device(d)))
    return bound


def test_bind_device_takes_cuda_local_rank_and_sets_it(fake_cuda):
    assert dmod.bind_device("cuda", "nccl", local_rank=1, world_size=2) == torch.device("cuda", 1)
    assert fake_cuda == [torch.device("cuda", 1)]
    assert dmod.bind_device(None, "nccl", local_rank=0, world_size=2) == torch.device("cuda", 0)
    assert dmod.bind_device("cpu", "gloo", 3, 4) == torch.device("cpu")


def test_bind_device_refuses_what_would_hang_or_collide(fake_cuda):
    with pytest.raises(UserInputError, match="names one GPU but 2 processes"):
        dmod.bind_device("cuda:1", "nccl", local_rank=0, world_size=2)
    with pytest.raises(UserInputError, match="LOCAL_RANK 2 has no GPU"):
        dmod.bind_device("cuda", "nccl", local_rank=2, world_size=3)
    with pytest.raises(UserInputError, match="does not exist"):
        dmod.bind_device("cuda:5", "nccl", local_rank=0, world_size=1)
    with pytest.raises(UserInputError, match="nccl"):
        dmod.bind_device("cpu", "nccl", 0, 1)
    # gloo may share GPUs round-robin (a 2-process test on one GPU)
    assert dmod.bind_device("cuda", "gloo", local_rank=3, world_size=4) == torch.device("cuda", 1)


def test_init_distributed_binds_before_the_group_and_passes_device_id(fake_cuda, monkeypatch):
    calls = []
    monkeypatch.setattr(dmod.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dmod.dist, "init_process_group", lambda *a, **kw: calls.append((a, kw)))
    monkeypatch.setattr(dmod.dist, "get_rank", lambda *a: 1)
    monkeypatch.setattr(dmod.dist, "get_world_size", lambda *a: 2)
    for key, val in {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "1",
    }.items():
        monkeypatch.setenv(key, val)
    ctx = dmod.init_distributed(device="cuda")
    assert ctx.device == torch.device("cuda", 1) and ctx.backend == "nccl"
    assert fake_cuda == [torch.device("cuda", 1)]  # bound before init_process_group ran
    ((args, kw),) = calls
    assert args == ("nccl",) and kw["device_id"] == torch.device("cuda", 1)
    calls.clear()
    dmod.init_distributed(backend="gloo", device="cpu")
    assert "device_id" not in calls[0][1]


def test_trainer_config_refuses_one_gpu_for_several_processes():
    with pytest.raises(UserInputError, match="use --device cuda"):
        resolve_config(overrides={"device": "cuda:0", "nproc": 2})
    with pytest.raises(UserInputError, match="precision"):
        resolve_config(overrides={"precision": "fp8"})


class _FakeEvent:
    """A CUDA event stand-in: 'time' advances by 1 ms per record; counts synchronisations."""

    now = 0.0
    syncs = 0

    def __init__(self, enable_timing=True):
        self.t = None

    def record(self, stream=None):
        _FakeEvent.now += 1.0
        self.t = _FakeEvent.now

    def synchronize(self):
        _FakeEvent.syncs += 1

    def elapsed_time(self, other):
        return other.t - self.t


def test_device_clock_records_events_and_waits_only_when_resolved(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    stats = {"time_comm_s": 0.0}
    clock = DeviceClock("cuda:0", stats)
    for _ in range(5):
        with clock.region("time_comm_s"):
            pass
    assert stats["time_comm_s"] == 0.0 and clock.pending == 5 and _FakeEvent.syncs == 0
    clock.resolve()
    assert _FakeEvent.syncs == 1 and clock.pending == 0
    assert stats["time_comm_s"] == pytest.approx(5 * 1e-3)  # 1 ms per region
    cpu = DeviceClock("cpu", {})
    with cpu.region("x"):
        pass
    assert cpu.pending == 0 and cpu.stats["x"] >= 0.0


# ----------------------------------------------------------------------------- precision


def _mlp() -> nn.Module:
    g = torch.Generator().manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return m


def _batch(i: int):
    g = torch.Generator().manual_seed(i)
    return torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g)


def _loss(model, batch):
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


def _run(scaler=None, autocast=None, steps=12, p=0.3, clip=0.5):
    model = _mlp()
    cfg = AlgorithmConfig(
        name="palsgd", H=4, p=p, eta=1.0, T0=2, clip_grad_norm=clip, coins="shared", seed=1
    )
    algo = build_algorithm(cfg, model, torch.optim.AdamW(model.parameters(), lr=1e-2))
    it = iter(range(10**6))
    for _ in range(steps):
        algo.train_step(
            lambda: _batch(next(it)), _loss, micro_batches=2, scaler=scaler, autocast=autocast
        )
    return model, algo


def test_grad_scaler_unscales_before_the_clip_and_matches_the_unscaled_run():
    ref, _ = _run()
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12)
    got, _ = _run(scaler=scaler)
    for a, b in zip(ref.parameters(), got.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)  # power-of-two scaling


def test_grad_scaler_skips_a_step_with_inf_gradients():
    model = _mlp()
    cfg = AlgorithmConfig(name="palsgd", H=100, p=0.0)
    algo = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=0.1))
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    before = [p.detach().clone() for p in model.parameters()]

    def bad_loss(model, batch):
        return _loss(model, batch) * torch.tensor(float("inf"))

    algo.train_step(lambda: _batch(0), bad_loss, scaler=scaler)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert scaler.get_scale() == 2.0  # backed off
    algo.train_step(lambda: _batch(1), _loss, scaler=scaler)
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_bf16_autocast_keeps_fp32_master_weights_and_anchor():
    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16)

    model, algo = _run(autocast=autocast)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert algo.z.dtype == torch.float32
    # a small pull changes every entry of fp32 weights (bf16 weights would round most away)
    z = algo.z.clone()
    x = algo.flat_model.flat[: algo.flat_model.n].clone()
    c = 0.005
    moved = x + c * (z - x)
    assert int((moved != x).sum()) == int(((z - x) != 0).sum())
    as_bf16 = x.bfloat16() + c * (z.bfloat16() - x.bfloat16())
    assert int((as_bf16 != x.bfloat16()).sum()) < int((moved != x).sum())


def test_schedules():
    assert rate_at("constant", 1.0, 5, 10) == 1.0
    assert rate_at("constant", 1.0, 0, 10, warmup=4) == pytest.approx(0.25)
    assert rate_at("cosine", 2.0, 3, 10, warmup=4) == pytest.approx(2.0)
    assert rate_at("cosine", 2.0, 10, 10, warmup=4, min_ratio=0.1) == pytest.approx(0.2)
    mid = rate_at("cosine", 1.0, 7, 10, warmup=4)
    assert mid == pytest.approx(0.5)
    vals = [rate_at("cosine", 1.0, s, 50, warmup=5) for s in range(50)]
    assert np.all(np.diff(vals[4:]) <= 1e-15)


def test_outer_state_offload_mechanics_on_the_cpu(monkeypatch):
    """The offload path (stash after each outer step, fetch before the next, checkpoint
    state) forced on a CPU anchor: same trajectory, momentum held outside the optimizer."""
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)  # marks the end of each copy

    def run(offload: bool, steps: int = 14, state=None):
        model = _mlp()
        cfg = AlgorithmConfig(name="diloco", H=3, T0=1, gamma=0.7, mu=0.9)
        algo = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=0.05))
        algo.outer.offload = offload  # a CUDA anchor turns it on; forced here
        if state is not None:
            algo.load_state_dict(state)
        it = iter(range(algo.t, 10**6))
        for _ in range(steps):
            algo.train_step(lambda: _batch(next(it)), _loss)
        return model, algo

    a, algo_a = run(True)
    b, algo_b = run(False)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    mem = algo_a.memory_bytes()
    assert mem["outer_state"] == 0 and mem["outer_state_offloaded"] == algo_a.flat_model.n * 4
    assert algo_a.outer.optimizer.state[algo_a.z]["momentum_buffer"] is None
    torch.testing.assert_close(algo_a.outer.momentum_buffer, algo_b.outer.momentum_buffer)
    # a checkpoint of the offloaded state resumes like the plain one
    c, _ = run(True, steps=6, state=algo_a.state_dict())
    d, _ = run(False, steps=6, state=algo_b.state_dict())
    assert all(torch.equal(x, y) for x, y in zip(c.parameters(), d.parameters(), strict=True))
