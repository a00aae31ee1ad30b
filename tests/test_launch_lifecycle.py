"""The launcher's signals and exits: SIGTERM, SIGINT and SIGHUP reach the ranks, no
process of a run survives its launcher (even a SIGKILL of ``palsgd train`` or ``palsgd
probe``), a full disk exits 71 with several ranks too, and the in-process path takes the
thread count that torchrun gives a rank.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from core import exitcodes
from palsgd.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "tests" / "harness"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
#: a run that trains until it is stopped
ENDLESS = ["--nproc", "2", "--T", "100000", "--eval-interval", "0", "--no-progress"]


def _start(kind: str, out: Path) -> tuple[subprocess.Popen, Path]:
    """``palsgd train`` or ``palsgd probe`` of an endless 2-rank run; the run's metrics file."""
    if kind == "train":
        args = ["train", *ENDLESS, "--log-interval", "1", "--output-dir", str(out)]
        metrics = out / "metrics.jsonl"
    else:
        args = ["probe", "--out", str(out), "--steps", "100000", "--points", "2", "--no-progress"]
        metrics = out / "run" / "metrics.jsonl"
    cmd = [sys.executable, "-m", "palsgd", *args]
    proc = subprocess.Popen(cmd, env=ENV, stderr=subprocess.PIPE, text=True)
    return proc, metrics


def _descendants_once_training(proc: subprocess.Popen, metrics: Path) -> list[psutil.Process]:
    """The launcher's descendants (the agent and both ranks) once the ranks train."""
    end = time.monotonic() + 240
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"run ended early ({proc.returncode}): {proc.stderr.read()}")
        kids = psutil.Process(proc.pid).children(recursive=True)
        ranks = [k for k in kids if "TORCHELASTIC_RUN_ID" in _environ(k)]
        if len(ranks) == 2 and metrics.is_file():
            return kids
        time.sleep(0.5)
    raise AssertionError("the ranks did not start in time")


def _environ(p: psutil.Process) -> dict:
    try:
        return p.environ()
    except psutil.Error:
        return {}


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.mark.distributed
@pytest.mark.parametrize(
    ("kind", "sig"),
    [
        pytest.param("train", signal.SIGTERM, id="train-TERM"),
        # the KILL lifeline is the launcher's, shared by train and probe: probe-KILL runs it
        pytest.param("train", signal.SIGKILL, id="train-KILL", marks=pytest.mark.slow),
        pytest.param("train", signal.SIGINT, id="train-INT", marks=pytest.mark.slow),
        pytest.param("probe", signal.SIGTERM, id="probe-TERM", marks=pytest.mark.slow),
        pytest.param("probe", signal.SIGKILL, id="probe-KILL"),
    ],
)
def test_no_process_of_the_run_outlives_its_launcher(kind, sig, tmp_path):
    """The launcher killed by PID: within 10 s no process of the run is left (SIGKILL: the
    agent and the ranks get their parent-death signal; the others are forwarded)."""
    proc, metrics = _start(kind, tmp_path / "out")
    kids: list[psutil.Process] = []
    try:
        kids = _descendants_once_training(proc, metrics)
        assert len(kids) == 3, [k.cmdline() for k in kids]  # the agent and two ranks
        os.kill(proc.pid, sig)
        end = time.monotonic() + 10
        while _alive(kids) and time.monotonic() < end:
            time.sleep(0.2)
        left = _alive(kids)
        assert left == [], [p.cmdline() for p in left]
        _, err = proc.communicate(timeout=30)
    finally:
        for p in _alive(kids):
            p.kill()
        proc.kill()
    if sig == signal.SIGINT:
        assert proc.returncode == exitcodes.INTERRUPTED, err[-2000:]
    elif sig == signal.SIGTERM and kind == "train":
        assert proc.returncode == exitcodes.FAILED, err[-2000:]
        assert "the launch was stopped (SIGTERM)" in err
    assert "Traceback" not in err


@pytest.mark.distributed
def test_a_full_disk_in_a_launch_of_two_ranks_exits_71(tmp_path):
    """``os.fsync`` of the step-4 checkpoint fails with ENOSPC on both ranks (the fault of
    tests/harness/faults.py, in every process): the launch ends with 71, as one process does."""
    out = tmp_path / "run"
    env = {
        **ENV,
        "PYTHONPATH": f"{HARNESS}{os.pathsep}{ROOT}",
        "PALSGD_FAULT_DISK_FULL": "step_00000004",
    }
    cmd = [sys.executable, "-m", "palsgd", "train", "--nproc", "2", "--T", "6"]
    cmd += ["--seq-len", "16", "--batch-size", "2", "--eval-interval", "0", "--no-progress"]
    cmd += ["--checkpoint-interval", "2", "--output-dir", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == exitcodes.OUT_OF_RESOURCES, proc.stderr[-3000:]
    assert "No space left on device" in proc.stderr and "Traceback" not in proc.stderr
    assert "the ranks ran out of resources" in proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "no_space" and summary["last_checkpoint"].endswith("step_00000002")


def test_the_in_process_run_takes_a_ranks_thread_count(tmp_path, monkeypatch):
    """``--nproc 1`` trains with OMP_NUM_THREADS threads, else 1, as torchrun's ranks do;
    the caller's thread count is restored afterwards."""
    before = torch.get_num_threads()
    seen = []
    for omp in (None, "2"):
        if omp is None:
            monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        else:
            monkeypatch.setenv("OMP_NUM_THREADS", omp)
        out = tmp_path / f"run-{omp}"
        args = ["train", "--nproc", "1", "--T", "2", "--seq-len", "16", "--batch-size", "2"]
        args += ["--eval-interval", "0", "--no-progress", "--output-dir", str(out)]
        assert cli_main(args) == 0
        seen.append(json.loads((out / "summary.json").read_text())["hardware"]["torch_threads"])
        assert torch.get_num_threads() == before
    assert seen == [1, 2]
