"""``OUT/manifest.json``: what ``palsgd figures`` ran, on what, and what it drew."""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.io import atomic_write_json, package_versions
from paper_figures import runs as R

__all__ = ["hardware", "write_manifest"]

_VERSIONS = ("palsgd-toolkit", "torch", "numpy", "scipy", "sympy", "matplotlib", "transformers")


def _torch_hardware() -> dict[str, Any]:
    """The GPUs torch sees and its thread count ({} without torch)."""
    torch = R.torch_module()
    if torch is None:  # pragma: no cover
        return {}
    cuda = torch.cuda.is_available()
    return {
        "cuda": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if cuda
        else [],
        "torch_threads": torch.get_num_threads(),
    }


def hardware() -> dict[str, Any]:
    """This machine: platform, CPUs, load, GPUs."""
    hw: dict[str, Any] = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "hostname": socket.gethostname(),
    }
    try:
        hw["load_average_1_5_15_min"] = list(os.getloadavg())
    except OSError:  # pragma: no cover
        pass
    hw.update(_torch_hardware())
    return hw


def _git_commit() -> str | None:
    try:
        res = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() or None


def _carry_over(path: Path, manifest: dict[str, Any]) -> None:
    """Keep the records of figures drawn by an earlier invocation into the same directory
    at the same scale (``--only`` redraws a subset); they are marked with the command that
    drew them."""
    if not path.is_file():
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if old.get("scale") != manifest["scale"]:
        return
    for name, rec in (old.get("figures") or {}).items():
        if name not in manifest["figures"] and rec.get("status") == "ok":
            manifest["figures"][name] = dict(rec, drawn_by=rec.get("drawn_by", old.get("command")))


def _run_record(r: R.RunResult) -> dict[str, Any]:
    return {
        "directory": str(r.directory),
        "key": r.key,
        "status": r.status,
        "cached": r.cached,
        "elapsed_s": r.elapsed_s,
        "message": r.message,
        "group": r.spec.group,
        "algorithm": r.spec.algorithm,
    }


def write_manifest(
    out: Path,
    args: argparse.Namespace,
    *,
    plan: R.Plan,
    runs_dir: Path,
    results: Mapping[str, R.RunResult],
    cost: Any,
    figures: Mapping[str, Any],
    durations: Mapping[str, float],
    hardware_start: Mapping[str, Any],
    placement: Mapping[str, Any] | None = None,
) -> None:
    """Write ``out/manifest.json`` (the records of earlier ``--only`` figures kept);
    ``placement``: the paper scale's GPUs per run (None at the quick scale)."""
    cmd = sys.argv[2:] if sys.argv[1:2] == ["figures"] else sys.argv[1:]
    manifest = {
        "command": "palsgd figures " + " ".join(cmd),
        "argv": sys.argv,
        "options": dict(vars(args)),
        "scale": plan.scale,
        "seed": args.seed,
        "nproc": plan.nproc,
        "figures_requested": list(figures),
        "versions": package_versions(_VERSIONS),
        "git_commit": _git_commit(),
        "hardware": {"start": dict(hardware_start), "end": hardware()},
        "plan": plan.to_dict(),
        "placement": dict(placement) if placement is not None else None,
        "runs_dir": str(runs_dir),
        "runs": {n: _run_record(r) for n, r in results.items()},
        "durations_s": {k: round(v, 3) for k, v in durations.items()},
        "calibration": cost.to_dict() if cost is not None else None,
        "figures": dict(figures),
    }
    _carry_over(out / "manifest.json", manifest)
    atomic_write_json(out / "manifest.json", manifest)
