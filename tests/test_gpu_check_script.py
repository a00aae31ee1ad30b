"""scripts/gpu-check.sh, the prepared GPU check, as a dry run on the CPU: on every commit
the multi-process CUDA launch steps (3 and 5, CUDA faked in every process) pass and the
others are recorded as skipped; the whole dry run (every step, about 6 minutes on two
cores) is marked slow; the summary records each step, failed ones included."""

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


def _dry_run(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), "--dry-run", "--out", str(out), *args],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=2400,
    )


def _fake_gpu_groups(out: Path, logs: tuple[str, ...]) -> None:
    """Each rank of the launch bound its own (fake) GPU and gave it to NCCL as device_id
    (step 3); both gloo ranks on the one GPU (step 4); one NCCL process (step 5)."""
    expected = {
        "fake-gpu-log-3": {"0": ("nccl", "cuda:0"), "1": ("nccl", "cuda:1")},
        "fake-gpu-log-4": {"0": ("gloo", None), "1": ("gloo", None)},
        "fake-gpu-log-5": {"0": ("nccl", "cuda:0")},
    }
    for log in logs:
        events = read_log(out / log)
        made = {
            e["rank"] or "0": (e["backend"], e["device_id"])  # one process: no RANK
            for e in events
            if e["event"] == "init_process_group"
        }
        assert made == expected[log], (log, events)


@pytest.mark.distributed
def test_the_launch_steps_pass_and_the_others_are_skipped(tmp_path):
    out = tmp_path / "gpu-check"
    proc = _dry_run(out, "--only", "3,5")
    summary_txt = (out / "summary.txt").read_text()
    assert proc.returncode == 0, summary_txt + proc.stdout[-3000:] + proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    status = {s["step"]: s["status"] for s in summary["steps"]}
    assert status == {n: "ok" if n in (3, 5) else "skipped" for n in STEPS}, summary_txt
    _fake_gpu_groups(out, ("fake-gpu-log-3", "fake-gpu-log-5"))
    for run in ("run-nccl", "run-1proc"):
        assert json.loads((out / run / "summary.json").read_text())["status"] == "finished"


@pytest.mark.parametrize("only", ["0", "3,", "a", "10", ""])
def test_a_bad_step_list_is_refused(tmp_path, only):
    proc = _dry_run(tmp_path / "o", "--only", only)
    assert proc.returncode == 2 and "--only takes step numbers" in proc.stderr


@pytest.mark.slow
@pytest.mark.distributed
def test_the_dry_run_passes_every_step(tmp_path):
    out = tmp_path / "gpu-check"
    proc = _dry_run(out)
    summary_txt = (out / "summary.txt").read_text()
    assert proc.returncode == 0, summary_txt + proc.stdout[-3000:] + proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dry_run"] is True and summary["exit_code"] == 0
    assert [s["step"] for s in summary["steps"]] == STEPS
    assert {s["status"] for s in summary["steps"]} == {"ok"}, summary_txt
    _fake_gpu_groups(out, ("fake-gpu-log-3", "fake-gpu-log-4", "fake-gpu-log-5"))
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
