"""Sharded workers (``--shards S``, empirical.algorithms.fsdp): K PALSGD workers, each S
ranks sharding its model with FSDP2 on a (replicate, shard) mesh. The sharded run equals
the unsharded run of K workers on the same coins and data up to rounding, holds no full
copy of the model's algorithm state on any rank, and resumes bitwise on the same layout.
Tiny GPT-Neo, a handful of steps, gloo on the CPU."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from core.errors import UserInputError
from core.validation import ParameterError
from empirical import checkpoint as ck
from empirical.algorithms.fsdp import SliceStream
from empirical.config import resolve_config
from empirical.distributed import spawn_workers

RUN = dict(
    T=8, H=4, T0=2, p=0.5, eta=1.0, seq_len=16, A=1, eval_interval=4, eval_batches=1,
    log_interval=4, progress=False, checkpoint_interval=4, keep_checkpoints=3,
)  # fmt: skip
B = 2  # micro-batch per rank of the sharded run; the unsharded worker takes 2 * B


class _Stream:
    def __init__(self) -> None:
        self.n = 0

    def next(self):
        self.n += 1
        ids = torch.arange(8).reshape(4, 2) + 100 * self.n
        return {"input_ids": ids, "labels": ids + 1}, (ids, ids - 1)

    def state_dict(self):
        return {"n": self.n}

    def load_state_dict(self, state):
        self.n = state["n"]


def test_slice_stream_takes_its_share_of_each_worker_batch():
    a, b = SliceStream(_Stream(), 0, 2), SliceStream(_Stream(), 1, 2)
    (da, _), (db, tb) = a.next(), b.next()
    assert da["input_ids"].tolist() == [[100, 101], [102, 103]]
    assert db["labels"].tolist() == [[105, 106], [107, 108]]
    assert tb[1].tolist() == [[103, 104], [105, 106]]
    assert a.state_dict() == {"n": 1}


def test_shards_must_divide_the_ranks_and_need_a_local_algorithm():
    with pytest.raises(ParameterError, match="shards"):
        resolve_config(overrides={"nproc": 4, "shards": 3})
    with pytest.raises(UserInputError, match="'ddp'"):
        resolve_config(overrides={"nproc": 4, "shards": 2, "algorithm": "ddp", "p": None,
                                  "eta": None})  # fmt: skip
    assert resolve_config(overrides={"nproc": 4, "shards": 2}).shards == 2


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)  # the spawned process's own generator: every rank builds the same
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def _algorithm_level(rank: int, world: int, cfg_kw: dict, T: int) -> dict:
    """Ranks 0 and 2 train the unsharded reference (K = 2 workers, batch 4); all four train
    the sharded workers (worker k = ranks 2k, 2k+1, each on its half of worker k's batch)."""
    import torch.distributed as dist

    from empirical.algorithms import AlgorithmConfig, build_algorithm
    from empirical.algorithms.fsdp import shard_model, worker_mesh

    cfg = AlgorithmConfig(**cfg_kw)
    ref_group = dist.new_group([0, 2])
    wm = worker_mesh(2, "cpu")
    worker, shard = wm.worker, wm.shard

    def batches():
        g = torch.Generator().manual_seed(100 + worker)
        return [(torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)) for _ in range(T)]

    def train(model, group, take):
        opt = torch.optim.AdamW(model.parameters(), lr=0.05)
        algo = build_algorithm(cfg, model, opt, process_group=group)
        for x, y in batches():
            if algo.next_action() == "grad":
                xs, ys = take(x), take(y)
                torch.nn.functional.mse_loss(model(xs), ys).backward()
            algo.step()
        algo.finish()
        return algo

    out: dict = {}
    if shard == 0:
        ref = train(_mlp(), ref_group, lambda t: t)
        out["ref"] = [p.detach().clone() for p in ref.model.parameters()]
        out["ref_pulls"] = ref.stats["pull_steps"]
    sharded = shard_model(_mlp(), wm)
    algo = train(sharded, wm.replicate_group, lambda t: t[2 * shard : 2 * shard + 2])
    out["sharded"] = [p.full_tensor().detach().clone() for p in sharded.parameters()]
    out["pulls"] = algo.stats["pull_steps"]
    out["n_local"], out["n_full"] = algo.flat_model.n, sum(p.numel() for p in sharded.parameters())
    return out


