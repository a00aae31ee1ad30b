"""Training the missing runs of a plan: one ``torchrun`` launch (or this process) for all,
or, on GPUs (:class:`~paper_figures.runs.placement.Placement`), one launch per run with
runs side by side on GPU sets (:mod:`paper_figures.runs.parallel`)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from core.errors import UserInputError
from core.io import atomic_write_json
from core.options import declare, option
from empirical.config import config_from_dict
from paper_figures.runs.cache import STATUS_FILE, cached, resolve_spec, run_directory, run_key
from paper_figures.runs.device import current_device_kind
from paper_figures.runs.estimate import estimate_run
from paper_figures.runs.parallel import LAUNCH_LOG, run_side_by_side
from paper_figures.runs.placement import Placement
from paper_figures.runs.specs import Plan, RunSpec

__all__ = ["RunResult", "execute"]


@dataclass
class RunResult:
    """Where a planned run lives and how it was obtained."""

    spec: RunSpec
    key: str
    directory: Path
    status: str  # finished | diverged | failed | missing
    cached: bool
    elapsed_s: float | None = None
    message: str = ""


def _status_record(key: str, code: int, elapsed: float, message: str = "") -> dict[str, Any]:
    status = {0: "finished", 3: "diverged"}.get(code, "failed")
    return {
        "key": key,
        "status": status,
        "exit_code": code,
        "elapsed_s": elapsed,
        "message": message,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def _train(cfg: Any) -> int:
    """:func:`empirical.train.train`; imported here, when a run is trained, for the start-up
    cost of torch."""
    from empirical.train import train

    return train(cfg)


def _train_one(item: Mapping[str, Any], rank: int) -> int:
    """Train one planned run in the current process group; rank 0 writes figrun.json."""
    started = time.perf_counter()
    out = Path(item["config"]["output_dir"])
    try:
        code = _train(config_from_dict(item["config"]))
        message = ""
    except UserInputError as exc:  # raised on every rank before any collective
        code, message = 2, str(exc)
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(
            out / STATUS_FILE,
            _status_record(item["key"], code, time.perf_counter() - started, message),
        )
    return code


def _worker(plan_file: str) -> int:
    """Entry of every rank under torchrun: train the plan's runs in one process group.

    :mod:`empirical.distributed` (torch) is imported here, in the ranks only."""
    from empirical.distributed import cleanup, init_distributed

    plan = json.loads(Path(plan_file).read_text())
    items = plan["runs"]
    on_cpu = all(it["config"].get("device") == "cpu" for it in items)
    device = "cuda" if current_device_kind() == "cuda" and not on_cpu else "cpu"
    # gloo when the plan's ranks share GPUs (placement), else NCCL on CUDA, gloo on the CPU
    ctx = init_distributed(plan.get("backend") if device == "cuda" else None, device=device)
    failures = 0
    try:
        bar = tqdm(
            items,
            desc="figure runs",
            unit="run",
            disable=ctx.rank != 0 or len(items) == 1,
            dynamic_ncols=True,
        )
        for item in bar:
            bar.set_postfix_str(item["name"])
            if _train_one(item, ctx.rank) not in (0, 3):
                failures += 1
    finally:
        cleanup(ctx)
    return 1 if failures else 0


def _launch(plan_file: Path, nproc: int, log: Callable[[str], None]) -> int:
    cmd = [
        sys.executable,
        "-m",
        "core.child",  # quiet on Ctrl-C while it imports torch (core/child.py)
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        "-m",
        "core.child",
        "paper_figures.runs",
        "--plan",
        str(plan_file),
    ]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    log(
        f"palsgd figures: training {len(json.loads(plan_file.read_text())['runs'])} run(s) "
        f"on {nproc} processes: {' '.join(cmd[1:])}"
    )
    return subprocess.run(cmd, env=env, check=False).returncode


def _locate(
    plan: Plan, runs_dir: Path, progress: bool, placement: Placement | None = None
) -> tuple[dict[str, RunResult], list[dict[str, Any]]]:
    """Each run's result (cached, or missing) and the plan items of the missing ones;
    ``placement``: the runs' GPUs (their backend, and their processes: :meth:`Placement.layout`)."""
    results: dict[str, RunResult] = {}
    todo: list[dict[str, Any]] = []
    dev = current_device_kind()
    backend = placement.config_backend if placement is not None else None
    for spec in plan.runs:
        cfg = resolve_spec(spec, backend)
        nproc, cfg["workers_per_process"] = (
            (plan.nproc, 1) if placement is None else placement.layout(cfg)
        )
        key = run_key(cfg, plan.nproc, dev)
        directory = run_directory(runs_dir, spec, key)
        rec = cached(directory, key)
        if rec is not None:
            results[spec.name] = RunResult(
                spec,
                key,
                directory,
                rec["status"],
                True,
                rec.get("elapsed_s"),
                rec.get("message", ""),
            )
            continue
        results[spec.name] = RunResult(spec, key, directory, "missing", False)
        if any(t["key"] == key for t in todo):
            continue
        cfg.update(
            output_dir=str(directory),
            overwrite=True,
            progress=bool(progress and plan.scale == "paper"),
            nproc=nproc,
        )
        todo.append({"name": spec.name, "key": key, "config": cfg})
    return results, todo


