"""Count the outcomes of the bad-input battery: ``python tests/battery.py``.

Runs every case of the bad-input suite (``tests/test_bad_inputs_cli.py``,
``test_bad_inputs_api.py``, ``test_bad_inputs_files.py``, ``test_bad_inputs_silent.py``)
once, in this process, and sorts each outcome into

* ``clean``: the documented exit code (2, or 0 with the expected one-line note), the flag,
  argument or value named, no traceback;
* ``imprecise``: refused cleanly, but the message does not name what the case expects;
* ``traceback``: a traceback, exit code 70, or an exception other than ``UserInputError``;
* ``silent``: exit 0 (or no exception) without the expected refusal or note;
* ``hang``: no answer within ``--timeout`` seconds (an alarm ends it).

Prints the counts and each case that is not clean; exit code 1 if any is not. The tests
assert each case; this script is the tally for a report. As in the tests, a write that
would replace anything but a regular file under the scratch directory fails the case
instead of happening.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import stat
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import test_bad_inputs_api as api  # noqa: E402
import test_bad_inputs_cli as cli  # noqa: E402
import test_bad_inputs_files as files  # noqa: E402

import core.io  # noqa: E402
from core.errors import UserInputError  # noqa: E402
from core.options import declare, option  # noqa: E402
from palsgd.cli import main  # noqa: E402

#: (argv, note on stderr or stdout) of the cases that must run (exit 0) and say one line
NOTES: list[tuple[str, str]] = [
    ("train --nproc 1 --T 4 --print-config", "no sync happens"),
    ("train --nproc 1 --T 8 --T0 8 --print-config", "whole run is DDP warm-up"),
    ("train --nproc 1 --data-path . --print-config", "--data-path is not read"),
    ("train --nproc 1 --momentum 0.5 --print-config", "--momentum is not read"),
    ("figures --data tinystories=. --only paper_scale --dry-run", "--data is not read"),
    ("verify --bounds sgd --configs 0 --at L=1,T=6,alpha=1", "--configs 0"),
    ("check --F0 1e308 --T 1 --L 1 --sigma 1 --K 2", "not finite at these values"),
    ("check --L 1e160 --lr 1e-170 --sigma 1 --zeta 0.5 --F0 1 --K 4 --H 8 --T 1000", "verdict"),
]


class Hung(Exception):
    pass


@contextlib.contextmanager
def alarm(seconds: int):
    def ring(signum, frame):
        raise Hung

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def writes_only_under(root: Path):
    """``os.replace`` and the atomic writer's temp files refuse anything but a regular file
    (or a new one) under ``root``: a regression fails a case instead of replacing a device."""
    real_replace, real_temp = os.replace, core.io._new_temp_file

    def replace(src, dst, *a, **k):
        dst = Path(dst)
        if not dst.resolve().is_relative_to(root) or (
            dst.exists() and not stat.S_ISREG(os.stat(dst).st_mode)
        ):
            raise AssertionError(f"a write would replace {dst}")
        return real_replace(src, dst, *a, **k)

    def temp(target):
        if not Path(target).resolve().is_relative_to(root):
            raise AssertionError(f"a temp file next to {target}")
        return real_temp(target)

    os.replace, core.io._new_temp_file = replace, temp
    try:
        yield
    finally:
        os.replace, core.io._new_temp_file = real_replace, real_temp


def run_cli(argv: str, needle: str, timeout: int, expect: int = 2) -> str:
    out, err = io.StringIO(), io.StringIO()
    try:
        with alarm(timeout), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv.split())
    except Hung:
        return "hang"
    except BaseException:  # noqa: BLE001 - anything escaping main is a traceback
        return "traceback"
    text = out.getvalue() + err.getvalue()
    if "Traceback" in text or code == 70:
        return "traceback"
    if code != expect or (expect == 0 and needle not in text):
        return "silent" if code == 0 else "imprecise"
    return "clean" if needle in text else "imprecise"


def run_api(fn: Callable[[], object], needle: str, timeout: int) -> str:
    try:
        with alarm(timeout):
            fn()
    except Hung:
        return "hang"
    except UserInputError as exc:
        return "clean" if needle in str(exc) else "imprecise"
    except BaseException:  # noqa: BLE001
        return "traceback"
    return "silent"


def battery(timeout: int) -> list[tuple[str, str, str]]:
    """``(suite, case, outcome)`` for every case."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        os.chdir(root)
        paths = cli.make_files(root)
        with writes_only_under(root):
            for argv, needle in cli.CASES:
                argv, needle = argv.format(**paths), needle.format(**paths)
                rows.append(("cli", argv, run_cli(argv, needle, timeout)))
            for i, (fn, needle) in enumerate(api._api_cases(root)):
                rows.append(("api", f"case {i}: {needle}", run_api(fn, needle, timeout)))
            kinds = root / "kinds"
            kinds.mkdir()
            os.chdir(kinds)
            sock = files.make_kinds(kinds)
            try:
                for name in files.REFUSED_OUTPUTS:
                    argv = f"cost predict --setting resnet50-imagenet --output {name}"
                    rows.append(("files", argv, run_cli(argv, "--output", timeout)))
                for flags in files.INPUT_FLAGS:
                    for name in files.BAD_INPUTS:
                        argv = flags.format(name)
                        rows.append(("files", argv, run_cli(argv, name, timeout)))
            finally:
                sock.close()
            os.chdir(root)
            for argv, note in NOTES:
                rows.append(("notes", argv, run_cli(argv, note, timeout, expect=0)))
    return rows


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    declare(parser, (option("--timeout", type=int, default=60, help="seconds per case (60)"),))
    args = parser.parse_args(argv)
    rows = battery(args.timeout)
    counts = Counter(outcome for _, _, outcome in rows)
    for suite, case, outcome in rows:
        if outcome != "clean":
            print(f"{outcome:>9}  [{suite}] {case}")
    order = ("clean", "imprecise", "traceback", "silent", "hang")
    print(f"{len(rows)} cases: " + ", ".join(f"{k} {counts.get(k, 0)}" for k in order))
    by_suite = Counter(suite for suite, _, _ in rows)
    print("by suite: " + ", ".join(f"{k} {v}" for k, v in by_suite.items()))
    return 0 if counts.get("clean", 0) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main_())
