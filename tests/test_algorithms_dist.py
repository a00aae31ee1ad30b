"""Multi-process tests of empirical.algorithms: K = 2 gloo processes on CPU.

All scenarios run in ONE spawn (a module fixture, ~5 s) and return plain arrays; the test
functions below only compare. Models are float64 so that "equal" means bit-for-bit and
"close" means up to the order of summation.
"""

from __future__ import annotations

import copy
import os
import socket

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch import nn

from empirical.algorithms import AlgorithmConfig, build_algorithm
from empirical.distributed import WorkerError, spawn_workers
from theory.coins import pull_coins

pytestmark = pytest.mark.distributed
DT = torch.float64
K = 2


# ---------------------------------------------------------------------- helpers (run in workers)


def make_model(seed: int = 0, kind: str = "mlp") -> nn.Module:
    if kind == "bn":
        model: nn.Module = nn.Sequential(
            nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Linear(4, 2)
        )
    elif kind == "deep":
        model = nn.Sequential(
            *[m for _ in range(5) for m in (nn.Linear(3, 3), nn.Tanh())], nn.Linear(3, 2)
        )
    else:
        model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    model = model.to(DT)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g, dtype=DT))
    return model


def batch(rank: int, t: int, micro: int = 0, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Heterogeneous data: worker ``rank``'s targets are shifted by ``2*rank``."""
    g = torch.Generator().manual_seed(((seed * 1009 + rank) * 100003 + t) * 17 + micro)
    x = torch.randn(4, 3, generator=g, dtype=DT)
    return x, torch.randn(4, 2, generator=g, dtype=DT) + 2.0 * rank


def flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def train(algo, rank: int, steps: int, A: int = 1, seed: int = 1, hook=None) -> list:
    infos = []
    for _ in range(steps):
        t = algo.t
        if algo.next_action() == "grad":
            for m in range(A):
                ctx = algo.no_sync() if m < A - 1 else _null()
                with ctx:
                    x, y = batch(rank, t, m, seed)
                    (nn.functional.mse_loss(algo.model(x), y) / A).backward()
        info = algo.step()
        infos.append(info)
        if hook is not None:
            hook(info)
    return infos


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def gather(t: torch.Tensor) -> list[torch.Tensor]:
    out = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t.contiguous())
    return out


def _build(cfg: AlgorithmConfig, seed: int = 0, kind: str = "mlp", opt: str = "sgd", lr=0.1):
    model = make_model(seed, kind)
    if opt == "adam":
        inner = torch.optim.Adam(model.parameters(), lr=lr)
    elif opt == "adamw":
        inner = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    elif opt == "momentum":
        inner = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    else:
        inner = torch.optim.SGD(model.parameters(), lr=lr)
    return model, inner, build_algorithm(cfg, model, inner)


