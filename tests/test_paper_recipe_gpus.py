"""The paper's recipe on 1..N GPUs: the placement of K workers on G GPUs (shared over gloo
when G < K, runs side by side when G >= 2K), the side-by-side launcher (bounded, a failed
run reported with its directory and the others kept), the dry run's GPU sets and cost-model
estimates, and, with CUDA faked in every process (tests/harness), real launches of the
paper plan's runs (shrunk by ``--smoke-runs``): on one GPU the four workers bind it and
form a gloo group; on eight GPUs two runs train at the same time on disjoint GPU sets.

A fake GPU is not a GPU: these tests check placement, binding, backends and scheduling;
speed, memory and the estimates' accuracy are not checked here (docs/paper_figures_gpus.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from harness.fake_cuda import read_log

from palsgd.cli import main
from paper_figures import runs as R
from paper_figures.runs import parallel
from paper_figures.runs.estimate import estimate_run, schedule
from paper_figures.runs.placement import place

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "tests" / "harness"

#: a sitecustomize in front of tests/harness's: a process launched with
#: CUDA_VISIBLE_DEVICES sees that many fake GPUs (as the driver would) and records which
#: GPUs it was given, with its start and end time
_VISIBLE_HOOK = f"""
import atexit, json, os, runpy, time
_vis = os.environ.get("CUDA_VISIBLE_DEVICES")
if _vis and os.environ.get("PALSGD_FAKE_GPUS"):
    os.environ["PALSGD_FAKE_GPUS"] = str(len(_vis.split(",")))
_log = os.environ.get("PALSGD_FAKE_GPU_LOG")
if _log and os.environ.get("RANK") is not None:
    _rec = {{"pid": os.getpid(), "rank": os.environ["RANK"], "visible": _vis,
             "start": time.time()}}
    def _end():
        _rec["end"] = time.time()
        with open(os.path.join(_log, f"{{os.getpid()}}.visible.json"), "w") as fh:
            json.dump(_rec, fh)
    atexit.register(_end)
