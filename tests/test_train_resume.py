"""Resume safety of the trainer: changed hyperparameters, newest intact checkpoint, a full
disk, ranks that see different checkpoints. Tiny GPT-Neo on the embedded text, CPU."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import torch
from train_cli_args import TINY_OVERRIDES, train_args

from core import exitcodes
from empirical import checkpoint as ck
from empirical.config import resolve_config
from empirical.distributed import spawn_workers
from empirical.metrics import read_jsonl
from palsgd.cli import main as cli_main


def _args(out: Path, *extra: str) -> list[str]:
    return train_args(out, *extra)


def _stopped_run(out: Path) -> None:
    assert cli_main(_args(out, "--max-steps-this-run", "4")) == 0


def test_changed_hyperparameters_are_refused_with_their_names(tmp_path, capsys):
    out = tmp_path / "run"
    _stopped_run(out)
    capsys.readouterr()
    code = cli_main(_args(out, "--resume", "auto", "--lr", "0.05", "--gamma", "0.2", "--mu", "0.5"))
    err = capsys.readouterr().err
    assert code == 2
    for text in (
        "alpha: checkpoint 0.003, this run 0.05",
        "gamma: checkpoint 0.7, this run 0.2",
        "mu: checkpoint 0.9, this run 0.5",
        "--allow-changed alpha,gamma,mu",
    ):
        assert text in err
    assert "Traceback" not in err
    # a structural field cannot be allowed
    assert cli_main(_args(out, "--resume", "auto", "--allow-changed", "H")) == 2
    assert "cannot change on resume" in capsys.readouterr().err


def test_allowed_changes_are_applied_and_recorded(tmp_path, capsys):
    out = tmp_path / "run"
    _stopped_run(out)
    code = cli_main(
        _args(
            out,
            "--resume",
            "auto",
            "--lr",
            "0.05",
            "--gamma",
            "0.2",
            "--mu",
            "0.5",
            "--allow-changed",
            "lr,gamma,mu",
        )
    )
    assert code == 0
    assert "changed hyperparameters" in capsys.readouterr().err
    d = ck.latest_complete(out / "checkpoints")
    state = ck.load_rank_state(d, ck.read_manifest(d), 0)
    assert state["step"] == 6
    assert state["optimizer"]["param_groups"][0]["lr"] == pytest.approx(0.05)
    outer = state["algorithm"]["outer"]["param_groups"][0]
    assert outer["lr"] == pytest.approx(0.2) and outer["momentum"] == pytest.approx(0.5)
    resume = [r for r in read_jsonl(out / "metrics.jsonl", "event") if r["event"] == "resume"]
    assert resume[-1]["changed"]["alpha"] == {"checkpoint": 0.003, "now": 0.05}
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["changed_on_resume"]) == {"alpha", "gamma", "mu"}
    assert summary["config"]["alpha"] == 0.05
    lrs = [r["lr"] for r in read_jsonl(out / "metrics.jsonl", "train")]
    assert lrs[-1] == pytest.approx(0.05) and lrs[0] == pytest.approx(0.003)


def test_resume_auto_falls_back_to_the_newest_intact_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    _stopped_run(out)
    rank0 = ck.rank_file(ck.step_dir(out / "checkpoints", 4), 0)
    blob = bytearray(rank0.read_bytes())
    blob[-30] ^= 0x11  # same size, other bytes: only the SHA-256 can tell
    rank0.write_bytes(bytes(blob))
    capsys.readouterr()
    assert cli_main(_args(out, "--resume", "auto", "--T", "4")) == 0
    err = capsys.readouterr().err
    assert "skipping checkpoint" in err and "step_00000004" in err
    resume = [r for r in read_jsonl(out / "metrics.jsonl", "event") if r["event"] == "resume"]
    assert resume[-1]["step"] == 2


def test_disk_full_during_a_checkpoint_leaves_the_last_one_usable(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    real_fsync = os.fsync

    def fsync(fd):
        if "step_00000004" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    code = cli_main(_args(out))
    err = capsys.readouterr().err
    assert code == exitcodes.OUT_OF_RESOURCES, err
    assert "No space left on device" in err and "step_00000002" in err
    assert "Traceback" not in err
    root = out / "checkpoints"
    leftovers = [p for p in root.rglob("*") if ".tmp" in p.name]
    assert leftovers == [] and not ck.step_dir(root, 4).exists()
    assert ck.verify_checkpoint(ck.step_dir(root, 2), 0) is None
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert cli_main(_args(out, "--resume", "auto")) == 0
    assert json.loads((out / "summary.json").read_text())["step"] == 6


def test_atomic_write_removes_its_temp_file_on_failure(tmp_path, monkeypatch):
    from empirical.metrics import atomic_write_bytes

    target = tmp_path / "f.bin"
    target.write_bytes(b"old")

    def fail(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError):
        atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


def _rank_sees_own_dir(rank: int, world: int, base: str) -> str:
    from core.errors import UserInputError
    from empirical.train import train

    cfg = resolve_config(
        overrides=dict(
            **TINY_OVERRIDES,
            checkpoint_interval=2,
            progress=False,
            resume="auto",
            output_dir=f"{base}/out{rank}",
            checkpoint_dir=f"{base}/ck" if rank == 0 else f"{base}/empty",
        )
    )
    try:
        train(cfg)
    except UserInputError as exc:
        return str(exc)
    return "no error"


@pytest.mark.distributed
def test_ranks_that_see_different_checkpoints_stop_with_one_clear_error(tmp_path):
    out = tmp_path / "first"
    assert (
        cli_main(_args(out, "--max-steps-this-run", "4", "--checkpoint-dir", str(tmp_path / "ck")))
        == 0
    )
    for _, directory, _ in ck.list_checkpoints(tmp_path / "ck"):  # as if written by 2 ranks
        man = json.loads((directory / ck.MANIFEST).read_text())
        entry = dict(man["files"][0], rank=1, file=ck.rank_file(directory, 1).name)
        ck.rank_file(directory, 1).write_bytes(ck.rank_file(directory, 0).read_bytes())
        man.update(world_size=2, files=[man["files"][0], entry])
        (directory / ck.MANIFEST).write_text(json.dumps(man))
    res = spawn_workers(_rank_sees_own_dir, 2, str(tmp_path), timeout_s=240)
    assert res[0] == res[1] and "no checkpoint is intact on every rank" in res[0], res


def test_old_manifest_without_config_still_resumes(tmp_path):
    out = tmp_path / "run"
    _stopped_run(out)
    man = ck.step_dir(out / "checkpoints", 4) / ck.MANIFEST
    data = json.loads(man.read_text())
    data.pop("config")
    man.write_text(json.dumps(data))
    assert cli_main(_args(out, "--resume", "auto")) == 0
    assert torch.load  # the run above finished from step 4
    assert json.loads((out / "summary.json").read_text())["resumed_from"].endswith("step_00000004")


def test_disk_full_while_writing_metrics_exits_71_without_traceback(tmp_path, monkeypatch, capsys):
    import empirical.metrics as metrics

    real = metrics.atomic_write_json

    def full(path, obj):
        if str(path).endswith("config.json"):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, obj)

    monkeypatch.setattr("empirical.train.records.atomic_write_json", full)
    assert cli_main(_args(tmp_path / "run")) == exitcodes.OUT_OF_RESOURCES
    err = capsys.readouterr().err
    assert "no space left" in err and "config.json" in err and "Traceback" not in err