def scenarios(rank: int, world: int) -> dict:
    out: dict = {}

    # 1. ranks start from rank 0's model and agree after every sync
    cfg = AlgorithmConfig(
        name="palsgd", H=3, T0=2, p=0.3, eta=1.0, outer="nesterov", gamma=0.7, mu=0.9, seed=7
    )
    model, _, algo = _build(cfg, seed=100 + rank, opt="adam", lr=0.05)
    out["init_equal"] = bool(torch.equal(*gather(flat(model)))) and bool(
        torch.equal(flat(model), flat(make_model(100)))
    )
    rows = []

    def record(info):
        xs, zs = gather(flat(model)), gather(algo.z.clone())
        rows.append(
            (
                info.synced,
                float((xs[0] - xs[1]).abs().max()),
                float((zs[0] - zs[1]).abs().max()),
                info.t,
            )
        )

    train(algo, rank, 14, hook=record)
    out["sync_rows"] = rows
    assert algo.stats["last_consensus"] is None  # held on the device until resolved
    algo.resolve_timings()
    out["consensus"] = algo.stats["last_consensus"]

    # 2. DDP (with gradient accumulation under no_sync) on each rank's micro-batches
    model, _, algo = _build(AlgorithmConfig(name="ddp"), opt="momentum")
    out["ddp_is_wrapper"] = isinstance(algo.model, nn.parallel.DistributedDataParallel)
    train(algo, rank, 3, A=2)
    out["ddp_final"] = flat(model).numpy()

    # 3. warm-up flat all-reduce (Post-Local SGD before T0) vs torch DDP, AdamW + clipping
    warm_cfg = AlgorithmConfig(name="post_local_sgd", H=5, T0=100, clip_grad_norm=0.5)
    ddp_cfg = AlgorithmConfig(name="ddp", clip_grad_norm=0.5)
    m1, _, a1 = _build(warm_cfg, opt="adamw", lr=0.05)
    m2, _, a2 = _build(ddp_cfg, opt="adamw", lr=0.05)
    train(a1, rank, 4, A=2)
    train(a2, rank, 4, A=2)
    out["warm_vs_ddp"] = float((flat(m1) - flat(m2)).abs().max())
    out["warm_moved"] = float((flat(m1) - flat(make_model(0))).abs().max())

    # 4. PALSGD with p = 0 is Local SGD / Post-Local SGD / DiLoCo, bit for bit
    pairs = {
        "local": (
            AlgorithmConfig(name="palsgd", H=3, p=0.0, eta=1.0),
            AlgorithmConfig(name="local_sgd", H=3),
        ),
        "post": (
            AlgorithmConfig(name="palsgd", H=3, T0=2, p=0.0, eta=1.0),
            AlgorithmConfig(name="post_local_sgd", H=3, T0=2),
        ),
        "diloco": (
            AlgorithmConfig(
                name="palsgd", H=3, T0=2, p=0.0, eta=1.0, outer="nesterov", gamma=0.7, mu=0.9
            ),
            AlgorithmConfig(name="diloco", H=3, T0=2),
        ),
    }
    for key, (ca, cb) in pairs.items():
        trajs = []
        for c in (ca, cb):
            m, _, a = _build(c, opt="momentum", lr=0.05)
            traj: list[np.ndarray] = []
            train(a, rank, 10, hook=lambda _i, m=m, traj=traj: traj.append(flat(m).numpy()))
            trajs.append(np.stack(traj))
        out[f"p0_{key}"] = trajs

    # 5. coins: independent vs shared
    for mode in ("independent", "shared"):
        c = AlgorithmConfig(name="palsgd", H=10, p=0.3, eta=0.5, coins=mode, seed=3)
        _, _, a = _build(c, lr=0.01)
        infos = train(a, rank, 300)
        out[f"coins_{mode}"] = [i.action == "pull" for i in infos]
        out[f"coins_{mode}_stats"] = (a.stats["pull_steps"], a.stats["grad_steps"])

    # 6. one all-reduce per sync (count the real torch.distributed calls)
    calls: list[int] = []
    orig = dist.all_reduce

    def counting(tensor, *args, **kwargs):
        calls.append(tensor.numel())
        return orig(tensor, *args, **kwargs)

    dist.all_reduce = counting
    try:
        c = AlgorithmConfig(
            name="palsgd", H=4, T0=2, p=0.3, eta=1.0, outer="nesterov", gamma=0.5, mu=0.9, seed=1
        )
        m, _, a = _build(c, kind="deep")
        train(a, rank, 14)
    finally:
        dist.all_reduce = orig
    out["allreduce"] = {
        "calls": calls,
        "syncs": a.stats["syncs"],
        "warmup": a.stats["warmup_steps"],
        "stats_calls": a.stats["allreduce_calls"],
        "n_params": sum(p.numel() for p in m.parameters()),
        "n_tensors": len(list(m.parameters())),
    }

    # 7. state_dict round trip across ranks (Adam inner, Nesterov outer, pulls, warm-up)
    c = AlgorithmConfig(
        name="palsgd", H=3, T0=2, p=0.4, eta=1.0, outer="nesterov", gamma=0.7, mu=0.9, seed=9
    )
    m, opt, a = _build(c, kind="bn", opt="adam", lr=0.02)
    train(a, rank, 5)
    saved = (copy.deepcopy(m.state_dict()), copy.deepcopy(opt.state_dict()), a.state_dict())
    train(a, rank, 7)
    ref = flat(m)
    m2, opt2, a2 = _build(c, kind="bn", opt="adam", lr=0.02)
    m2.load_state_dict(saved[0])
    opt2.load_state_dict(saved[1])
    a2.load_state_dict(saved[2])
    train(a2, rank, 7)
    out["resume_equal"] = bool(torch.equal(flat(m2), ref))
    out["resume_syncs"] = a2.stats["syncs"]

    # 8. buffer policies across ranks (BatchNorm running mean)
    for policy in ("average", "anchor", "local"):
        c = AlgorithmConfig(name="local_sgd", H=2, buffers=policy)
        m, _, a = _build(c, kind="bn")
        start = m[1].running_mean.clone()
        train(a, rank, 1)
        x, y = batch(rank, 1)
        nn.functional.mse_loss(m(x), y).backward()
        pre = gather(m[1].running_mean.clone())
        assert a.step().synced
        post = gather(m[1].running_mean.clone())
        out[f"buffers_{policy}"] = (
            start.numpy(),
            [t.numpy() for t in pre],
            [t.numpy() for t in post],
        )
    return out