runpy.run_path({str(HARNESS / "sitecustomize.py")!r})
"""


def _fake_env(tmp: Path, gpus: int, **extra: str) -> tuple[dict[str, str], Path]:
    hook = tmp / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_VISIBLE_HOOK)
    log = tmp / "fake-gpu-log"
    log.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join([str(hook), str(HARNESS), str(ROOT)]),
        PALSGD_FAKE_GPUS=str(gpus),
        PALSGD_FAKE_GPU_LOG=str(log),
        **extra,
    )
    return env, log


def _figures(env: dict[str, str], *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "palsgd", "figures", "--scale", "paper", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


# ----------------------------------------------------------------------------- placement
@pytest.mark.parametrize(
    ("workers", "gpus", "per_gpu", "per_run", "parallel", "backend", "idle"),
    [
        (4, 1, 4, 1, 1, "gloo", 0),
        (4, 2, 2, 2, 1, "gloo", 0),
        (4, 3, 2, 2, 1, "gloo", 1),  # 2 GPUs of 2 ranks: as fast as 3, one GPU idle
        (4, 4, 1, 4, 1, "nccl", 0),
        (4, 8, 1, 4, 2, "nccl", 0),
        (4, 9, 1, 4, 2, "nccl", 1),
        (1, 8, 1, 1, 8, "nccl", 0),
    ],
)
def test_placement_of_k_workers_on_g_gpus(workers, gpus, per_gpu, per_run, parallel, backend, idle):
    pl = place(workers, gpus, names=tuple(str(i) for i in range(gpus)))
    assert (pl.ranks_per_gpu, pl.gpus_per_run, pl.parallel) == (per_gpu, per_run, parallel)
    assert (pl.backend, pl.idle) == (backend, idle)
    used = [g for s in pl.slots for g in s]
    assert len(used) == len(set(used)) == parallel * per_run  # disjoint GPU sets
    assert place(workers, gpus, max_parallel=1).parallel == 1


def test_gpu_sets_name_the_gpus_this_process_was_given(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,6,7,2,4,0,1")
    pl = place(4, 8)
    assert [pl.env(i)["CUDA_VISIBLE_DEVICES"] for i in range(2)] == ["3,5,6,7", "2,4,0,1"]
    assert place(4, 1).env(0) == {"CUDA_VISIBLE_DEVICES": "3"}


def test_sharing_gpus_is_part_of_the_run_key():
    spec = R.plan_runs("paper", ["loss_vs_time"]).runs[0]
    own, shared = (R.run_key(R.resolve_spec(spec, b), 4, "cuda") for b in ("auto", "gloo"))
    assert own == R.run_key(R.resolve_spec(spec), 4, "cuda")  # runs cached before stay
    assert shared != own


# ----------------------------------------------------------------------------- estimates
def test_estimates_grow_with_the_ranks_sharing_a_gpu_and_the_schedule_packs_runs():
    plan = R.plan_runs("paper", ["loss_vs_time"], nproc=4)
    cfg = R.resolve_spec(plan.runs[0])  # gptneo-8m, DDP
    own = estimate_run(cfg, place(4, 4), "H100-SXM5-80GB")
    shared = estimate_run(cfg, place(4, 1), "H100-SXM5-80GB")
    assert own.total_s is not None and shared.total_s is not None
    assert 3.5 < shared.train_s / own.train_s < 4.5  # 4 ranks take turns on one GPU
    assert own.total_s == pytest.approx(own.train_s + own.evaluation_s + own.startup_s)
    runs = [("a", 10.0), ("b", 6.0), ("c", 4.0), ("d", 3.0)]
    ends = {s.name: (s.slot, s.end_s) for s in schedule(runs, 2)}
    assert ends == {"a": (0, 10.0), "b": (1, 6.0), "c": (1, 10.0), "d": (0, 13.0)}
    unknown = estimate_run(dict(cfg, model="gptneo-tiny"), place(4, 1), "H100-SXM5-80GB")
    assert unknown.total_s is None and "gptneo-tiny" in unknown.note


def _wall_hours(out: str) -> float:
    m = re.search(r"estimated wall time: ([\d.]+) h", out)
    assert m, out[-2000:]
    return float(m.group(1))


def test_the_dry_run_prints_gpu_sets_and_estimates_on_1_and_8_fake_gpus(tmp_path):
    """One process with 8 fake GPUs prints two dry runs: on every GPU, and on the first
    (``--gpus 1``, as a one-GPU machine sees it)."""
    env, _ = _fake_env(tmp_path, 8)
    out = str(tmp_path / "o")
    code = (
        "import sys; from palsgd.cli import main; "
        f"a = main(['figures', '--scale', 'paper', '--dry-run', '--out', {out!r}]); "
        "print('=' * 20); "
        f"b = main(['figures', '--scale', 'paper', '--dry-run', '--gpus', '1', '--out', {out!r}]); "
        "sys.exit(a or b)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    eight, one = proc.stdout.split("=" * 20)
    assert "placement: 1 GPU(s): 4 workers share 1 GPU(s), 4 ranks per GPU (gloo" in one
    rows = [ln for ln in one.splitlines() if "[to train]" in ln]
    assert len(rows) == 30 and all(re.search(r"GPU 0 +est\. +[\d.]+ (h|min)", r) for r in rows)
    assert "needs at least one CUDA GPU" not in one
    assert "estimated as A100-SXM4-80GB" in one  # 'fake GPU 0' has no cost entry
    assert "2 run(s) side by side on 2 GPU set(s)" in eight
    assert "GPUs 0-3" in eight and "GPUs 4-7" in eight
    assert _wall_hours(eight) < _wall_hours(one) / 4  # 8x the GPUs, 2 runs at once
    assert not (tmp_path / "o").exists()


def test_more_gpus_than_seen_is_refused_naming_the_flag(tmp_path, capsys):
    env, _ = _fake_env(tmp_path, 1)
    proc = _figures(env, "--gpus", "2", "--only", "paper_scale", "sensitivity", timeout=120)
    assert proc.returncode == 2 and "--gpus 2: only 1 CUDA GPU(s) found" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert main(["figures", "--scale", "paper", "--gpus", "0", "--dry-run"]) == 2
    assert "--gpus must be >= 1, got 0" in capsys.readouterr().err


# ----------------------------------------------------------------------------- side by side
def test_side_by_side_is_bounded_and_a_failure_loses_no_other_run(tmp_path):
    pl = place(4, 8)
    running, peak, lock = [0], [0], threading.Lock()
    seen_gpus: dict[str, str] = {}

    def launch(item, placement, slot):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            seen_gpus[item["name"]] = placement.env(slot)["CUDA_VISIBLE_DEVICES"]
        time.sleep(0.3)
        with lock:
            running[0] -= 1
        if item["name"] == "boom":
            raise OSError("no such launcher")
        return 4 if item["name"] == "bad" else 0

    names = ["a", "bad", "b", "boom", "c"]
    items = [{"name": n, "config": {"output_dir": str(tmp_path / n)}} for n in names]
    lines: list[str] = []
    out = parallel.run_side_by_side(items, pl, launch=launch, log=lines.append)
    assert peak[0] == 2
    assert {n: o.exit_code for n, o in out.items()} == {"a": 0, "bad": 4, "b": 0, "boom": 1, "c": 0}
    assert set(seen_gpus.values()) == {"0,1,2,3", "4,5,6,7"}
    assert any("bad FAILED (exit code 4)" in ln and str(tmp_path / "bad") in ln for ln in lines)
    assert any("boom: the launch failed: no such launcher" in ln for ln in lines)


def test_execute_reports_a_failed_run_with_its_directory(tmp_path, monkeypatch):
    """Through :func:`paper_figures.runs.execute` on one GPU set (a deterministic order):
    the runs go longest first; one launch
    fails, the other run is still trained and loaded as finished."""
    plan = R.plan_runs("paper", ["loss_vs_time"], nproc=4)
    plan.runs[:] = [r for r in plan.runs if r.name in ("gptneo-8m/ddp", "gptneo-125m/ddp")]
    order: list[str] = []

    def launch(item, placement, slot):
        order.append(item["name"])
        if item["name"] == "gptneo-125m/ddp":
            return 4
        d = Path(item["config"]["output_dir"])
        (d / "metrics.jsonl").write_text("")
        rec = {"key": item["key"], "status": "finished", "elapsed_s": 1.0}
        (d / R.STATUS_FILE).write_text(json.dumps(rec))
        return 0

    monkeypatch.setattr(parallel, "launch_run", launch)
    res = R.execute(plan, tmp_path, placement=place(4, 4), gpu="H100-SXM5-80GB", log=print)
    assert order[0] == "gptneo-125m/ddp"  # the longest run first
    assert res["gptneo-8m/ddp"].status == "finished"
    bad = res["gptneo-125m/ddp"]
    assert bad.status == "failed" and bad.directory.is_dir()
    assert str(bad.directory / "launch.log") in bad.message


# ----------------------------------------------------------------------------- real launches
def _rank_records(log: Path) -> tuple[list[dict], dict[str, dict]]:
    events = [e for e in read_log(log) if e["rank"] is not None and e["event"] != "install"]
    visible = {}
    for path in log.glob("*.visible.json"):
        rec = json.loads(path.read_text())
        visible[str(rec["pid"])] = rec
    return events, visible


@pytest.mark.slow
@pytest.mark.distributed
def test_paper_recipe_on_one_gpu_binds_every_worker(tmp_path):
    """``--scale paper --smoke-runs 1`` on one fake GPU: K = 4 ranks, each binds cuda:0
    before its gloo group exists; the run finishes with world size 4."""
    env, log = _fake_env(tmp_path, 1)
    proc = _figures(env, "--smoke-runs", "1", "--out", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    events, visible = _rank_records(log)
    by_rank: dict[str, list] = {}
    for e in events:
        by_rank.setdefault(e["rank"], []).append((e["event"], e.get("index"), e.get("backend")))
    assert set(by_rank) == {"0", "1", "2", "3"}, events
    for seq in by_rank.values():
        assert seq[0] == ("set_device", 0, None)
        assert ("init_process_group", None, "gloo") in seq
    assert {v["visible"] for v in visible.values()} == {"0"}
    (run,) = (tmp_path / "o" / "smoke-runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["world_size"] == 4
    assert summary["backend"] == "gloo"
    assert json.loads((run / parallel.PLAN_FILE).read_text())["backend"] == "gloo"
    assert (run / parallel.LAUNCH_LOG).is_file()


@pytest.mark.slow
@pytest.mark.distributed
def test_eight_gpus_train_two_runs_side_by_side_and_a_failure_is_reported(tmp_path):
    """``--smoke-runs 2`` on eight fake GPUs: two runs of 4 ranks at the same time on
    GPUs 0-3 and 4-7 (each rank binds cuda:LOCAL_RANK of its set, NCCL); the second run's
    disk is full (tests/harness/faults.py): it fails, is named with its directory, and the
    first still finishes."""
    env, log = _fake_env(tmp_path, 8, PALSGD_FAULT_DISK_FULL="gptneo-8m-local_sgd")
    proc = _figures(env, "--smoke-runs", "2", "--out", str(tmp_path / "o"))
    assert proc.returncode == 4, proc.stderr[-4000:]
    assert "smoke: 1/2 run(s) finished" in proc.stderr
    m = re.search(r"smoke: gptneo-8m/local_sgd failed: .*see (\S+launch\.log)", proc.stderr)
    assert m and Path(m.group(1)).is_file(), proc.stderr[-3000:]
    events, visible = _rank_records(log)
    sets = {}
    for rec in visible.values():
        sets.setdefault(rec["visible"], []).append(rec)
    assert set(sets) == {"0,1,2,3", "4,5,6,7"} and all(len(v) == 4 for v in sets.values())
    spans = [(min(r["start"] for r in v), max(r["end"] for r in v)) for v in sets.values()]
    assert max(s for s, _ in spans) < min(e for _, e in spans), spans  # they overlap
    groups = {(e["rank"], e["device_id"]) for e in events if e["event"] == "init_process_group"}
    assert groups == {(str(r), f"cuda:{r}") for r in range(4)}
    done = [d for d in (tmp_path / "o" / "smoke-runs").iterdir() if "ddp" in d.name]
    assert json.loads((done[0] / "summary.json").read_text())["status"] == "finished"
