"""``python -m core.child MODULE``: a launched child (torchrun's agent, a rank) ends with 130
and prints nothing when the terminal's Ctrl-C reaches it, whether it is still importing
torch or already running its module."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core import exitcodes

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("delay", [0.25, 0.6, 3.0])
def test_a_child_interrupted_at_any_point_ends_130_without_a_traceback(tmp_path, delay):
    (tmp_path / "sleeper.py").write_text(
        "import time\nprint('running', flush=True)\ntime.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "core.child", "sleeper"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    try:
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == exitcodes.INTERRUPTED, err[-2000:]
    assert err == "", err[-2000:]
    assert out in ("", "running\n")


def test_the_module_runs_as_main_with_its_arguments(tmp_path):
    (tmp_path / "echo_args.py").write_text(
        "import sys\nassert __name__ == '__main__'\nprint(sys.argv[1:])\nsys.exit(7)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    proc = subprocess.run(
        [sys.executable, "-m", "core.child", "echo_args", "--a", "1"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 7, proc.stderr
    assert proc.stdout.strip() == "['--a', '1']"
