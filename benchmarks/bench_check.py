"""Latency of ``palsgd check``, ``palsgd bounds`` and ``palsgd --help``, whole processes.

Each command runs as a fresh ``python -m palsgd ...`` process (what a user waits for),
interleaved with ``python -c pass`` (the interpreter's own start-up) in the same run, so
the ratios hold on a loaded machine. ``check`` is timed cold (empty cache directory: the
symbolic work is done and written) and warm (second and later runs read the cache); the
cache lives in a temporary directory (``PALSGD_CACHE_DIR``), the user's cache is not
touched. Medians over ``--repeat`` runs of the wall time (best and the median CPU time,
user + system, in brackets: the CPU time moves less with the load of a shared machine).

Two Python settings are timed: ``bytecode cache`` (Python's default: compiled modules are
kept, here under a temporary ``PYTHONPYCACHEPREFIX``, as for an installed package) and
``no bytecode cache`` (``PYTHONDONTWRITEBYTECODE=1``: every project module is compiled from
source at every start, as in a read-only checkout). The targets are for the default.

Targets (issue 13): warm ``check`` <= 0.3 s, ``bounds`` <= 0.2 s.

Run: ``python benchmarks/bench_check.py [--repeat 7] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from core.options import declare, option

CHECK = ["check", "--L", "1", "--sigma", "1", "--F0", "1", "--K", "4", "--H", "32",
         "--T", "100000", "--lr", "0.01", "--p", "0.2", "--eta", "1", "--zeta", "1"]  # fmt: skip
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "palsgd --help": ["-m", "palsgd", "--help"],
    "palsgd bounds": ["-m", "palsgd", "bounds"],
    "palsgd check (warm)": ["-m", "palsgd", *CHECK],
    "palsgd check --eps (warm)": ["-m", "palsgd", *CHECK, "--eps", "0.05"],
}
TARGETS = {"palsgd check (warm)": 0.3, "palsgd bounds": 0.2}


def _time(args: list[str], env: dict[str, str], cpu: list[float] | None = None) -> float:
    """Wall time of one process; its CPU time (user + system) appended to ``cpu``."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, *args], env=env, capture_output=True, timeout=600)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(f"{args} failed ({out.returncode}): {out.stderr.decode()[-2000:]}")
    if cpu is not None:
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return dt


#: the command's options (:func:`core.options.declare`)
OPTIONS = (
    option("--repeat", type=int, default=7, help="runs per command (default 7)"),
    option("--json", help="write the timings as JSON to this file"),
)


def main() -> int:
    """Time the commands and print them beside ``python -c pass``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    declare(ap, OPTIONS)
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    settings = ("bytecode cache", "no bytecode cache")
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as pyc:
        base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        base_env.update({"PALSGD_CACHE_DIR": cache, "PYTHONPATH": root})
        envs = {
            settings[0]: {**base_env, "PYTHONPYCACHEPREFIX": pyc},
            settings[1]: {**base_env, "PYTHONDONTWRITEBYTECODE": "1"},
        }
        cold = _time(["-m", "palsgd", *CHECK], envs[settings[1]])  # empty cache
        _time(["-m", "palsgd", *CHECK], envs[settings[0]])  # writes the bytecode
        times = {(s, k): [] for s in settings for k in COMMANDS}
        cpus = {(s, k): [] for s in settings for k in COMMANDS}
        for _ in range(args.repeat):  # interleaved: every command sees the same load
            for s in settings:
                for name, cmd in COMMANDS.items():
                    times[(s, name)].append(_time(cmd, envs[s], cpus[(s, name)]))
    res: dict = {"cold_check_s": cold, "settings": {}}
    print(f"palsgd check, cold cache (symbolic work done and written): {cold:.3f} s")
    for s in settings:
        base = statistics.median(times[(s, "python -c pass")])
        print(f"{s}: medians of {args.repeat} runs")
        rows = res["settings"][s] = {}
        for name in COMMANDS:
            ts = times[(s, name)]
            med, cpu = statistics.median(ts), statistics.median(cpus[(s, name)])
            row = {"median_s": med, "best_s": min(ts), "over_python_s": med - base,
                   "cpu_median_s": cpu}  # fmt: skip
            target = TARGETS.get(name) if s == settings[0] else None
            verdict = ""
            if target is not None:
                row["target_s"] = target
                row["meets_target"] = med <= target
                verdict = f"  target <= {target} s: {'met' if med <= target else 'NOT met'}"
            rows[name] = row
            print(f"  {name:<26} {med:6.3f} s (best {min(ts):.3f}, CPU {cpu:.3f}; "
                  f"+{med - base:.3f} s over python -c pass){verdict}")  # fmt: skip
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
