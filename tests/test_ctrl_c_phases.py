"""Ctrl-C in every phase of ``palsgd train`` (``--nproc 1`` and ``--nproc 2``): SIGINT to
the process group, as a terminal sends it, while the token file is scanned, while the ranks
start, during a step, a checkpoint and an evaluation. Each ends with exit code 130, one
line (``palsgd train: interrupted``), no traceback and no process of the run left.

The signal lands in its phase without relying on timing: the fault ``PALSGD_FAULT_PAUSE``
of ``tests/harness/faults.py`` holds every process of the run that reaches the phase (it
writes a marker file and sleeps there) until the signal arrives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from core import exitcodes

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "tests" / "harness"
#: the processes of each phase that pause there (the launcher scans; each rank does the rest)
_PAUSED = {"scan": lambda nproc: 1}
#: cheap enough for the default suite (about 4 s for one process, 10 s for two); the rest slow
FAST = {(1, "scan"), (1, "checkpoint"), (2, "step")}
PHASES = ("scan", "launch", "step", "checkpoint", "eval")


def _session(sid: int) -> list[psutil.Process]:
    """The live processes of session ``sid`` (the run's process group and its children)."""
    found = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (OSError, psutil.Error):
            continue
    return found


def _wait_for(markers: Path, count: int, proc: subprocess.Popen, timeout: float = 240) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if len(list(markers.iterdir())) >= count:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the run ended ({proc.returncode}): {proc.stderr.read()}")
        time.sleep(0.1)
    raise AssertionError("the run did not reach its phase in time")


def _run_interrupted(tmp_path: Path, nproc: int, phase: str) -> tuple[int, str, list[str]]:
    """A run of ``nproc`` ranks held in ``phase``, sent SIGINT to its process group; its
    exit code, stderr and the command lines of its processes still alive 10 s later."""
    data = tmp_path / "c.bin"
    np.random.default_rng(0).integers(0, 257, 4000).astype("uint16").tofile(data)
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": f"{HARNESS}{os.pathsep}{ROOT}",
        "OMP_NUM_THREADS": "1",
        "PALSGD_FAULT_PAUSE": f"{phase}:{markers}",
    }
    cmd = [sys.executable, "-m", "palsgd", "train", "--nproc", str(nproc), "--T", "50"]
    cmd += ["--dataset", "tokens", "--data-path", str(data), "--seq-len", "16"]
    cmd += ["--batch-size", "2", "--eval-interval", "4" if phase == "eval" else "0"]
    cmd += ["--checkpoint-interval", "4", "--no-progress", "--output-dir", str(tmp_path / "run")]
    proc = subprocess.Popen(
        cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for(markers, _PAUSED.get(phase, lambda n: n)(nproc), proc)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        end = time.monotonic() + 10
        while _session(proc.pid) and time.monotonic() < end:
            time.sleep(0.2)
        left = [" ".join(p.cmdline()) for p in _session(proc.pid)]
    finally:
        for p in _session(proc.pid):
            p.kill()
        proc.kill()
        proc.wait()
    return proc.returncode, err, left


def _cases():
    for nproc in (1, 2):
        for phase in PHASES:
            marks = [] if (nproc, phase) in FAST else [pytest.mark.slow]
            if nproc > 1:
                marks.append(pytest.mark.distributed)
            yield pytest.param(nproc, phase, marks=marks, id=f"nproc{nproc}-{phase}")


@pytest.mark.parametrize("nproc,phase", list(_cases()))
def test_ctrl_c_in_each_phase_is_130_one_line_nothing_left(tmp_path, nproc, phase):
    code, err, left = _run_interrupted(tmp_path, nproc, phase)
    assert code == exitcodes.INTERRUPTED, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.strip() and "note:" not in ln]
    assert lines == ["palsgd train: interrupted"], err[-3000:]
    assert left == []
