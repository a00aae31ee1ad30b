"""Every command of the README's "Examples" block runs as shown (short variants of the long
ones), exits 0 and does what it says; a run that checked nothing does not exit 0.

The table ``EXAMPLES`` maps each README line to the command the test runs; a README line
without an entry fails ``test_every_readme_example_has_a_test``, so a new example cannot be
added without a test. Long examples run with fewer steps, replicas or figures (the
variant keeps every flag of the README line and adds size flags only).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from palsgd.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def readme_examples() -> list[str]:
    """The command lines of the README's "Examples:" bash block (comments stripped)."""
    text = README.read_text()
    block = re.search(r"Examples:\s*```bash\n(.*?)```", text, re.S)
    assert block, "README has no 'Examples:' bash block"
    lines = [ln.split("  #")[0].strip() for ln in block.group(1).splitlines()]
    return [ln for ln in lines if ln]


#: the size flags of the short ``palsgd map`` variants (fewer cells, a smaller grid)
MAP_SMALL = ["--H", "8", "--eta", "2", "--n-alpha", "3", "--n-outer", "1", "--max-extend", "1",
             "--no-plots", "--no-progress", "--no-bounds"]  # fmt: skip

#: README line -> (kind, extra flags added by the test). kind: "inproc" runs palsgd.cli.main
#: in this process, "proc" a subprocess, "placeholder" a line with DIR/TOKDIR placeholders
#: (run with a missing DIR: a clean exit 2 naming the data path, and --print-config with a
#: real folder), "verify" the separate verify test below.
EXAMPLES: dict[str, tuple[str, list[str]]] = {
    "palsgd check --L 10 --sigma 1 --zeta 0.5 --F0 5 --K 4 --H 32 --p 0.2 --eta 1 --lr 0.001 "
    "--T 10000": ("inproc", []),
    "palsgd check --preset gptneo-8m-readme --L 30 --sigma 0.7 --zeta 0.3 --F0 5 --T 2000 --json": (
        "inproc",
        [],
    ),
    "palsgd bounds --latex palsgd": ("inproc", []),
    "palsgd verify --bounds palsgd local_sgd_ours --replicas 128 --out reports/mine": (
        "verify",
        [],
    ),
    "palsgd verify --bounds sgd --controls --out reports/controls": ("verify", []),
    "palsgd verify --bounds sgd --at 'L=1 lam_F=1 F0=1 K=2 H=1 T=6 alpha=1'": ("verify", []),
    "palsgd verify --bounds local_sgd_quadratic_lower --at 'alpha=1 L=1 F0=1 T=10'": (
        "inproc",
        [],
    ),
    "palsgd verify --bound-file docs/examples/my_bound.yaml --out reports/mine_file": (
        "verify",
        [],
    ),
    "palsgd worst-case --algorithm sgd --K 1 --T 4 --alpha 1 --bound sgd": ("inproc", []),
    "palsgd train": ("proc", ["--T", "4", "--eval-interval", "2", "--no-progress"]),
    "palsgd train --nproc 2 --algorithm diloco --T 200": (
        "proc",
        ["--T", "4", "--eval-interval", "2", "--no-progress"],
    ),
    "torchrun --nproc-per-node 4 -m empirical.train --preset gptneo-8m-readme --data-path DIR "
    "--tokenizer TOKDIR": ("placeholder", []),
    "palsgd train --preset gptneo-8m-readme-faithful --data-path DIR": ("placeholder", []),
    "palsgd train --dataset tokens --data-path tokens.bin --token-dtype uint16": ("tokens", []),
    "palsgd probe": (
        "proc",
        ["--steps", "4", "--points", "2", "--samples", "4", "--max-samples", "16"]
        + ["--hvp-samples", "4", "--hvp-iters", "2", "--no-progress"],
    ),
    "palsgd figures --scale quick": ("proc", ["--only", "paper_scale", "--no-progress"]),
    "palsgd figures --scale paper --dry-run": ("inproc", []),
    "palsgd cost check": ("proc", ["--steps-scale", "0.125"]),
    "palsgd cost predict": ("inproc", []),
    "palsgd cost predict --setting gptneo-8m-tinystories --profile 32nodes-10Gbps "
    "--prob_no_grad 0.1": ("inproc", []),
    "palsgd map --out reports/map": ("inproc", MAP_SMALL),
    "palsgd map --problem docs/examples/hetero_problem.yaml --eps 0.05 0.01 --budget rounds:2e4 "
    "--out reports/map-file": ("inproc", MAP_SMALL[4:]),
    "palsgd map --budget time:5e4 --profile 32nodes-10Gbps --out reports/map-time": (
        "inproc",
        MAP_SMALL,
    ),
    "palsgd map --engine montecarlo --family hetero_cosine --H 64 --eta 2 --zeta 3 --eps 0.1 "
    "--budget rounds:150 --out reports/map-mc": (
        "inproc",
        ["--methods", "local_sgd", "palsgd", "--n-alpha", "2", "--n-outer", "1",
         "--max-extend", "0", "--replicas", "4", "--holdout-replicas", "8", "--no-plots",
         "--no-progress"],
    ),
}  # fmt: skip


