"""Multi-process GPU launches on a machine without a GPU: every process of a real launch
(``palsgd train``, torchrun's agent, each rank) runs with CUDA faked by tests/harness
(``PALSGD_FAKE_GPUS`` devices; kernels on the CPU, NCCL replaced by gloo after its
``device_id`` is checked), and records each ``torch.cuda.set_device`` and each process
group it creates. The tests read those records: every rank binds its own device before
its group exists, an NCCL group gets that device as ``device_id``, no rank refuses, and
the launcher itself binds nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness.fake_cuda import read_log

from empirical.metrics import read_jsonl

pytestmark = pytest.mark.distributed

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "tests" / "harness"
TINY = ["--no-progress", "--T", "4", "--seq-len", "16", "--batch-size", "2", "--H", "2"]
TINY += ["--T0", "1", "--eval-interval", "0", "--log-interval", "2"]


def _run(cmd: list[str], tmp: Path, gpus: int, timeout: int = 300) -> tuple[int, str, list]:
    """``cmd`` with ``gpus`` fake GPUs in every process; exit code, stderr, the records."""
    log = tmp / "fake-gpu-log"
    log.mkdir()
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": f"{HARNESS}{os.pathsep}{ROOT}",
        "PALSGD_FAKE_GPUS": str(gpus),
        "PALSGD_FAKE_GPU_LOG": str(log),
    }
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    return proc.returncode, proc.stderr, read_log(log)


def _palsgd(*args: str) -> list[str]:
    return [sys.executable, "-m", "palsgd", "train", *args]


def _attempts(events: list[dict]) -> dict[tuple[str, str], dict]:
    """Per (restart, rank) of the ranks: the devices bound and the groups created, in order."""
    out: dict[tuple[str, str], dict] = {}
    for ev in events:
        if ev["rank"] is None or ev["event"] == "install":
            continue
        att = out.setdefault((ev["restart"], ev["rank"]), {"order": [], "bound": [], "groups": []})
        att["order"].append(ev["event"])
        if ev["event"] == "set_device":
            att["bound"].append(ev["index"])
        else:
            att["groups"].append((ev["backend"], ev["device_id"], ev["bound"]))
    return out


def _launcher_bound_nothing(events: list[dict]) -> bool:
    return not [e for e in events if e["rank"] is None and e["event"] == "set_device"]


@pytest.mark.parametrize(
    ("nproc", "restart"),
    [(2, True), pytest.param(4, False, marks=pytest.mark.slow)],  # 4 ranks: ~13 s on 2 cores
    ids=["2-restart", "4"],
)
def test_each_rank_binds_its_own_gpu(nproc, restart, tmp_path):
    """``palsgd train --nproc N --device cuda --T 4``: every rank binds ``cuda:LOCAL_RANK``
    before an NCCL group with that ``device_id``. With 2 ranks the run crashes after step 2
    and torchrun restarts it from the checkpoint: the restarted ranks bind again."""
    out = tmp_path / "run"
    extra = ["--max-restarts", "1", "--crash-at-step", "2"] if restart else []
    code, err, events = _run(
        _palsgd(
            *TINY, "--nproc", str(nproc), "--device", "cuda", "--output-dir", str(out),
            "--checkpoint-interval", "2", *extra,
        ),
        tmp_path,
        gpus=nproc,
    )  # fmt: skip
    assert code == 0, err[-3000:]
    assert "names one GPU" not in err
    attempts = _attempts(events)
    tries = ("0", "1") if restart else ("0",)
    assert set(attempts) == {(a, str(r)) for a in tries for r in range(nproc)}, attempts
    for (_, rank), att in attempts.items():
        assert att["order"] == ["set_device", "init_process_group"], att
        assert att["bound"] == [int(rank)]
        assert att["groups"] == [("nccl", f"cuda:{rank}", int(rank))]
    assert _launcher_bound_nothing(events)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["world_size"] == nproc
    assert summary["hardware"]["device"] == "cuda:0"
    if restart:
        assert summary["resumed_from"].endswith("step_00000002")
    train = [r for r in read_jsonl(out / "metrics.jsonl") if r["kind"] == "train"]
    assert train[-1]["step"] == 4


@pytest.mark.slow  # its parts run by default: raw torchrun (test_train_cli), the binding
def test_raw_torchrun_with_device_auto(tmp_path):
    """``torchrun -m empirical.train --device auto`` (no palsgd launcher): auto is CUDA,
    each rank ``cuda:LOCAL_RANK`` over NCCL."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node"]
    cmd += ["2", "-m", "empirical.train", *TINY, "--device", "auto", "--output-dir", str(out)]
    code, err, events = _run(cmd, tmp_path, gpus=2)
    assert code == 0, err[-3000:]
    attempts = _attempts(events)
    assert {k: v["groups"] for k, v in attempts.items()} == {
        ("0", "0"): [("nccl", "cuda:0", 0)],
        ("0", "1"): [("nccl", "cuda:1", 1)],
    }
    assert json.loads((out / "summary.json").read_text())["status"] == "finished"


def test_gloo_ranks_share_one_gpu(tmp_path):
    """``--backend gloo`` with more ranks than GPUs: both ranks on ``cuda:0``, no device_id."""
    out = tmp_path / "run"
    code, err, events = _run(
        _palsgd(*TINY, "--nproc", "2", "--device", "cuda", "--backend", "gloo",
                "--output-dir", str(out)),
        tmp_path,
        gpus=1,
    )  # fmt: skip
    assert code == 0, err[-3000:]
    attempts = _attempts(events)
    assert {k: (v["bound"], v["groups"]) for k, v in attempts.items()} == {
        ("0", "0"): ([0], [("gloo", None, 0)]),
        ("0", "1"): ([0], [("gloo", None, 0)]),
    }
    summary = json.loads((out / "summary.json").read_text())
    assert summary["backend"] == "gloo" and summary["world_size"] == 2


def test_one_process_binds_and_passes_device_id(tmp_path):
    """``--nproc 1 --device cuda`` trains in the launcher's process: it binds ``cuda:0``
    and creates its world-size-1 NCCL group with that device."""
    out = tmp_path / "run"
    code, err, events = _run(
        _palsgd(*TINY, "--nproc", "1", "--device", "cuda", "--output-dir", str(out)),
        tmp_path,
        gpus=2,
    )
    assert code == 0, err[-3000:]
    kinds = [(e["event"], e.get("index"), e.get("device_id")) for e in events]
    assert kinds[1:] == [("set_device", 0, None), ("init_process_group", None, "cuda:0")]


def test_more_nccl_ranks_than_gpus_are_refused_before_launch(tmp_path):
    """Two NCCL ranks on one GPU would hang in NCCL: refused with exit 2 before any rank
    starts, naming the rank without a GPU; the launcher binds nothing."""
    code, err, events = _run(
        _palsgd(*TINY, "--nproc", "2", "--device", "cuda", "--output-dir", str(tmp_path / "r")),
        tmp_path,
        gpus=1,
    )
    assert code == 2, err[-3000:]
    assert "LOCAL_RANK 1 has no GPU of its own" in err and "Traceback" not in err
    assert not [e for e in events if e["rank"] is not None]
    assert _launcher_bound_nothing(events)
