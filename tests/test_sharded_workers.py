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

from empirical import checkpoint as ck
from empirical.algorithms.fsdp import SliceStream
from empirical.config import resolve_config
from empirical.distributed import spawn_workers
from theory.validation import ParameterError, UserInputError

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
