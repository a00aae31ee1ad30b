"""Checkpoint store (empirical.checkpoint) and metrics writer resume (empirical.metrics)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from core.errors import UserInputError
from empirical import checkpoint as ck
from empirical.metrics import EVAL_FIELDS, TRAIN_FIELDS, MetricsWriter, read_jsonl


def _save(root, step, world=2, meta=None):
    infos = []
    for rank in range(world):
        state = {"rank": rank, "step": step, "w": torch.full((3,), float(rank + step))}
        infos.append(ck.save_rank_state(root, step, rank, state))
    return ck.write_manifest(root, step, meta or {"model": "m", "world_size": world}, infos)


def test_save_load_roundtrip_and_manifest(tmp_path):
    _save(tmp_path, 5)
    d = ck.step_dir(tmp_path, 5)
    m = ck.read_manifest(d)
    assert m["step"] == 5 and m["world_size"] == 2 and m["model"] == "m"
    assert [f["rank"] for f in m["files"]] == [0, 1]
    ck.check_rank_files(d, m)
    s1 = ck.load_rank_state(d, m, 1)
    assert torch.equal(s1["w"], torch.full((3,), 6.0))
    # no temporary files are left behind by the atomic writes
    assert sorted(p.name for p in d.iterdir()) == [
        "manifest.json",
        "rank_00000.pt",
        "rank_00001.pt",
    ]


def test_incomplete_checkpoint_is_ignored_and_pruned(tmp_path):
    _save(tmp_path, 5)
    _save(tmp_path, 10)
    # a save interrupted before the manifest: rank files only
    ck.save_rank_state(tmp_path, 15, 0, {"rank": 0})
    assert ck.latest_complete(tmp_path) == ck.step_dir(tmp_path, 10)
    assert ck.resolve_resume("auto", tmp_path) == ck.step_dir(tmp_path, 10)
    with pytest.raises(UserInputError, match="incomplete"):
        ck.resolve_resume(str(ck.step_dir(tmp_path, 15)), tmp_path)
    # a stale partial directory older than the newest complete one is removed by prune
    ck.save_rank_state(tmp_path, 7, 0, {"rank": 0})
    _save(tmp_path, 20)
    removed = ck.prune(tmp_path, keep=2)
    names = {p.name for p in removed}
    assert names == {"step_00000005", "step_00000007", "step_00000015"}
    left = [(s, c) for s, _, c in ck.list_checkpoints(tmp_path)]
    assert left == [(10, True), (20, True)]


def test_resolve_resume_paths(tmp_path):
    assert ck.resolve_resume(None, tmp_path) is None
    assert ck.resolve_resume("auto", tmp_path / "nothing") is None
    with pytest.raises(UserInputError, match="does not exist"):
        ck.resolve_resume(str(tmp_path / "nope"), tmp_path)
    _save(tmp_path, 3)
    _save(tmp_path, 4)
    assert ck.resolve_resume(str(tmp_path), tmp_path).name == "step_00000004"
    manifest = ck.step_dir(tmp_path, 3) / ck.MANIFEST
    assert ck.resolve_resume(str(manifest), tmp_path).name == "step_00000003"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserInputError, match="not a checkpoint"):
        ck.resolve_resume(str(empty), tmp_path)


def test_corrupt_rank_file_is_reported(tmp_path):
    _save(tmp_path, 5)
    d = ck.step_dir(tmp_path, 5)
    m = ck.read_manifest(d)
    f = ck.rank_file(d, 1)
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, different content
    f.write_bytes(bytes(data))
    ck.check_rank_files(d, m)  # sizes still match
    with pytest.raises(UserInputError, match="rank_00001.pt' is corrupt"):
        ck.load_rank_state(d, m, 1)
    ck.load_rank_state(d, m, 0)  # the other rank's file is fine
    f.write_bytes(bytes(data[:100]))  # truncated
    with pytest.raises(UserInputError, match="corrupt: 100 bytes"):
        ck.check_rank_files(d, m)
    (d / ck.MANIFEST).write_text("{not json")
    with pytest.raises(UserInputError, match="manifest .* is corrupt"):
        ck.read_manifest(d)


def test_check_compatible_names_every_difference(tmp_path):
    _save(tmp_path, 5, meta={"model": "gptneo-tiny", "algorithm": "palsgd", "H": 8})
    m = ck.read_manifest(ck.step_dir(tmp_path, 5))
    ck.check_compatible(m, {"model": "gptneo-tiny", "world_size": 2, "H": 8.0})
    with pytest.raises(UserInputError) as err:
        ck.check_compatible(
            m, {"model": "resnet-tiny", "world_size": 4, "H": 8, "algorithm": "palsgd"}, "ckpt"
        )
    text = str(err.value)
    assert "model: checkpoint 'gptneo-tiny', this run 'resnet-tiny'" in text
    assert "world_size: checkpoint 2, this run 4" in text
    assert "algorithm" not in text and "H:" not in text


def test_rng_capture_restore_replays_draws():
    gen_np = np.random.default_rng(3)
    gen_t = torch.Generator().manual_seed(5)
    gens = {"np": gen_np, "t": gen_t}
    state = ck.capture_rng(gens)
    first = (
        random.random(),
        np.random.rand(),
        torch.rand(2),
        gen_np.random(),
        torch.rand(2, generator=gen_t),
    )
    ck.restore_rng(state, gens)
    second = (
        random.random(),
        np.random.rand(),
        torch.rand(2),
        gen_np.random(),
        torch.rand(2, generator=gen_t),
    )
    assert first[0] == second[0] and first[1] == second[1] and first[3] == second[3]
    assert torch.equal(first[2], second[2]) and torch.equal(first[4], second[4])
    with pytest.raises(UserInputError, match="no state for the random generator"):
        ck.restore_rng(state, {"other": np.random.default_rng(0)})


def test_remove_after(tmp_path):
    for s in (5, 10, 15):
        _save(tmp_path, s, world=1)
    removed = ck.remove_after(tmp_path, 10)
    assert [p.name for p in removed] == ["step_00000015"]
    assert ck.latest_complete(tmp_path).name == "step_00000010"


def test_metrics_resume_truncates_to_position(tmp_path):
    rec = dict.fromkeys(TRAIN_FIELDS, 1)
    with MetricsWriter(tmp_path) as w:
        w.write("train", {**rec, "step": 1})
        w.write("eval", {"step": 1, "eval_loss": 2.0, "evaluated": "anchor"})
        pos = w.position()
        w.write("train", {**rec, "step": 2})  # written after the checkpoint: dropped
        w.write("eval", {"step": 2, "eval_loss": float("nan")})
    with MetricsWriter(tmp_path, resume_position=pos) as w:
        w.write("train", {**rec, "step": 3})
    steps = [(r["kind"], r["step"]) for r in read_jsonl(tmp_path / "metrics.jsonl")]
    assert steps == [("train", 1), ("eval", 1), ("train", 3)]
    train_csv = (tmp_path / "train.csv").read_text().splitlines()
    assert train_csv[0] == ",".join(TRAIN_FIELDS)
    assert [line.split(",")[0] for line in train_csv[1:]] == ["1", "3"]
    eval_csv = (tmp_path / "eval.csv").read_text().splitlines()
    assert eval_csv[0] == ",".join(EVAL_FIELDS) and len(eval_csv) == 2
    # a fresh writer (no resume position) starts the files afresh
    with MetricsWriter(tmp_path) as w:
        w.write("event", {"event": "start"})
    assert len(read_jsonl(tmp_path / "metrics.jsonl")) == 1


def test_metrics_nonfinite_written_by_the_one_json_convention(tmp_path):
    """NaN is null, inf the string "inf" (core.io.json_safe); read_jsonl gives inf back."""
    with MetricsWriter(tmp_path) as w:
        out = w.write("train", {"step": 1, "loss": float("inf"), "grad_norm": float("nan")})
    assert out["loss"] == "inf" and out["grad_norm"] is None
    line = (tmp_path / "metrics.jsonl").read_text()
    assert json.loads(line)["loss"] == "inf"
    assert read_jsonl(tmp_path / "metrics.jsonl")[0]["loss"] == float("inf")


def test_disabled_writer_writes_nothing(tmp_path):
    w = MetricsWriter(tmp_path / "x", enabled=False)
    w.write("train", {"step": 1})
    assert w.position() == {}
    w.close()
    assert not (tmp_path / "x").exists()


def test_tensorboard_optional(tmp_path):
    try:
        import torch.utils.tensorboard  # noqa: F401
    except ImportError:
        with pytest.warns(UserWarning, match="tensorboard"):
            w = MetricsWriter(tmp_path, tensorboard=True)
        w.write("train", {"step": 1, "loss": 1.0})
        w.close()
        assert not (tmp_path / "tb").exists()
    else:
        with MetricsWriter(tmp_path, tensorboard=True) as w:
            w.write("train", {"step": 1, "loss": 1.0})
        assert any((tmp_path / "tb").iterdir())


def test_intact_checkpoints_skip_damage_but_report_other_runs(tmp_path):
    for step in (2, 4, 6):
        _save(tmp_path, step)
    (ck.step_dir(tmp_path, 6) / ck.MANIFEST).write_text("{not json")
    f = ck.rank_file(ck.step_dir(tmp_path, 4), 1)
    blob = bytearray(f.read_bytes())
    blob[-5] ^= 1
    f.write_bytes(bytes(blob))
    good, bad = ck.intact_checkpoints(tmp_path, rank=1)
    assert [s for s, _ in good] == [2]
    assert [d.name for d, _ in bad] == ["step_00000006", "step_00000004"]
    assert "SHA-256" in bad[1][1] and "corrupt" in bad[0][1]
    good0, _ = ck.intact_checkpoints(tmp_path, rank=0)  # rank 0's own file is fine
    assert [s for s, _ in good0] == [4, 2]

    def other_run(manifest, directory):
        raise UserInputError("does not match this run")

    with pytest.raises(UserInputError, match="does not match"):
        ck.intact_checkpoints(tmp_path, rank=0, check=other_run)


def test_common_resume_step():
    from empirical.resume import common_resume_step

    notes = [{"rank": 0, "candidates": [6, 4, 2]}, {"rank": 1, "candidates": [4, 2]}]
    assert common_resume_step(notes) == 4
    assert (
        common_resume_step([{"rank": 0, "candidates": []}, {"rank": 1, "candidates": []}]) is None
    )
    with pytest.raises(UserInputError, match="no checkpoint is intact on every rank"):
        common_resume_step([{"rank": 0, "candidates": [6]}, {"rank": 1, "candidates": []}])
