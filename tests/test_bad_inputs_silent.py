"""Cases that used to be silent or to end in a traceback (issue 21): each is now refused
(exit 2, one line naming the flag) or warned in one line, and the warm-cache fast path of
``palsgd bounds`` maps a bad name to exit 2 like the cold path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from palsgd.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _palsgd(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "palsgd", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def test_bounds_with_a_warm_cache_refuses_a_bad_name_cleanly(tmp_path):
    """``palsgd bounds`` with the registry snapshot on disk imports neither sympy nor
    theory.validation: the guard must still know UserInputError (it once did not: exit 70)."""
    env = dict(os.environ, PALSGD_CACHE_DIR=str(tmp_path / "cache"))
    assert _palsgd(["bounds", "sgd"], env).returncode == 0  # writes the snapshot
    for name in ("nosuch", "--latex nosuch"):
        proc = _palsgd(["bounds", *name.split()], env)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr and "'nosuch'" in proc.stderr
    proc = _palsgd(["bounds", "local_sgd_quadratic_lower"], env)  # a name the README gives
    assert proc.returncode == 0 and "kind: lower bound" in proc.stdout, proc.stderr


@pytest.mark.parametrize(
    "args, note",
    [
        ("--T 4", "H = 8 > T - T0 = 4: no sync happens"),
        ("--T 8 --T0 8", "T0 = 8 >= T = 8: the whole run is DDP warm-up"),
        ("--data-path .", "--data-path is not read"),
        ("--momentum 0.5", "--momentum is not read"),
        ("--optimizer sgd --beta1 0.8", "--beta1 is not read"),
    ],
)
def test_train_says_what_it_will_not_use(args, note, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--nproc", "1", *args.split(), "--print-config"]) == 0
    err = capsys.readouterr().err
    assert note in err and err.count("\n") <= 2  # one line each


def test_train_is_quiet_when_every_option_is_used(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["train", "--nproc", "1", "--optimizer", "sgd_momentum", "--momentum", "0.5"]
    assert main([*argv, "--print-config"]) == 0
    assert "note:" not in capsys.readouterr().err


def test_figures_data_at_quick_scale_is_noted(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["figures", "--data", f"tinystories={tmp_path}", "--only", "paper_scale"]
    assert main([*argv, "--dry-run"]) == 0
    assert "--data is not read at quick scale" in capsys.readouterr().err


def test_verify_configs_0_is_warned(capsys):
    argv = ["verify", "--bounds", "sgd", "--configs", "0", "--at", "L=1 T=6 alpha=1"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "--configs 0: no Monte-Carlo configuration" in err


def test_check_overflowing_bound_is_noted(capsys):
    assert main("check --F0 1e308 --T 1 --L 1 --sigma 1 --K 2".split()) == 0
    out = capsys.readouterr().out
    assert "not finite at these values" in out and "nan%" not in out


def test_check_huge_L_inside_the_step_condition_is_clean(capsys):
    argv = "check --L 1e160 --lr 1e-170 --sigma 1 --zeta 0.5 --F0 1 --K 4 --H 8 --T 1000"
    assert main(argv.split()) == 0
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err and cap.out.startswith("verdict:")