def test_every_readme_example_has_a_test():
    lines = readme_examples()
    assert len(lines) >= 10
    assert sorted(set(lines) - set(EXAMPLES)) == [], "README examples without a test"
    assert sorted(set(EXAMPLES) - set(lines)) == [], "tests of examples the README lost"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _run_proc(argv: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    assert argv[0] == "palsgd"
    return subprocess.run(
        [sys.executable, "-m", "palsgd", *argv[1:]],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


INPROC = [k for k, (kind, _) in EXAMPLES.items() if kind == "inproc"]
PROC = [k for k, (kind, _) in EXAMPLES.items() if kind == "proc"]


@pytest.mark.parametrize("line", INPROC)
def test_inprocess_example(line, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(line)[1:] + EXAMPLES[line][1]
    assert main(argv) == 0
    out = capsys.readouterr().out
    if argv[0] == "check":
        if "--json" in argv:
            d = json.loads(out)
            assert d["verdict_code"] != "nothing_evaluated"
            assert any(b["status"] == "evaluated" for b in d["bounds"])
        else:
            assert out.startswith("verdict: covered")
    elif argv[0] == "bounds":
        assert "\\" in out  # LaTeX
    elif argv[:2] == ["cost", "predict"]:
        d = json.loads(out)
        preds = [d] if "setting" in d else list(d.values())
        assert all(0 < p["predicted_time_reduction"] < 1 for p in preds)
        if "--setting" not in argv:  # the three settings next to the paper's numbers
            reported = sorted(p["paper_reported_time_reduction"] for p in preds)
            assert reported == [0.184, 0.211, 0.244]
    elif argv[0] == "figures":
        assert not (tmp_path / "figures_out").exists()  # a dry run writes nothing
    elif argv[0] == "worst-case":  # gradient descent at alpha = 1/L: tight at 2 L F0 / T
        assert "class worst case (full relaxation): 0.5 " in out
        assert "bound sgd: 0.5;" in out and "verdict: certified" in out
    elif argv[0] == "map":
        assert out.startswith("palsgd map (")
        outdir = tmp_path / argv[argv.index("--out") + 1]
        data = json.loads((outdir / "map.json").read_text())
        assert data["cells"] and all(set(c["cost"]) for c in data["cells"])
        assert (outdir / "map.csv").exists() and (outdir / "summary.txt").exists()


def _check_outputs(line: str, cwd: Path, proc: subprocess.CompletedProcess) -> None:
    argv = shlex.split(line)
    if argv[1] == "train":
        summary = json.loads((cwd / "runs" / "train" / "summary.json").read_text())
        assert summary["status"] == "finished"
        assert summary["world_size"] == 2  # the default (and --nproc 2): two ranks
        if "--algorithm" in argv:
            assert "no pull steps" in proc.stderr  # the preset's p, dropped with a note
    elif argv[1] == "probe":
        report = json.loads((cwd / "runs" / "probe" / "probe.json").read_text())
        assert report["estimates"] and report["theory"]
    elif argv[1] == "figures":
        manifest = json.loads((cwd / "figures_out" / "manifest.json").read_text())
        assert manifest["figures"]["paper_scale"]["status"] == "ok"
    elif argv[1:3] == ["cost", "check"]:
        runs = json.loads(proc.stdout)["runs"]
        assert set(runs) >= {"ddp", "local_sgd", "palsgd"}


@pytest.mark.parametrize("line", PROC)
def test_subprocess_example(line, tmp_path):
    argv = shlex.split(line) + EXAMPLES[line][1]
    proc = _run_proc(argv, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    _check_outputs(line, tmp_path, proc)


@pytest.mark.parametrize("line", [k for k, (kind, _) in EXAMPLES.items() if kind == "placeholder"])
def test_placeholder_example(line, tmp_path, monkeypatch, capsys):
    """DIR / TOKDIR are placeholders: with a missing DIR the command fails cleanly naming the
    data path; with a real folder the options resolve (--print-config)."""
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(line)
    i = argv.index("empirical.train") + 1 if argv[0] == "torchrun" else 2
    args = argv[i:]
    assert main(["train", *args]) == 2
    err = capsys.readouterr().err
    assert "data path 'DIR'" in err and "Traceback" not in err
    (tmp_path / "DIR").mkdir()
    args = [a for a in args if a not in ("--tokenizer", "TOKDIR")]
    assert main(["train", *args, "--print-config"]) == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["data_path"] == "DIR" and cfg["model"] == "gptneo-8m"


def test_token_file_example(tmp_path):
    """The README's own-token-file section as written: its python line makes tokens.bin,
    the documented command trains two ranks on it (fewer steps), the file's ids reach the
    model (the summary names the dataset) and an id outside the vocabulary exits 2."""
    text = README.read_text()
    block = re.search(r"\*\*Your own token file\.\*\*.*?```bash\n(.*?)```", text, re.S)
    assert block, "README lost its own-token-file section"
    make, command = [ln for ln in block.group(1).splitlines() if ln.strip()]
    assert command in EXAMPLES and EXAMPLES[command][0] == "tokens"
    argv = shlex.split(make)
    assert argv[0] == "python"
    subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, check=True, timeout=120)
    assert (tmp_path / "tokens.bin").stat().st_size == 200_000
    extra = ["--T", "4", "--eval-interval", "2", "--no-progress"]
    proc = _run_proc(shlex.split(command) + extra, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_outputs(command, tmp_path, proc)
    summary = json.loads((tmp_path / "runs" / "train" / "summary.json").read_text())
    assert summary["config"]["dataset"] == "tokens"
    np.full(5000, 300, dtype=np.uint16).tofile(tmp_path / "tokens.bin")
    proc = _run_proc(shlex.split(command) + extra + ["--nproc", "1", "--overwrite"], tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--data-path tokens.bin" in proc.stderr and "holds id 300" in proc.stderr


def test_verify_example_short(tmp_path):
    """The verify example with fewer replicas (its flags belong to the verify command)."""
    line = "palsgd verify --bounds palsgd local_sgd_ours --replicas 128 --out reports/mine"
    argv = shlex.split(line)
    argv[argv.index("--replicas") + 1] = "16"
    extra = ["--configs", "2", "--budget", "0.2", "--no-plots", "--no-progress"]
    proc = _run_proc([*argv, *extra], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    rep = json.loads((tmp_path / "reports" / "mine" / "results.json").read_text())
    assert {r["bound"] for r in rep["exact"]} == {"palsgd", "local_sgd_ours"}
    assert rep["power"]["controls"] > 0


def test_verify_controls_and_at_examples(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    line = "palsgd verify --bounds sgd --controls --out reports/controls"
    assert main(shlex.split(line)[1:] + ["--budget", "0.3", "--no-progress", "--no-plots"]) == 0
    assert "detection power 100%" in capsys.readouterr().out
    line = "palsgd verify --bounds sgd --at 'L=1 lam_F=1 F0=1 K=2 H=1 T=6 alpha=1'"
    assert main(shlex.split(line)[1:]) == 0
    out = capsys.readouterr().out
    assert "measured (exact) 0.3333333333" in out and "not violated here" in out


def test_verify_bound_file_example(tmp_path, monkeypatch):
    """Run as the README shows, from a directory other than the repository's (the relative
    docs/examples path is also looked up in the toolkit's directory)."""
    monkeypatch.chdir(tmp_path)
    line = "palsgd verify --bound-file docs/examples/my_bound.yaml --out reports/mine_file"
    argv = shlex.split(line)[1:]
    extra = ["--budget", "0.3", "--configs", "1", "--replicas", "8", "--no-plots"]
    assert main([*argv, *extra, "--no-progress"]) == 0
    rep = json.loads((tmp_path / "reports" / "mine_file" / "results.json").read_text())
    assert rep["exact"][0]["bound"] == "my_sgd" and rep["exact"][0]["verdict"] == "not shown false"