@pytest.fixture(scope="module")
def res() -> list[dict]:
    return spawn_workers(scenarios, K, timeout_s=240)


# ---------------------------------------------------------------------- tests


def test_workers_start_from_rank0_and_agree_after_every_sync(res):
    assert all(r["init_equal"] for r in res)
    rows = res[0]["sync_rows"]
    synced = [r for r in rows if r[0]]
    assert [r[3] for r in synced] == [5, 8, 11, 14]
    assert all(r[1] == 0.0 and r[2] == 0.0 for r in synced)
    # between syncs the workers really differ (heterogeneous data), the anchor does not
    assert max(r[1] for r in rows if not r[0] and r[3] > 2) > 1e-3
    assert all(r[2] == 0.0 for r in rows)
    # warm-up steps (t <= 2) keep the workers identical
    assert all(r[1] == 0.0 for r in rows if r[3] <= 2)
    assert res[0]["consensus"] > 0 and res[0]["consensus"] == pytest.approx(res[1]["consensus"])


def test_ddp_equals_single_process_on_the_concatenated_batch(res):
    assert res[0]["ddp_is_wrapper"]
    model = make_model(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for t in range(3):
        parts = [batch(r, t, m) for r in range(K) for m in range(2)]
        x = torch.cat([p[0] for p in parts])
        y = torch.cat([p[1] for p in parts])
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    for r in res:
        np.testing.assert_allclose(r["ddp_final"], flat(model).numpy(), rtol=0, atol=1e-12)
    # the same run on rank 0's data alone is far away (the test can fail)
    assert np.abs(res[0]["ddp_final"] - flat(make_model(0)).numpy()).max() > 1e-2


def test_warmup_flat_allreduce_equals_ddp(res):
    for r in res:
        assert r["warm_moved"] > 1e-3
        assert r["warm_vs_ddp"] < 1e-12


@pytest.mark.parametrize("key", ["local", "post", "diloco"])
def test_palsgd_with_p0_equals_local_sgd_and_diloco_exactly(res, key):
    for r in res:
        a, b = r[f"p0_{key}"]
        assert np.array_equal(a, b)
        assert np.abs(a[-1] - a[0]).max() > 1e-3
    # between syncs the two ranks' models differ (heterogeneous data)
    assert not np.array_equal(res[0][f"p0_{key}"][0][3], res[1][f"p0_{key}"][0][3])


def test_pull_frequency_matches_p_and_coins_follow_theory_coins(res):
    from scipy import stats  # parent only: the spawned workers need not import scipy

    p, n = 0.3, 300
    for mode in ("independent", "shared"):
        for rank, r in enumerate(res):
            pulls = np.array(r[f"coins_{mode}"])
            expected = pull_coins(3, p, np.arange(n), rank, shared=mode == "shared")
            assert np.array_equal(pulls, expected)
            assert r[f"coins_{mode}_stats"] == (pulls.sum(), n - pulls.sum())
            lo, hi = stats.binom.interval(0.999, n, p)
            assert lo <= pulls.sum() <= hi
    shared = [np.array(r["coins_shared"]) for r in res]
    assert np.array_equal(shared[0], shared[1])
    ind = [np.array(r["coins_independent"]) for r in res]
    agree = int((ind[0] == ind[1]).sum())
    q = p**2 + (1 - p) ** 2  # agreement probability of two independent coins
    lo, hi = stats.binom.interval(0.999, n, q)
    assert lo <= agree <= hi and agree < n


def test_sync_uses_one_flat_allreduce(res):
    for r in res:
        a = r["allreduce"]
        assert a["n_tensors"] == 12
        assert a["warmup"] == 2 and a["syncs"] == 3
        assert len(a["calls"]) == a["warmup"] + a["syncs"] == a["stats_calls"]
        # warm-up: gradients + one presence flag per tensor; sync: parameters + 1 scalar
        assert a["calls"][:2] == [a["n_params"] + a["n_tensors"]] * 2
        assert a["calls"][2:] == [a["n_params"] + 1] * 3


def test_state_dict_round_trip_across_ranks(res):
    assert all(r["resume_equal"] for r in res)
    assert res[0]["resume_syncs"] >= 3


def test_buffer_policies_across_ranks(res):
    start, pre, post = res[0]["buffers_average"]
    assert not np.allclose(pre[0], pre[1])
    np.testing.assert_allclose(post[0], (pre[0] + pre[1]) / 2, rtol=0, atol=1e-15)
    assert np.array_equal(post[0], post[1])
    start, pre, post = res[0]["buffers_anchor"]
    assert np.array_equal(post[0], start) and np.array_equal(post[1], start)
    start, pre, post = res[0]["buffers_local"]
    assert np.array_equal(post[0], pre[0]) and np.array_equal(post[1], pre[1])
    assert not np.array_equal(post[0], post[1])


def _fail(rank: int, world: int) -> None:
    raise ValueError(f"boom from rank {rank}")


def test_spawn_workers_reports_worker_errors():
    with pytest.raises(WorkerError, match="worker 0 failed(.|\n)*boom from rank 0"):
        spawn_workers(_fail, 1, timeout_s=60)


def _environment(rank: int, world: int) -> dict:
    return {
        "ppid": os.getppid(),
        "other": os.environ.get("SPAWN_PROBE_OTHER"),
        "startup": os.environ.get("PALSGD_SPAWN_PROBE"),
    }


def test_spawned_workers_see_the_callers_environment(monkeypatch):
    """Workers are forked from a server that imported torch while the variables read at
    start-up are those it started with; every other variable set since reaches them; a
    changed start-up variable (``PALSGD_*``) gets fresh interpreters (their parent: this
    process)."""
    from empirical import distributed

    monkeypatch.delenv("PALSGD_SPAWN_PROBE", raising=False)
    monkeypatch.setenv("SPAWN_PROBE_OTHER", "a")
    same = distributed._server_env is None or distributed._server_env == {
        k: v for k, v in os.environ.items() if k.startswith(distributed._START_UP_VARIABLES)
    }
    (res,) = spawn_workers(_environment, 1, timeout_s=60)
    assert res["other"] == "a" and res["startup"] is None
    if same:  # forked from the server, not from this process
        assert res["ppid"] != os.getpid()
    monkeypatch.setenv("PALSGD_SPAWN_PROBE", "b")
    (res,) = spawn_workers(_environment, 1, timeout_s=60)
    assert res == {"ppid": os.getpid(), "other": "a", "startup": "b"}


def test_a_port_taken_before_the_bind_is_replaced(monkeypatch):
    """Another process listens on the port chosen (the race of a busy machine): the workers
    start again on a new port; a port taken at every try is an error that says so."""
    from empirical import distributed

    real = distributed.find_free_port
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = other.getsockname()[1]
        first = iter([taken])
        monkeypatch.setattr(distributed, "find_free_port", lambda: next(first, None) or real())
        (res,) = spawn_workers(_environment, 1, timeout_s=60)
        assert res["other"] == os.environ.get("SPAWN_PROBE_OTHER")
        monkeypatch.setattr(distributed, "find_free_port", lambda: taken)
        with pytest.raises(WorkerError, match="port was taken 3 times"):
            spawn_workers(_environment, 1, timeout_s=60)
