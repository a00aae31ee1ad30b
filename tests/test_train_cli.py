"""``palsgd train`` and ``python -m empirical.train`` as commands: bad input (exit 2, one
line naming the parameter), the pull's overshoot warning, the default launch of two ranks,
--help, the --config file under the flags, the torchrun launches, and the preset's settings
another algorithm drops. The trainer's runs themselves: tests/test_train.py."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
from harness.torchrun import ENV, TORCHRUN_2

from empirical import checkpoint as ck
from empirical.config import TrainConfig, resolve_config
from empirical.metrics import read_jsonl
from palsgd.cli import main as cli_main


def test_bad_input_exit_2_subprocess():
    """The console script: one line naming the parameter, exit 2, no traceback."""
    cmd = [sys.executable, "-m", "palsgd", "train", "--prob_no_grad", "1.5"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode == 2
    assert "prob_no_grad" in proc.stderr and "1.5" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--model", "nosuch"], "argument --model: invalid choice: 'nosuch'"),
        (["--dataset", "nosuch"], "argument --dataset: invalid choice: 'nosuch'"),
        (["--algorithm", "nosuch"], "argument --algorithm: invalid choice: 'nosuch'"),
        (["--dataset", "tinystories"], "tinystories"),
        (["--data-path", "/no/such/file"], "data path '/no/such/file'"),
        (["--lr", "0.5", "--prob_no_grad", "0.2"], "alpha*eta/p"),  # c = 2.5 > 2
        (["--lr", "0.1", "--alpha", "0.2"], "given twice"),
        (["--H", "0"], "'H' (authors' code: 'sync_interval') = 0"),
        (["--sync_interval", "2.5"], "invalid int value"),
        (["--batch-size", "0"], "'batch_size' = 0"),
        (["--optimizer", "lion"], "argument --optimizer: invalid choice: 'lion'"),
        (["--device", "tpu"], "unknown device 'tpu'"),
        (
            ["--algorithm", "ddp", "--preset", "tiny", "--p", "0.2"],
            "pull steps exist only in 'palsgd'",
        ),
        (["--max-steps-this-run", "3"], "needs checkpoint_interval > 0"),
    ],
)
def test_bad_input_exit_2(argv, needle, tmp_path, capsys):
    code = cli_main(
        ["train", "--nproc", "1", "--output-dir", str(tmp_path), "--no-progress", *argv]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert needle in err
    assert "Traceback" not in err


def test_overshooting_pull_warns(tmp_path, capsys):
    code = cli_main(
        [
            "train",
            "--nproc",
            "1",
            "--output-dir",
            str(tmp_path),
            "--no-progress",
            "--T",
            "2",
            "--lr",
            "0.3",
            "--prob_no_grad",
            "0.2",
            "--eval-interval",
            "0",
        ]
    )
    assert code == 0
    err = capsys.readouterr().err
    assert "pull coefficient alpha*eta/p = 1.5 in (1, 2): a pull step overshoots" in err


def test_the_default_launches_two_ranks(tmp_path, monkeypatch):
    """No --nproc: the options go to a torchrun launch of 2 ranks; --nproc 1 trains here."""
    import empirical.train.launch as train_launch

    launched, trained = [], []
    monkeypatch.setattr(
        train_launch, "launch_torchrun", lambda cfg: launched.append(cfg.nproc) or 0
    )
    monkeypatch.setattr(train_launch, "train", lambda cfg: trained.append(cfg.nproc) or 0)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert TrainConfig().nproc == 2 and resolve_config().nproc == 2
    assert cli_main(["train", "--no-progress", "--output-dir", str(tmp_path)]) == 0
    assert cli_main(["train", "--nproc", "1", "--output-dir", str(tmp_path)]) == 0
    assert (launched, trained) == ([2], [1])


def test_help_lists_every_option(capsys):
    from dataclasses import fields

    assert cli_main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    for f in fields(TrainConfig):
        assert "--" + f.name.replace("_", "-") in out, f.name
    for alias in (
        "--lr",
        "--prob-no-grad",
        "--sync-interval",
        "--outer-lr",
        "--local-sgd-start-iter",
        "--grad-accu-step",
    ):
        assert alias in out


def test_config_file_and_flags(tmp_path, capsys):
    conf = tmp_path / "run.yaml"
    conf.write_text("sync_interval: 5\nlr: 0.002\nbs_per_gpu: 3\nprob_no_grad: 0.1\n")
    code = cli_main(["train", "--config", str(conf), "--lr", "0.004", "--print-config"])
    assert code == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["H"], shown["alpha"], shown["batch_size"], shown["p"]) == (5, 0.004, 3, 0.1)
    conf.write_text("sync_intervall: 5\n")
    assert cli_main(["train", "--nproc", "1", "--config", str(conf)]) == 2
    assert "unknown training option 'sync_intervall'" in capsys.readouterr().err
    assert cli_main(["train", "--nproc", "1", "--config", str(tmp_path / "none.yaml")]) == 2


@pytest.mark.distributed
def test_torchrun_smoke(tmp_path):
    out = tmp_path / "tr"
    cmd = [
        *TORCHRUN_2,
        "-m",
        "empirical.train",
        "--output-dir",
        str(out),
        "--T",
        "12",
        "--seq-len",
        "32",
        "--batch-size",
        "4",
        "--eval-interval",
        "6",
        "--eval-batches",
        "2",
        "--checkpoint-interval",
        "6",
        "--no-progress",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["world_size"] == 2
    train = [r for r in read_jsonl(out / "metrics.jsonl") if r["kind"] == "train"]
    assert train[-1]["step"] == 12 and train[-1]["syncs"] >= 1
    assert len(ck.read_manifest(ck.step_dir(out / "checkpoints", 12))["files"]) == 2


@pytest.mark.distributed
def test_torchrun_bad_input_exits_cleanly_on_every_rank(tmp_path):
    cmd = [
        *TORCHRUN_2,
        "-m",
        "empirical.train",
        "--output-dir",
        str(tmp_path),
        "--model",
        "nosuch",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode != 0
    # every rank rejects the input before the process group exists (no rank waits for
    # another); torchrun stops the group at the first failing rank and reports its code
    assert "argument --model: invalid choice: 'nosuch'" in proc.stderr
    assert "exitcode  : 2" in proc.stderr
    # the only traceback is torchrun's own report, none comes from the trainer
    assert "empirical/" not in proc.stderr and "[rank" not in proc.stderr


@pytest.mark.slow
@pytest.mark.distributed
def test_palsgd_train_nproc_launches_torchrun(tmp_path):
    out = tmp_path / "np"
    cmd = [
        sys.executable,
        "-m",
        "palsgd",
        "train",
        "--nproc",
        "2",
        "--output-dir",
        str(out),
        "--T",
        "6",
        "--seq-len",
        "32",
        "--batch-size",
        "4",
        "--eval-interval",
        "0",
        "--no-progress",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    launched = json.loads((out / "launch_config.json").read_text())
    assert launched["nproc"] == 2 and launched["T"] == 6
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["world_size"] == 2


def test_another_algorithm_drops_the_presets_pull_settings_with_a_note(capsys):
    """--algorithm diloco on the default preset (p = 0.2, eta = 1): the preset's pull
    settings are not used, and the note says so; a p the user gives is refused (above)."""
    from core.options import declare
    from empirical.train import OPTIONS, config_from_args

    parser = argparse.ArgumentParser()
    declare(parser, OPTIONS)
    cfg = config_from_args(parser.parse_args(["--algorithm", "diloco"]))
    assert cfg.algorithm == "diloco" and cfg.p is None and cfg.eta is None
    err = capsys.readouterr().err
    assert "the preset's p = 0.2, eta = 1 are not used" in err
    cfg = config_from_args(parser.parse_args(["--algorithm", "palsgd"]))
    assert cfg.p == 0.2 and capsys.readouterr().err == ""
