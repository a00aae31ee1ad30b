"""The default test suite's wall time and its 25 slowest tests.

Runs ``python -m pytest -q -m "not slow" -n WORKERS --durations=N`` (the README's test
command; ``--tests`` narrows it) in a child process, reads pytest's duration table and
writes ``suite.json`` and ``slowest.csv`` into ``--out``: the wall time, pytest's own
total, the count of passed/failed tests, and the slowest setup/call/teardown phases with
their seconds. The target (at most 5 minutes on two idle cores) is a figure this prints,
never an assertion: a loaded machine moves it by tens of percent.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.io import atomic_write_json, write_csv  # noqa: E402
from core.options import declare, option  # noqa: E402

#: the suite's target on two idle cores, seconds (printed beside the measurement)
TARGET_S = 300.0
_ROW = re.compile(r"^\s*([\d.]+)s (setup|call|teardown)\s+(\S+)")
_TOTAL = re.compile(r"(\d+) passed.* in ([\d.]+)s")
_FAILED = re.compile(r"(\d+) failed")


@dataclass(frozen=True)
class Phase:
    """One phase of one test from pytest's duration table (seconds of wall time)."""

    seconds: float
    phase: str
    test: str


def parse_durations(text: str) -> list[Phase]:
    """The rows of pytest's ``--durations`` table in ``text``, slowest first."""
    rows = [Phase(float(m[1]), m[2], m[3]) for m in map(_ROW.match, text.splitlines()) if m]
    return sorted(rows, key=lambda r: -r.seconds)


#: the command's options (:func:`core.options.declare`)
OPTIONS = (
    option("--workers", type=int, default=2, help="pytest-xdist workers (default 2)"),
    option("--slowest", type=int, default=25, help="rows reported (default 25)"),
    option("--tests", nargs="*", default=[], help="test paths (default: the suite)"),
    option("--out", default="reports/bench-suite", help="output directory"),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    declare(p, OPTIONS)
    args = p.parse_args(argv)
    if args.workers < 1 or args.slowest < 1:
        p.error("--workers and --slowest take positive integers")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider"]
    cmd += ["-n", str(args.workers), f"--durations={args.slowest}", *args.tests]
    print("running:", " ".join(cmd[1:]), flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    total = _TOTAL.search(proc.stdout)
    failed = _FAILED.search(proc.stdout)
    rows = parse_durations(proc.stdout)[: args.slowest]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "command": cmd[1:],
        "exit_code": proc.returncode,
        "wall_s": round(wall, 1),
        "pytest_s": float(total[2]) if total else None,
        "passed": int(total[1]) if total else None,
        "failed": int(failed[1]) if failed else 0,
        "target_s": TARGET_S,
        "slowest": [asdict(r) for r in rows],
    }
    atomic_write_json(out / "suite.json", summary)
    write_csv(out / "slowest.csv", [asdict(r) for r in rows])
    print(f"{'seconds':>8}  {'phase':<8}  test")
    for r in rows:
        print(f"{r.seconds:8.2f}  {r.phase:<8}  {r.test}")
    print(
        f"pytest {summary['pytest_s']} s ({summary['passed']} passed, {summary['failed']} "
        f"failed), wall {wall:.1f} s; target {TARGET_S:.0f} s on two idle cores; "
        f"written to {out}"
    )
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
