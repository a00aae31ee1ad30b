"""The trainer (empirical.train): reproducibility, exact resume, divergence, checkpoint
mismatches, two-process resume and restarts. The command (bad input, --help, the launch of
ranks): tests/test_train_cli.py.

Runs are tiny (GPT-Neo-tiny on the embedded text, a few dozen steps, CPU, gloo). Single
process runs go through the same code path as torchrun ones (a world-size-1 group);
two-process runs use ``empirical.distributed.spawn_workers`` and ``torch.distributed.run``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from harness.torchrun import ENV, TORCHRUN_2

from empirical import checkpoint as ck
from empirical.config import TrainConfig, resolve_config
from empirical.metrics import EVAL_FIELDS, TIMING_FIELDS, TRAIN_FIELDS, read_jsonl
from palsgd.cli import main as cli_main

#: small, fast settings shared by the tests (each test overrides what it checks)
BASE = dict(
    T=20,
    batch_size=4,
    seq_len=32,
    A=2,
    H=4,
    p=0.3,
    eta=1.0,
    T0=2,
    alpha=3e-3,
    log_interval=3,
    eval_interval=4,
    eval_batches=2,
    progress=False,
)


def _cfg(out: Path, **kw) -> TrainConfig:
    return resolve_config(overrides={**BASE, "output_dir": str(out), **kw})


def _train(cfg: TrainConfig) -> int:
    from empirical.train import train

    return train(cfg)


def _records(out: Path, kinds=("train", "eval")) -> list[dict]:
    """train/eval records without the fields that measure this machine's clock."""
    recs = [r for r in read_jsonl(out / "metrics.jsonl") if r["kind"] in kinds]
    return [{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in recs]


def _final_state(out: Path, rank: int = 0) -> dict:
    d = ck.latest_complete(out / "checkpoints")
    return ck.load_rank_state(d, ck.read_manifest(d), rank)


def _assert_same_state(a: dict, b: dict) -> None:
    assert a["step"] == b["step"]
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys()
    for i in sa:
        for name in sa[i]:
            assert torch.equal(torch.as_tensor(sa[i][name]), torch.as_tensor(sb[i][name]))
    za, zb = a["algorithm"]["z"], b["algorithm"]["z"]
    assert (za is None and zb is None) or torch.equal(za, zb)
    counters = ("t", "local_started")
    assert {k: a["algorithm"][k] for k in counters} == {k: b["algorithm"][k] for k in counters}
    stats = [k for k in a["algorithm"]["stats"] if not k.startswith("time_")]
    assert {k: a["algorithm"]["stats"][k] for k in stats} == {
        k: b["algorithm"]["stats"][k] for k in stats
    }
    assert a["data"] == b["data"]
    assert torch.equal(a["rng"]["torch"], b["rng"]["torch"])


# ----------------------------------------------------------------------------- single process


def test_same_seed_identical_metrics_and_documented_fields(tmp_path):
    assert _train(_cfg(tmp_path / "a", checkpoint_interval=10)) == 0
    assert _train(_cfg(tmp_path / "b")) == 0
    assert _train(_cfg(tmp_path / "c", seed=1)) == 0
    a, b, c = (_records(tmp_path / x) for x in "abc")
    assert a == b
    assert [r["loss"] for r in a if r["kind"] == "train"] != [
        r["loss"] for r in c if r["kind"] == "train"
    ]
    # CSV copies are identical too once the timing columns are dropped
    for name in ("train.csv", "eval.csv"):
        rows = []
        for run in "ab":
            lines = (tmp_path / run / name).read_text().splitlines()
            header = lines[0].split(",")
            keep = [i for i, h in enumerate(header) if h not in TIMING_FIELDS]
            rows.append([[line.split(",")[i] for i in keep] for line in lines])
        assert rows[0] == rows[1]
    # documented fields, and the counters add up
    train = [r for r in read_jsonl(tmp_path / "a" / "metrics.jsonl") if r["kind"] == "train"]
    assert [r["step"] for r in train] == [3, 6, 9, 12, 15, 18, 20]
    prev_wall = 0.0
    for r in train:
        assert tuple(k for k in r if k != "kind") == TRAIN_FIELDS
        assert r["grad_steps"] + r["pull_steps"] == r["step"]
        # warm-up ends after T0 = 2 steps; then a sync every H = 4 steps
        assert r["syncs"] == max(0, (r["step"] - 2) // 4)
        assert r["loss"] > 0 and r["lr"] == pytest.approx(3e-3)
        assert r["tokens"] == r["grad_steps"] * 2 * 4 * 32
        assert r["wall_s"] >= prev_wall and r["time_compute_s"] > 0
        assert r["time_compute_s"] + r["time_comm_s"] + r["time_pull_s"] <= r["wall_s"] + 1e-9
        prev_wall = r["wall_s"]
    evals = [r for r in read_jsonl(tmp_path / "a" / "metrics.jsonl") if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [0, 4, 8, 12, 16, 20]
    assert all(r["evaluated"] == "anchor" and r["eval_loss"] > 0 for r in evals)
    assert (tmp_path / "a" / "eval.csv").read_text().splitlines()[0] == ",".join(EVAL_FIELDS)
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["step"] == 20
    assert summary["totals"]["grad_steps"] == train[-1]["grad_steps"]
    assert summary["versions"]["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert summary["last_checkpoint"].endswith("step_00000020")


def test_eval_is_on_the_anchor(tmp_path):
    # No sync before T (H > T, no warm-up): the anchor stays the initial model, so every
    # evaluation must equal the one at step 0 although the local model trains.
    cfg = _cfg(tmp_path / "nosync", T=12, H=50, T0=0, eval_interval=4)
    assert _train(cfg) == 0
    recs = read_jsonl(tmp_path / "nosync" / "metrics.jsonl")
    evals = [r["eval_loss"] for r in recs if r["kind"] == "eval"]
    train = [r["loss"] for r in recs if r["kind"] == "train"]
    assert len(evals) == 4 and len(set(evals)) == 1
    assert train[-1] < evals[0] - 0.1  # the local model did move
    # with syncs the anchor moves, so the same check would fail
    assert _train(_cfg(tmp_path / "sync", T=12, H=2, T0=0, eval_interval=4)) == 0
    evals = [
        r["eval_loss"]
        for r in read_jsonl(tmp_path / "sync" / "metrics.jsonl")
        if r["kind"] == "eval"
    ]
    assert len(set(evals)) == 4


def test_resume_after_stop_is_bitwise_identical(tmp_path):
    full, part = tmp_path / "full", tmp_path / "part"
    common = dict(checkpoint_interval=5, keep_checkpoints=5)
    assert _train(_cfg(full, **common)) == 0
    # stop after 12 steps without a final checkpoint (as a crash would), then resume from 10
    assert _train(_cfg(part, max_steps_this_run=12, **common)) == 0
    assert ck.latest_complete(part / "checkpoints").name == "step_00000010"
    assert json.loads((part / "summary.json").read_text())["status"] == "stopped"
    assert _train(_cfg(part, resume="auto", **common)) == 0
    _assert_same_state(_final_state(full), _final_state(part))
    assert _records(full) == _records(part)
    events = [r["event"] for r in read_jsonl(part / "metrics.jsonl") if r["kind"] == "event"]
    assert events == ["start", "resume"]
    summary = json.loads((part / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["resumed_from"].endswith("step_00000010")
    # resuming a finished run from an older checkpoint replays the same steps
    assert _train(_cfg(part, resume=str(part / "checkpoints" / "step_00000015"), **common)) == 0
    _assert_same_state(_final_state(full), _final_state(part))
    assert _records(full) == _records(part)


def test_nan_loss_stops_with_code_3_and_keeps_last_checkpoint(tmp_path, monkeypatch, capsys):
    import empirical.models as models

    real = models.compute_loss
    calls = {"n": 0}

    def poisoned(model, batch, task, **kw):
        calls["n"] += 1
        loss = real(model, batch, task, **kw)
        return loss * float("nan") if calls["n"] > 6 else loss

    monkeypatch.setattr(models, "compute_loss", poisoned)
    # p = 0 and A = 1: step s is the s-th loss call, so the 7th step is the first NaN
    out = tmp_path / "nan"
    cfg = _cfg(out, p=0.0, A=1, log_interval=5, checkpoint_interval=5, eval_interval=0)
    assert _train(cfg) == 3
    err = capsys.readouterr().err
    assert "non-finite loss at step 7" in err and "step_00000005" in err
    assert "Traceback" not in err
    assert [s for s, _, _ in ck.list_checkpoints(out / "checkpoints")] == [5]
    state = _final_state(out)
    assert all(torch.isfinite(v).all() for v in state["model"].values())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "diverged" and "step 7" in summary["message"]


def test_nonfinite_parameters_are_never_checkpointed(tmp_path, monkeypatch, capsys):
    from empirical.algorithms.local import LocalAlgorithm

    real_step = LocalAlgorithm.step

    def corrupting_step(self):
        info = real_step(self)
        if self.t == 9:  # the step's loss was finite; the parameters are not
            next(self.model.parameters()).data.view(-1)[0] = float("inf")
        return info

    monkeypatch.setattr(LocalAlgorithm, "step", corrupting_step)
    out = tmp_path / "inf"
    cfg = _cfg(out, log_interval=50, checkpoint_interval=5, eval_interval=0)
    assert _train(cfg) == 3
    err = capsys.readouterr().err
    assert "non-finite parameters at step 10" in err and "step_00000005" in err
    assert [s for s, _, _ in ck.list_checkpoints(out / "checkpoints")] == [5]


def test_checkpoint_mismatch_and_corruption_exit_2(tmp_path, capsys):
    out = tmp_path / "run"
    args = [
        "train",
        "--nproc",
        "1",
        "--output-dir",
        str(out),
        "--no-progress",
        "--T",
        "4",
        "--checkpoint-interval",
        "2",
        "--eval-interval",
        "0",
        "--seq-len",
        "32",
    ]
    assert cli_main(args) == 0
    # a fresh run must not silently mix with existing checkpoints
    assert cli_main(args) == 2
    assert "--resume auto" in capsys.readouterr().err
    assert cli_main([*args, "--resume", "auto", "--sync_interval", "3"]) == 2
    assert "H: checkpoint 8, this run 3" in capsys.readouterr().err
    assert (
        cli_main(
            [*args, "--resume", "auto", "--model", "resnet-tiny", "--dataset", "embedded-images"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "model: checkpoint 'gptneo-tiny', this run 'resnet-tiny'" in err
    manifest = ck.step_dir(out / "checkpoints", 4) / ck.MANIFEST
    data = json.loads(manifest.read_text())
    data["world_size"] = 2
    manifest.write_text(json.dumps(data))
    assert cli_main([*args, "--resume", "auto"]) == 2
    assert "world_size: checkpoint 2, this run 1" in capsys.readouterr().err
    rank0 = ck.rank_file(ck.step_dir(out / "checkpoints", 2), 0)
    blob = bytearray(rank0.read_bytes())
    blob[-20] ^= 0x55
    rank0.write_bytes(bytes(blob))
    assert cli_main([*args, "--resume", str(rank0.parent)]) == 2
    assert "is corrupt" in capsys.readouterr().err
    # --overwrite starts afresh: the old checkpoints are replaced, none is left over
    assert cli_main([*args, "--T", "2", "--overwrite"]) == 0
    assert [s for s, _, _ in ck.list_checkpoints(out / "checkpoints")] == [2]


# ----------------------------------------------------------------------------- two processes


def _two_rank_runs(rank: int, world_size: int, base: str) -> None:
    os.environ["LOCAL_RANK"] = str(rank)
    out = Path(base)
    common = dict(checkpoint_interval=5, keep_checkpoints=5, T=16)
    assert _train(_cfg(out / "full", **common)) == 0
    assert _train(_cfg(out / "part", max_steps_this_run=12, **common)) == 0
    assert _train(_cfg(out / "part", resume="auto", **common)) == 0
    local = dict(algorithm="local_sgd", p=0.0, eta=0.0, T0=0, outer="average", gamma=1.0, mu=0.0)
    assert _train(_cfg(out / "local", T=8, H=4, eval_interval=2, **local)) == 0


@pytest.mark.distributed
def test_two_process_resume_is_bitwise_identical(tmp_path):
    from empirical.distributed import spawn_workers

    spawn_workers(_two_rank_runs, 2, str(tmp_path), timeout_s=240)
    full, part = tmp_path / "full", tmp_path / "part"
    for rank in (0, 1):
        _assert_same_state(_final_state(full, rank), _final_state(part, rank))
    # the ranks' local models differ between syncs (independent coins and data shards)
    a0, a1 = _final_state(full, 0), _final_state(full, 1)
    assert a0["data"]["rank"] == 0 and a1["data"]["rank"] == 1
    assert _records(full) == _records(part)
    train = [r for r in read_jsonl(full / "metrics.jsonl") if r["kind"] == "train"]
    assert train[-1]["bytes_communicated"] > 0 and train[-1]["consensus"] is not None
    manifest = ck.read_manifest(ck.latest_complete(full / "checkpoints"))
    assert manifest["world_size"] == 2 and len(manifest["files"]) == 2
    # Local SGD keeps no anchor: its global model between syncs is the workers' average
    evals = [r for r in read_jsonl(tmp_path / "local" / "metrics.jsonl") if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [0, 2, 4, 6, 8]
    assert [r["evaluated"] for r in evals] == ["average"] * 5


@pytest.mark.slow
@pytest.mark.distributed
def test_torchrun_max_restarts_resumes_after_a_crash(tmp_path):
    """A rank failure under ``torchrun --max-restarts 1``: the restarted ranks resume from
    the latest complete checkpoint and finish with the uninterrupted run's metrics."""
    args = [
        "--T",
        "16",
        "--seq-len",
        "32",
        "--batch-size",
        "4",
        "--eval-interval",
        "4",
        "--eval-batches",
        "2",
        "--checkpoint-interval",
        "5",
        "--no-progress",
    ]
    base = TORCHRUN_2
    full, crash = tmp_path / "full", tmp_path / "crash"
    proc = subprocess.run(
        [*base, "-m", "empirical.train", "--output-dir", str(full), *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = subprocess.run(
        [
            *base,
            "--max-restarts",
            "1",
            "-m",
            "empirical.train",
            "--output-dir",
            str(crash),
            "--crash-at-step",
            "12",
            *args,
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "injected failure after step 12" in proc.stderr
    summary = json.loads((crash / "summary.json").read_text())
    assert summary["resumed_from"].endswith("step_00000010")
    assert _records(full) == _records(crash)
    for rank in (0, 1):
        _assert_same_state(_final_state(full, rank), _final_state(crash, rank))
