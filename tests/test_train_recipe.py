"""The paper's recipe in the trainer: precision, learning-rate schedules, export of the anchor
with save_pretrained, optional W&B logging. Tiny GPT-Neo on the embedded text, CPU."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
import torch
from train_cli_args import train_args

from empirical import checkpoint as ck
from empirical.metrics import read_jsonl
from empirical.schedules import rate_at
from palsgd.cli import main as cli_main


def _args(out: Path, *extra: str) -> list[str]:
    return train_args(out, *extra, log_interval=1, checkpoint_interval=6)


def test_bf16_cosine_schedule_and_export_of_the_anchor(tmp_path):
    transformers = pytest.importorskip("transformers")
    out, exp = tmp_path / "run", tmp_path / "export"
    code = cli_main(
        _args(
            out,
            "--precision",
            "bf16",
            "--lr-schedule",
            "cosine",
            "--lr-warmup",
            "2",
            "--lr-min-ratio",
            "0.1",
            "--export-dir",
            str(exp),
        )
    )
    assert code == 0
    lrs = [r["lr"] for r in read_jsonl(out / "metrics.jsonl", "train")]
    # the record of step s is written after step s - 1 ran at rate_at(s - 1)
    assert lrs == pytest.approx([rate_at("cosine", 3e-3, s, 6, 2, 0.1) for s in range(6)])
    model = transformers.GPTNeoForCausalLM.from_pretrained(str(exp))
    d = ck.latest_complete(out / "checkpoints")
    z = ck.load_rank_state(d, ck.read_manifest(d), 0)["algorithm"]["z"]
    exported = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    assert torch.equal(exported, z)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["export_dir"] == str(exp) and summary["run_name"].startswith("palsgd-K1-H2")


def test_fp16_with_grad_scaler_trains_checkpoints_and_resumes(tmp_path):
    out = tmp_path / "run"
    extra = ("--precision", "fp16", "--checkpoint-interval", "2")
    assert cli_main(_args(out, *extra, "--max-steps-this-run", "4")) == 0
    d = ck.latest_complete(out / "checkpoints")
    state = ck.load_rank_state(d, ck.read_manifest(d), 0)
    assert state["scaler"] is not None and state["scaler"]["scale"] > 0
    assert cli_main(_args(out, *extra, "--resume", "auto")) == 0
    assert json.loads((out / "summary.json").read_text())["status"] == "finished"


def test_wandb_logger_is_used_when_installed_and_skipped_when_not(tmp_path, monkeypatch):
    logged = []

    class Run:
        def log(self, data, step):
            logged.append((step, data))

        def finish(self):
            logged.append("finished")

    fake = types.ModuleType("wandb")
    fake.init = lambda **kw: logged.append(("init", kw["project"], kw["name"])) or Run()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    assert cli_main(_args(tmp_path / "a", "--wandb-project", "proj", "--run-name", "r1")) == 0
    assert logged[0] == ("init", "proj", "r1") and logged[-1] == "finished"
    steps = [entry[0] for entry in logged[1:-1]]
    assert steps == sorted(steps) and "train/loss" in logged[1][1]
    monkeypatch.setitem(sys.modules, "wandb", None)  # import fails: not installed
    with pytest.warns(UserWarning, match="'wandb' package is not installed"):
        assert cli_main(_args(tmp_path / "b", "--wandb-project", "proj")) == 0
