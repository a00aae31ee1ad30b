"""Known findings (theory.verify.findings): the SlowMo finding is recorded with its source,
two reproducing designs and the corrected statement; a run exits 0 when every violation is
a known finding that reproduces, and 1 when a new bound is violated or a known finding no
longer reproduces (``palsgd verify`` and ``bash scripts/main-job.sh`` alike)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import pytest

from palsgd.cli import main
from theory import bounds as registry
from theory.verify import findings as F

ROOT = Path(__file__).resolve().parents[1]
SLOWMO = "slowmo_ar_sgd"
QUICK = ["--quick", "--problems", "quadratic", "--controls", "--no-progress", "--no-plots"]
#: a false user bound (minibatch SGD with the noise term over K^2), for the new violation
FALSE_BOUND = """name: sgd_noise_over_K2
expression: 2*F0/(alpha*T) + L*alpha*sigma**2/K**2
conditions: ["alpha*L <= 1"]
algorithm: sgd
assumptions: [A1, A2, A4]
provenance: a false statement for the test
"""


def test_the_slowmo_finding_is_recorded_with_both_designs():
    f = F.known(SLOWMO)
    assert f is not None and "ICLR 2020" in f.source and "main text" in f.source
    assert len(f.designs) == 2 and "section 7" in f.docs
    corrected = registry.get(f.corrected)
    assert {c.name for c in corrected.conditions} >= {"horizon", "slow_rate"}
    rows = F.reproduce(f)
    assert all(r["reproduced"] and r["inside"] for r in rows)
    assert rows[0]["ratio"] == pytest.approx(1.3455, abs=1e-3)
    assert rows[1]["ratio"] > 1e11  # the inner steps diverge


def test_classify():
    entries = [{"bound": SLOWMO, "reproduced": True}]
    assert F.classify(entries, [SLOWMO])["exit_code"] == 0
    assert F.classify(entries, [SLOWMO, "x"]) == {
        "new_violations": ["x"], "stale": [], "exit_code": 1,
    }  # fmt: skip
    stale = [{"bound": SLOWMO, "reproduced": False}]
    assert F.classify(stale, [])["stale"] == [SLOWMO]


def test_a_run_with_the_known_finding_exits_0_and_explains_it(tmp_path, capsys):
    out = tmp_path / "r"
    argv = ["verify", "--bounds", SLOWMO, "slowmo_ar_sgd_corrected", *QUICK, "--out", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "KNOWN FINDING (reproduced): slowmo_ar_sgd" in text
    assert "ICLR 2020" in text and "docs/verification.md, section 7" in text
    assert text.count("REPRODUCES") == 2 and "the inner steps diverge" in text
    assert "inf (the iterates diverge)" in text and "BOUND VIOLATED" not in text
    assert "result: no bound violated beyond the known finding(s) slowmo_ar_sgd" in text
    rep = json.loads((out / "results.json").read_text())
    assert rep["summary"]["exit_code"] == 0 and rep["summary"]["new_violations"] == []
    assert [r["verdict"] for r in rep["exact"]] == ["violated", "not shown false"]
    assert main(["verify", "--bounds", SLOWMO, "--at", F.known(SLOWMO).designs[0].at]) == 1
    assert "a known finding" in capsys.readouterr().out


def test_a_new_violation_exits_1(tmp_path, capsys):
    path = tmp_path / "false.yaml"
    path.write_text(FALSE_BOUND)
    argv = ["verify", "--bound-file", str(path), *QUICK, "--out", str(tmp_path / "r")]
    assert main(argv) == 1
    text = capsys.readouterr().out
    assert "BOUND VIOLATED (exact): sgd_noise_over_K2" in text
    assert "result: NEW VIOLATION(S): sgd_noise_over_K2 (exit code 1)" in text


def test_a_known_finding_that_no_longer_reproduces_exits_1(tmp_path, monkeypatch, capsys):
    """A recorded design that no longer shows the bound false (here, one with a longer
    horizon where the statement holds) makes the run fail, naming the finding."""
    f = F.known(SLOWMO)
    text = (
        "L=1 lam_F=1 F0=1 H=1 K=1 T=2000 gamma=0.05 mu=0.95 heavy_ball=1 alpha=0.022360679774997918"
    )
    holds = F.Design("heavy ball at T = 2000, inside, where the statement holds (0.72)", text)
    monkeypatch.setattr(F, "KNOWN_FINDINGS", (dataclasses.replace(f, designs=(holds,)),))
    argv = ["verify", "--bounds", SLOWMO, *QUICK, "--out", str(tmp_path / "r")]
    assert main(argv) == 1
    text = capsys.readouterr().out
    assert "KNOWN FINDING (NO LONGER REPRODUCES)" in text and "does NOT reproduce" in text
    assert "known finding(s) NO LONGER REPRODUCE: slowmo_ar_sgd" in text


def _main_job(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "VENV": os.environ.get("VIRTUAL_ENV", str(ROOT / ".venv"))}
    argv = ["bash", str(ROOT / "scripts" / "main-job.sh"), *args, *QUICK]
    return subprocess.run(
        [*argv, "--out", str(tmp_path / "r")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


@pytest.mark.slow
def test_main_job_exits_0_with_the_known_finding_and_1_with_a_new_violation(tmp_path):
    ok = _main_job(tmp_path, "--bounds", SLOWMO)
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    assert "KNOWN FINDING (reproduced): slowmo_ar_sgd" in ok.stdout
    path = tmp_path / "false.yaml"
    path.write_text(FALSE_BOUND)
    bad = _main_job(tmp_path, "--bounds", SLOWMO, "sgd_noise_over_K2", "--bound-file", str(path))
    assert bad.returncode == 1, bad.stdout[-2000:] + bad.stderr[-2000:]
    assert "NEW VIOLATION(S): sgd_noise_over_K2" in bad.stdout