def _train_steps(model, algo, batches) -> None:
    for x, y in batches:
        if algo.next_action() == "grad":
            torch.nn.functional.mse_loss(model(x), y).backward()
        algo.step()


def test_the_sharded_paths_on_a_one_rank_mesh(tmp_path):
    """In this process, a world of one rank and a (1, 1) mesh: the parameters become
    DTensors (FSDP2's sharded storage), so the algorithm takes its chunk paths (no flat
    re-pointing, local views, gathered anchor) and the checkpoint helpers round-trip; the
    trajectory equals the plain algorithm's, and a run resumed from local_state continues
    bitwise."""
    import torch.distributed as dist

    from empirical.algorithms import AlgorithmConfig, build_algorithm
    from empirical.algorithms.fsdp import (
        load_local_optimizer_state,
        load_local_state,
        local_state,
        shard_model,
        worker_mesh,
    )
    from empirical.distributed import find_free_port

    assert not dist.is_initialized()
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{find_free_port()}", rank=0, world_size=1
    )
    try:
        wm = worker_mesh(1, "cpu")
        cfg = AlgorithmConfig(name="palsgd", H=3, T0=1, p=0.4, eta=1.0, outer="nesterov",
                              gamma=0.7, mu=0.9, sync_delay=1, seed=2)  # fmt: skip
        g = torch.Generator().manual_seed(0)
        data = [(torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)) for _ in range(9)]

        def build(sharded: bool):
            model = _mlp()
            if sharded:
                shard_model(model, wm)
            opt = torch.optim.AdamW(model.parameters(), lr=0.05)
            return model, opt, build_algorithm(cfg, model, opt, process_group=wm.replicate_group)

        plain, _, pa = build(False)
        sharded, sopt, sa = build(True)
        sfm, pfm = sa.flat_model, pa.flat_model
        assert sfm.sharded and sfm.flat is None and not pfm.sharded and pfm.flat is not None
        _train_steps(plain, pa, data[:4])
        _train_steps(sharded, sa, data[:4])
        assert sa.sync.in_flight is not None  # synced after step 3, lands after step 4
        for a, b in zip(sharded.parameters(), plain.parameters(), strict=True):
            torch.testing.assert_close(a.full_tensor(), b, rtol=1e-6, atol=1e-7)
        anchor = sa.anchor_state_dict()
        for k, v in pa.anchor_state_dict().items():
            torch.testing.assert_close(anchor[k], v, rtol=1e-6, atol=1e-7)
        saved = {
            "model": local_state(sharded.state_dict()),
            "optimizer": local_state(sopt.state_dict()),
            "algorithm": sa.state_dict(),
        }
        torch.save(saved, tmp_path / "rank0.pt")
        _train_steps(sharded, sa, data[4:])
        again, aopt, aa = build(True)
        state = torch.load(tmp_path / "rank0.pt", weights_only=False)
        load_local_state(again, state["model"])
        load_local_optimizer_state(aopt, state["optimizer"])
        aa.load_state_dict(state["algorithm"])
        _train_steps(again, aa, data[4:])
        for a, b in zip(again.parameters(), sharded.parameters(), strict=True):
            assert torch.equal(a.to_local(), b.to_local())
        assert torch.equal(aa.z, sa.z)
    finally:
        dist.destroy_process_group()


CONFIGS = {
    "nesterov": dict(name="palsgd", H=3, T0=2, p=0.4, eta=1.0, outer="nesterov", gamma=0.7, mu=0.9),
    "average-overlapped": dict(name="palsgd", H=3, p=0.4, eta=1.0, sync_delay=1, seed=4),
}


def _both(rank: int, world: int, T: int) -> dict:
    return {k: _algorithm_level(rank, world, kw, T) for k, kw in CONFIGS.items()}


