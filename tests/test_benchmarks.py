"""Every benchmark command the README shows runs: ``--help`` in the default run, a short
variant of each under ``-m slow`` (the full runs take minutes; their ratios are printed,
not asserted: speed targets live in the benchmarks)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: README benchmark script -> the flags of its short variant
SHORT = {
    "bench_bounds.py": ["--n", "2000", "--n-subs", "20", "--no-progress"],
    "bench_simulate.py": ["--quick"],
    "bench_oracle.py": ["--repeat", "1"],
    "bench_check.py": ["--repeat", "1"],
    "bench_algorithms.py": [
        "--width", "32", "--depth", "2", "--batch", "8", "--blocks", "1",
        "--warmup-blocks", "1", "--pull-steps", "24", "--comm-reps", "1",
        "--consensus-params", "1000",
    ],
    "bench_costmodel.py": ["--steps-scale", "0.125", "--repeats", "1"],
    "bench_overlap.py": [
        "--algorithms", "local_sgd", "--taus", "2", "--rounds", "2", "--batch", "32",
        "--repeats", "1", "--windows", "0", "1", "--mechanism-repeats", "1",
    ],
    "bench_sharded.py": ["--model", "gptneo-tiny", "--shards", "1", "2", "--H", "2"],
    "bench_compare.py": ["--small", "--sample", "2"],
    "bench_worstcase.py": ["--repeat", "1", "--no-verify"],
    "bench_map_tuning_gap.py": [
        "--problems", "1", "--H", "16", "--eta", "1", "--p", "0.2", "--eps-frac", "0.02",
        "--budget", "rounds:2e4", "--alpha-decades", "3", "--per-decade", "4",
        "--per-octave", "1", "--out", "reports/bench-gap-short",
    ],
    "bench_workers_one_device.py": ["--dry-run"],
    "bench_suite.py": [
        "--workers", "1", "--slowest", "3", "--tests", "tests/test_cli_core.py",
        "--out", "reports/bench-suite-short",
    ],
}  # fmt: skip


def _readme_scripts() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Benchmarks", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^python benchmarks/(\S+\.py)", section, re.M)


def _run(script: str, flags: list[str], timeout: int) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *flags],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT,
    )  # fmt: skip


def test_every_readme_benchmark_has_a_short_variant():
    scripts = _readme_scripts()
    assert scripts and set(scripts) == set(SHORT)


@pytest.mark.parametrize("script", sorted(SHORT))
def test_benchmark_help_runs(script):
    out = _run(script, ["--help"], 120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "usage" in out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SHORT))
def test_benchmark_short_variant_runs(script):
    out = _run(script, SHORT[script], 900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
