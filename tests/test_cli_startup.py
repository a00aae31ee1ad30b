"""Start-up of the ``palsgd`` command: every ``--help`` and every bad flag answered before
torch or sympy is imported, ``--version``, and Ctrl-C from the first instant ending with one
line and exit code 130, never a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from core import exitcodes
from palsgd.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[1]

#: what the parsers must not import (about a second of start-up each)
HEAVY = ("torch", "sympy")

_PROBE = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from palsgd.cli import SUBCOMMANDS, build_parser, main

    report = {}
    for cmd in SUBCOMMANDS:
        parser = build_parser(cmd)
        text = parser.format_help()
        for action in parser._actions:  # sub-commands (palsgd cost ACTION)
            if isinstance(action.choices, dict):
                text += "".join(sub.format_help() for sub in action.choices.values())
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            helped = main([cmd, "--help"])
            bad = main([cmd, "--no-such-flag"])
        report[cmd] = {
            "help": len(text), "helped": helped, "help_out": len(out.getvalue()),
            "bad": bad, "bad_err": err.getvalue(),
            "heavy": sorted(m for m in sys.argv[1:] if m in sys.modules),
        }
    print(json.dumps(report))
    """
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def test_help_and_bad_flags_import_neither_torch_nor_sympy():
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *HEAVY],
        capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(report) == set(SUBCOMMANDS)
    for cmd, r in report.items():
        assert r["help"] > 200 and r["helped"] == 0 and r["help_out"] > 200, (cmd, r)
        assert r["bad"] == exitcodes.BAD_INPUT, (cmd, r)
        # one line (a required flag may be named first: worst-case --algorithm)
        assert r["bad_err"].count("\n") == 1, (cmd, r)
        assert r["bad_err"].startswith(f"palsgd {cmd}: error: "), (cmd, r)
        assert r["heavy"] == [], f"palsgd {cmd}: its parser imported {r['heavy']}"


def test_version():
    from importlib.metadata import version

    proc = subprocess.run(
        [sys.executable, "-m", "palsgd", "--version"],
        capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout == f"palsgd {version('palsgd-toolkit')}\n"


def _interpreter_start() -> float:
    """Seconds a bare interpreter of this environment takes to start and end now (site and
    its ``.pth`` files included): before that no line of the toolkit has run, and a SIGINT
    there is the interpreter's own ``KeyboardInterrupt``; it grows with the machine's load."""
    times = []
    for _ in range(3):
        t = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=60)
        times.append(time.monotonic() - t)
    return sorted(times)[1]


def _interrupt(args: list[str], delay: float, tmp_path: Path) -> tuple[int, str, float]:
    """Start ``python -m palsgd ARGS`` in its own session, send SIGINT to its process group
    (as a terminal's Ctrl-C does) ``delay`` s after the interpreter's own start-up (measured
    beside it: :func:`_interpreter_start`); the exit code, stderr and how long it took to end
    after the signal."""
    delay += _interpreter_start()
    proc = subprocess.Popen(
        [sys.executable, "-m", "palsgd", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env=_env(), start_new_session=True,
    )  # fmt: skip
    try:
        time.sleep(delay)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        return proc.returncode, err, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("delay", [0.1, 0.3, 0.6])
def test_ctrl_c_during_start_up_of_train_is_130_and_one_line(tmp_path, delay):
    args = ["train", "--nproc", "1", "--T", "100000", "--no-progress", "--output-dir", "run"]
    code, err, _ = _interrupt(args, delay, tmp_path)
    assert code == exitcodes.INTERRUPTED, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == "palsgd train: interrupted", err[-3000:]


@pytest.mark.parametrize(
    ("cmd", "delay"), [("verify", 0.2), ("map", 0.8), ("probe", 0.8), ("figures", 0.5)]
)
def test_ctrl_c_during_start_up_of_every_command_is_130(tmp_path, cmd, delay):
    """Parser, imports (in the parser's span or the command's), or the first work."""
    code, err, _ = _interrupt([cmd, "--out", "out"], delay, tmp_path)
    assert code == exitcodes.INTERRUPTED, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == f"palsgd {cmd}: interrupted", err[-3000:]


def test_importing_the_package_leaves_sigint_alone():
    """Only the ``palsgd`` process takes over SIGINT at start-up, not a program that imports
    the package (pytest here): Ctrl-C still raises KeyboardInterrupt."""
    import palsgd.cli  # noqa: F401

    assert signal.getsignal(signal.SIGINT) is not __import__("palsgd.startup").startup._interrupted