@pytest.mark.slow
@pytest.mark.distributed
def test_sharded_algorithm_equals_the_unsharded_one():
    """Uneven dim-0 chunks (5 and 3 rows over 2 shards), warm-up, pulls, the overlapped
    sync: the full parameters of each sharded worker equal its unsharded counterpart's up
    to rounding, and each rank keeps only its chunk of the algorithm's state."""
    runs = spawn_workers(_both, 4, 10, timeout_s=600)
    for key in CONFIGS:
        res = [r[key] for r in runs]
        for k in (0, 1):
            ref = res[2 * k]
            for s in (0, 1):
                mine = res[2 * k + s]
                for a, b in zip(mine["sharded"], ref["ref"], strict=True):
                    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=key)
                assert mine["pulls"] == ref["ref_pulls"]
                assert mine["n_local"] < mine["n_full"]
        assert res[0]["n_local"] + res[1]["n_local"] == res[0]["n_full"]
        assert max(r["pulls"] for r in res) > 0
        pairs = zip(res[0]["ref"], res[2]["ref"], strict=True)
        assert max((a - b).abs().max().item() for a, b in pairs) > 1e-4  # workers differ


def _runs(rank: int, world: int, base: str, shards: int, resume: bool) -> dict:
    from empirical.train import train

    os.environ["LOCAL_RANK"] = str(rank)
    cfg = {**RUN, "nproc": world, "shards": shards, "batch_size": B * (2 // shards)}
    out = Path(base)
    assert train(resolve_config(overrides={**cfg, "output_dir": str(out / "full")})) == 0
    if resume:
        part = {**cfg, "output_dir": str(out / "part")}
        assert train(resolve_config(overrides={**part, "max_steps_this_run": 6})) == 0
        assert train(resolve_config(overrides={**part, "resume": "auto"})) == 0
    return {}


def _state(out: Path, rank: int) -> dict:
    d = ck.latest_complete(out / "checkpoints")
    return ck.load_rank_state(d, ck.read_manifest(d), rank)


@pytest.mark.slow
@pytest.mark.distributed
def test_two_sharded_workers_equal_the_unsharded_run(tmp_path):
    """K = 2 workers: 4 ranks (2 shards each, micro-batch B) against 2 ranks (micro-batch
    2B): same coins (the worker's rank in the replicate group), same data (each shard takes
    its half of the worker's batch), same anchors and models up to rounding."""
    spawn_workers(_runs, 4, str(tmp_path / "sharded"), 2, False, timeout_s=600)
    spawn_workers(_runs, 2, str(tmp_path / "plain"), 1, False, timeout_s=300)
    sharded, plain = tmp_path / "sharded" / "full", tmp_path / "plain" / "full"
    for k in (0, 1):
        ref = _state(plain, k)
        chunks = [_state(sharded, 2 * k + s) for s in (0, 1)]
        for key, full in ref["model"].items():
            parts = [c["model"][key] for c in chunks]
            got = parts[0] if parts[0].shape == full.shape else torch.cat(parts)
            torch.testing.assert_close(got, full, rtol=1e-5, atol=2e-6, msg=key)
        n_local = [c["algorithm"]["z"].numel() for c in chunks]
        assert sum(n_local) == ref["algorithm"]["z"].numel() and max(n_local) < sum(n_local)
        for c in chunks:  # every shard of worker k took worker k's coins
            assert c["algorithm"]["stats"]["pull_steps"] == ref["algorithm"]["stats"]["pull_steps"]
            assert c["algorithm"]["stats"]["syncs"] == ref["algorithm"]["stats"]["syncs"] == 1
    pulls = {_state(plain, k)["algorithm"]["stats"]["pull_steps"] for k in (0, 1)}
    assert max(pulls) > 0
    assert ck.read_manifest(ck.latest_complete(sharded / "checkpoints"))["shards"] == 2


@pytest.mark.slow
@pytest.mark.distributed
def test_sharded_run_resumes_bitwise(tmp_path):
    spawn_workers(_runs, 4, str(tmp_path), 2, True, timeout_s=900)
    for rank in range(4):
        a, b = _state(tmp_path / "full", rank), _state(tmp_path / "part", rank)
        assert a["step"] == b["step"] == RUN["T"]
        for key in a["model"]:
            assert torch.equal(a["model"][key], b["model"][key]), key
        for i, entry in a["optimizer"]["state"].items():
            for name, val in entry.items():
                assert torch.equal(val, b["optimizer"]["state"][i][name]), (i, name)
        assert torch.equal(a["algorithm"]["z"], b["algorithm"]["z"])
        assert a["data"] == b["data"]
