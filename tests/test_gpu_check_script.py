"""scripts/gpu-check.sh, the prepared GPU check, run as a dry run on every commit: every
step passes on the CPU (the multi-process CUDA launch with CUDA faked in every process),
and the summary records each step, failed ones included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness.fake_cuda import read_log

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu-check.sh"
STEPS = list(range(1, 10))


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALSGD_FAKE")}
    env.pop("OMP_NUM_THREADS", None)
    return {**env, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}


@pytest.mark.distributed
def test_the_dry_run_passes_every_step(tmp_path):
    out = tmp_path / "gpu-check"
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run", "--out", str(out)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=2400,
    )
    summary_txt = (out / "summary.txt").read_text()
    assert proc.returncode == 0, summary_txt + proc.stdout[-3000:] + proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dry_run"] is True and summary["exit_code"] == 0
    assert [s["step"] for s in summary["steps"]] == STEPS
    assert {s["status"] for s in summary["steps"]} == {"ok"}, summary_txt
    # step 3, the multi-process CUDA launch: each rank bound its own (fake) GPU and gave it
    # to NCCL as device_id; step 4: both gloo ranks on the one GPU
    for log, groups in (
        ("fake-gpu-log-3", {"0": ("nccl", "cuda:0"), "1": ("nccl", "cuda:1")}),
        ("fake-gpu-log-4", {"0": ("gloo", None), "1": ("gloo", None)}),
    ):
        events = read_log(out / log)
        made = {
            e["rank"]: (e["backend"], e["device_id"])
            for e in events
            if e["event"] == "init_process_group" and e["rank"] is not None
        }
        assert made == groups, (log, events)
    for run in ("run-nccl", "run-gloo-2proc", "run-1proc"):
        assert json.loads((out / run / "summary.json").read_text())["status"] == "finished"


def test_a_failing_step_is_summarised_and_the_next_steps_still_run(tmp_path):
    """With a Python that fails at once, every step fails: each is recorded with its exit
    code, and the script exits with the first one."""
    out = tmp_path / "gpu-check"
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run", "--out", str(out)],
        cwd=ROOT,
        env={**_env(), "PYTHON": "false"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert [s["step"] for s in summary["steps"]] == STEPS
    assert {(s["status"], s["exit_code"]) for s in summary["steps"]} == {("FAILED", 1)}
    assert summary["exit_code"] == 1 and "a step failed" in summary["note"]
    assert "FAILED" in (out / "summary.txt").read_text()