def _train_missing(
    plan: Plan, runs_dir: Path, todo: Sequence[dict[str, Any]], log: Callable[[str], None]
) -> None:
    runs_dir.mkdir(parents=True, exist_ok=True)
    if plan.nproc > 1:
        plan_file = runs_dir / f"plan-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json"
        plan_file.write_text(json.dumps({"runs": list(todo)}, indent=1, default=str))
        code = _launch(plan_file, plan.nproc, log)
        if code != 0:
            log(f"palsgd figures: the training launcher exited with {code}")
    else:
        for item in todo:
            _train_one(item, 0)


def _train_side_by_side(
    todo: Sequence[dict[str, Any]],
    placement: Placement,
    gpu: str,
    log: Callable[[str], None],
) -> None:
    """The missing runs on the placement's GPU sets, the longest (estimated) first."""

    def longest_first(item: Mapping[str, Any]) -> float:
        est = estimate_run(item["config"], placement, gpu).total_s
        return -est if est is not None else 0.0

    order = sorted(todo, key=longest_first)
    log(f"palsgd figures: training {len(order)} run(s) on {placement.describe()}")
    run_side_by_side(order, placement, log=log)


def _read_status(res: RunResult, own_log: bool = False) -> None:
    """Set a trained run's status from the record its training wrote; ``own_log``: the
    run was launched alone, its output in its directory's launch.log."""
    status_path = res.directory / STATUS_FILE
    where = f"see {res.directory / LAUNCH_LOG}" if own_log else "see the training output above"
    if status_path.is_file():
        rec = json.loads(status_path.read_text())
        res.status = rec.get("status", "failed") if rec.get("key") == res.key else "failed"
        res.elapsed_s = rec.get("elapsed_s")
        res.message = rec.get("message", "")
        if res.status == "failed" and own_log:
            res.message = f"{res.message} ({where})".strip()
    else:
        res.status = "failed"
        res.message = f"the run did not finish ({where})"


def execute(
    plan: Plan,
    runs_dir: Path,
    *,
    train_missing: bool = True,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    placement: Placement | None = None,
    gpu: str = "A100-SXM4-80GB",
) -> dict[str, RunResult]:
    """Make every run of ``plan`` available in ``runs_dir``; returns name -> RunResult.

    Cached runs are reused; missing ones are trained in one launch (see
    :mod:`paper_figures.runs`), or with a ``placement`` (GPUs) one launch per run on its
    GPU sets, runs side by side, the longest first by the estimate on ``gpu``
    (:mod:`paper_figures.runs.parallel`), unless ``train_missing`` is False, in which
    case a missing run raises :class:`UserInputError` naming it. A run that fails for
    another reason than divergence is reported with status ``failed`` and where its
    output is (its figures mark it as missing); the other runs are still trained.
    """
    log = log or (lambda msg: print(msg, file=sys.stderr))
    runs_dir = Path(runs_dir)
    if placement is not None and placement.parallel > 1:
        progress = False  # runs side by side: no progress bars in their logs
    results, todo = _locate(plan, runs_dir, progress, placement)
    if todo and not train_missing:
        names = ", ".join(t["name"] for t in todo)
        raise UserInputError(
            f"run(s) not found in the runs directory '{runs_dir}' (and "
            f"--no-train was given): {names}"
        )
    if todo and placement is not None:
        runs_dir.mkdir(parents=True, exist_ok=True)
        _train_side_by_side(todo, placement, gpu, log)
    elif todo:
        _train_missing(plan, runs_dir, todo, log)
    for res in results.values():
        if not res.cached:
            _read_status(res, own_log=placement is not None)
    return results


#: the options of ``python -m paper_figures.runs`` (one rank of the training launch)
OPTIONS = (option("--plan", required=True, help="plan file written by palsgd figures"),)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m paper_figures.runs --plan FILE``: one rank of the training launch."""
    parser = argparse.ArgumentParser(
        prog="python -m paper_figures.runs",
        description="train the runs of a figures plan (one rank)",
    )
    declare(parser, OPTIONS)
    args = parser.parse_args(argv)
    return _worker(args.plan)
