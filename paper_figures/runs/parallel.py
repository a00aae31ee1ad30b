"""Runs of a plan side by side on GPU sets: one ``torchrun`` launch per run, at most one
run per GPU set at a time (:class:`paper_figures.runs.placement.Placement`).

Each run is launched alone, with ``CUDA_VISIBLE_DEVICES`` naming its GPU set, its plan
file (``figplan.json``) and its launch output (``launch.log``) in its own run directory;
a run that fails (a rank crashed, the launch was killed) is reported with its exit code
and directory, and the other runs go on. A launch costs its start-up (seconds) once per
run, which the hours of a paper-scale run make negligible; the quick scale keeps its one
launch for every run (:mod:`paper_figures.runs.launch`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paper_figures.runs.cache import STATUS_FILE
from paper_figures.runs.placement import Placement

__all__ = ["PLAN_FILE", "LAUNCH_LOG", "Outcome", "launch_run", "run_side_by_side"]

#: a run's plan file and its launch output, in its run directory
PLAN_FILE = "figplan.json"
LAUNCH_LOG = "launch.log"


@dataclass(frozen=True)
class Outcome:
    """How one launch ended: its exit code, GPU set and seconds."""

    name: str
    exit_code: int
    slot: int
    gpus: str
    elapsed_s: float


def launch_run(item: Mapping[str, Any], placement: Placement, slot: int) -> int:
    """Train one plan item (``name``, ``key``, ``config``) with the placement's workers on
    GPU set ``slot``: ``torchrun --standalone`` of ``paper_figures.runs`` with the item's
    plan file; its output in ``launch.log``. Returns the launch's exit code."""
    directory = Path(item["config"]["output_dir"])
    directory.mkdir(parents=True, exist_ok=True)
    (directory / STATUS_FILE).unlink(missing_ok=True)  # a stale record is not this launch's
    plan_file = directory / PLAN_FILE
    plan = {"runs": [dict(item)], "backend": placement.backend, "gpus": placement.env(slot)}
    plan_file.write_text(json.dumps(plan, indent=1, default=str))
    # core.child: quiet on Ctrl-C while torch is imported (the agent and each rank)
    cmd = [sys.executable, "-m", "core.child", "torch.distributed.run", "--standalone"]
    nproc = int(item["config"].get("nproc", placement.workers))  # 1: stacked workers
    cmd += [f"--nproc-per-node={nproc}", "-m", "core.child", "paper_figures.runs"]
    cmd += ["--plan", str(plan_file)]
    env = {**os.environ, **placement.env(slot)}
    env.setdefault("OMP_NUM_THREADS", "1")
    with open(directory / LAUNCH_LOG, "w", encoding="utf-8") as log:
        log.write(f"# {' '.join(cmd)}\n# CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']}\n")
        log.flush()
        proc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    return proc.returncode


def run_side_by_side(
    items: Sequence[Mapping[str, Any]],
    placement: Placement,
    *,
    launch: Callable[[Mapping[str, Any], Placement, int], int] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Outcome]:
    """Train ``items`` in order, each on the first GPU set that is free, at most
    ``placement.parallel`` at a time, with ``launch`` (default :func:`launch_run`);
    returns name -> :class:`Outcome`. A launch that raises counts as failed (exit code 1)
    and does not stop the others."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    launch = launch or launch_run
    pending = list(items)
    lock = threading.Lock()
    outcomes: dict[str, Outcome] = {}
    total = len(pending)

    def next_item() -> tuple[int, Mapping[str, Any]] | None:
        with lock:
            if not pending:
                return None
            return total - len(pending) + 1, pending.pop(0)

    def worker(slot: int) -> None:
        gpus = placement.env(slot)["CUDA_VISIBLE_DEVICES"]
        while (got := next_item()) is not None:
            n, item = got
            directory = item["config"]["output_dir"]
            log(
                f"palsgd figures: [{n}/{total}] {item['name']} started on "
                f"{placement.gpu_label(slot)} (CUDA_VISIBLE_DEVICES={gpus}); output in "
                f"{directory}"
            )
            t0 = time.perf_counter()
            try:
                Path(directory).mkdir(parents=True, exist_ok=True)
                code = launch(item, placement, slot)
            except Exception as exc:  # noqa: BLE001 - reported; the other runs go on
                log(f"palsgd figures: {item['name']}: the launch failed: {exc}")
                code = 1
            elapsed = time.perf_counter() - t0
            with lock:
                outcomes[item["name"]] = Outcome(item["name"], code, slot, gpus, elapsed)
            how = "finished" if code == 0 else f"FAILED (exit code {code})"
            log(
                f"palsgd figures: [{n}/{total}] {item['name']} {how} after {elapsed:.0f} s; "
                f"directory {directory}"
                + ("" if code == 0 else f" (launch output: {Path(directory) / LAUNCH_LOG})")
            )

    threads = [
        threading.Thread(target=worker, args=(slot,), name=f"gpu-set-{slot}", daemon=True)
        for slot in range(min(placement.parallel, max(total, 1)))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes
