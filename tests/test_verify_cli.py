"""Tests of ``palsgd verify`` (theory.verify_cmd): report files, exit codes, bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

pytest.importorskip("theory.simulate")

from core.errors import UserInputError  # noqa: E402
from palsgd.cli import main  # noqa: E402
from theory import bounds as registry  # noqa: E402
from theory import verify as V  # noqa: E402
from theory.bound import Bound  # noqa: E402

REPORT_FILES = [
    "results.json",
    "exact.csv",
    "tightness.csv",
    "controls.csv",
    "hetero.csv",
    "combined.csv",
    "lower.csv",
    "class.csv",
    "class_designs.csv",
    "results.csv",
    "rates.csv",
    "exact_vs_mc.csv",
    "speedup.csv",
    "consensus.csv",
    "summary.txt",
    *[
        f"{n}.{ext}"
        for n in ("tightness", "measured_vs_bound", "rates", "consensus_vs_H", "exact_vs_mc")
        for ext in ("png", "pdf")
    ],
]


#: registered bounds the exact verifier shows false: the known findings
#: (theory.verify.findings, docs/verification.md, section 7); a run over every bound reports
#: them, reproduced, and exits 0
FOUND_FALSE = ["slowmo_ar_sgd"]
FOUND_CODE = 0


def _only_the_findings(rep: dict) -> None:
    """The exact violations are the known findings, each reproduced; no lower bound, no
    contradiction and no Monte-Carlo configuration is violated."""
    s = rep["summary"]
    assert s["exact_violated"] == FOUND_FALSE and s["violated_bounds"] == FOUND_FALSE
    assert [f["bound"] for f in rep["findings"]] == FOUND_FALSE
    assert all(f["reproduced"] for f in rep["findings"])
    assert s["violated"] == [] and s["lower_violated"] == [] and rep["crossings"] == []
    assert s["new_violations"] == [] and s["stale_findings"] == []
    assert s["exit_code"] == FOUND_CODE


def _leftovers(parent: Path, name: str) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}."))


def _quick(
    out: Path,
    *extra: str,
    bounds: tuple[str, ...] = ("sgd",),
    problems: tuple[str, ...] = ("quadratic", "cosine"),
    plots: bool = False,
) -> list[str]:
    """Arguments of a quick ``palsgd verify`` of ``bounds`` on ``problems`` into ``out``
    (no progress bar; no plots unless asked), followed by ``extra``."""
    argv = ["verify", "--quick", "--bounds", *bounds, "--problems", *problems]
    argv += ["--out", str(out), "--no-progress"] + ([] if plots else ["--no-plots"])
    return argv + list(extra)


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("verify") / "report"
    code = main(["verify", "--quick", "--out", str(out), "--no-progress", "--seed", "3"])
    return code, out


def test_quick_run_writes_every_file_and_exits_with_the_findings(quick_report):
    code, out = quick_report
    assert code == FOUND_CODE
    _only_the_findings(json.loads((out / "results.json").read_text()))
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(REPORT_FILES)
    for f in REPORT_FILES:
        assert (out / f).stat().st_size > 0, f
    assert _leftovers(out.parent, out.name) == []


@pytest.mark.parametrize(
    "name,columns",
    [
        ("results.csv", V.RESULTS_COLUMNS),
        ("rates.csv", V.RATES_COLUMNS),
        ("exact_vs_mc.csv", V.EXACT_COLUMNS),
        ("speedup.csv", V.SPEEDUP_COLUMNS),
        ("consensus.csv", V.CONSENSUS_COLUMNS),
    ],
)
def test_csv_columns_as_documented(quick_report, name, columns):
    _, out = quick_report
    with open(out / name) as fh:
        rows = list(csv.DictReader(fh))
    assert rows, name
    assert list(rows[0].keys()) == list(columns)


def test_results_json_contents(quick_report):
    _, out = quick_report
    rep = json.loads((out / "results.json").read_text())
    assert rep["settings"]["seed"] == 3 and rep["settings"]["quick"] is True
    assert rep["statistics"]["correction"] == "holm"
    assert rep["statistics"]["family_wise_level"] == 0.05
    assert "numpy" in rep["versions"] and "python" in rep["versions"]
    verdicts = {r["verdict"] for r in rep["results"]}
    assert verdicts <= set(V.VERDICTS)
    # every registered bound appears (tested, outside, or not verifiable) - none dropped
    assert {r["bound"] for r in rep["results"]} == set(registry.names())
    with open(out / "results.csv") as fh:
        assert len(list(csv.DictReader(fh))) == len(rep["results"])
    tested = [r for r in rep["results"] if r["verdict"] in (V.HOLDS, V.INCONCLUSIVE, V.VIOLATED)]
    assert rep["statistics"]["family_size"] == len(tested)
    for r in tested:  # the verdict can be read off the reported interval
        if r["verdict"] == V.HOLDS:
            assert r["ucb"] <= r["bound_value"]
        if r["verdict"] == V.VIOLATED:
            assert r["lcb"] >= r["bound_value"]
    _only_the_findings(rep)


def test_rerun_replaces_previous_report(tmp_path):
    out = tmp_path / "rep"
    args = _quick(out)
    assert main(args) == 0
    (out / "stale.txt").write_text("old")
    assert main(args + ["--seed", "1"]) == 0
    assert not (out / "stale.txt").exists()
    assert json.loads((out / "results.json").read_text())["settings"]["seed"] == 1
    assert _leftovers(tmp_path, "rep") == []


def test_json_flag_prints_summary(tmp_path, capsys):
    out = tmp_path / "j"
    code = main(_quick(out, "--json", "--level", "0.1", "--correction", "bonferroni"))
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["correction"] == "bonferroni" and summary["family_wise_level"] == 0.1
    assert summary["exit_code"] == 0 and "counts" in summary


def test_violated_user_bound_exits_1(tmp_path, capsys, monkeypatch):
    wrong = Bound.from_strings(
        "sgd_div10_cli",
        "(2*F0/(alpha*T) + L*alpha*sigma**2/K)/10",
        ["alpha*L <= 1"],
        algorithm="sgd",
        provenance="wrong on purpose",
    )
    registry.names()  # load the built-in bounds first
    monkeypatch.setitem(registry._REGISTRY, wrong.name, wrong)  # registered for this test only
    out = tmp_path / "v"
    code = main(_quick(out, "--replicas", "24", bounds=("sgd_div10_cli", "sgd")))
    text = capsys.readouterr().out
    assert code == 1
    assert "BOUND VIOLATED" in text and "!! VIOLATED !!" in text
    rep = json.loads((out / "results.json").read_text())
    exact = {r["bound"]: r["verdict"] for r in rep["exact"]}
    assert exact == {"sgd_div10_cli": "violated", "sgd": "not shown false"}
    assert rep["summary"]["exact_violated"] == ["sgd_div10_cli"]
    viol = {r["bound"] for r in rep["results"] if r["verdict"] == V.VIOLATED}
    assert viol <= {"sgd_div10_cli"}  # Monte Carlo on the nonconvex problem: never sgd


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--problems", "nonesuch"], "known problems"),
        (["--bounds", "nonesuch"], "known bounds"),
        (["--declare", "L=0.01"], "L: measured smoothness"),
        (["--declare", "quadratic.sigma2=0.25"], "measured/declared = 4"),
        (["--declare", "quadratic.kappa=1"], "declarable"),
        (["--declare", "logistic.L=5"], "not selected"),
        (["--level", "1.5"], "level"),
        (["--sigma", "-1"], "sigma"),
        (["--noise", "pink"], "argument --noise"),
    ],
)
def test_bad_input_exits_2_and_leaves_nothing(tmp_path, capsys, extra, message):
    out = tmp_path / "bad"
    code = main(_quick(out, *extra))
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists() and _leftovers(tmp_path, "bad") == []


@pytest.mark.parametrize(
    "flag,value",
    [
        (f, v)
        for f in ("--replicas", "--K", "--T", "--configs", "--d")
        for v in ("0", "-3", "x")
        if (f, v) != ("--configs", "0")  # zero configurations per pair is allowed
    ],
)
def test_nonpositive_sizes_exit_2(tmp_path, capsys, flag, value):
    out = tmp_path / "bad"
    code = main(["verify", "--quick", flag, value, "--out", str(out), "--no-progress"])
    assert code == 2
    assert flag.lstrip("-") in capsys.readouterr().err
    assert not out.exists()


def test_unwritable_output_exits_2(tmp_path, capsys):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    code = main(_quick(blocker / "sub" / "rep", plots=True))
    assert code == 2
    assert "cannot write the report" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


def test_refuses_to_replace_a_foreign_directory(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    code = main(_quick(out, plots=True))
    assert code == 2 and "refusing" in capsys.readouterr().err
    assert (out / "thesis.tex").read_text() == "precious"


def test_failure_midway_leaves_nothing_behind(tmp_path, monkeypatch, capsys):
    def boom(*a, **k):
        raise UserInputError("declared constants contradicted by sampling: L too small")

    monkeypatch.setattr(V, "run_verification", boom)
    out = tmp_path / "deep" / "er" / "rep"
    code = main(["verify", "--quick", "--out", str(out), "--no-progress"])
    assert code == 2 and "contradicted" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # also the parents created for the report

    def crash(*a, **k):
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(V, "run_verification", crash)
    # a bug: exit code 70 (core.exitcodes.INTERNAL_ERROR) with its traceback
    assert main(["verify", "--quick", "--out", str(out), "--no-progress"]) == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "simulated crash" in err and "internal error" in err
    assert list(tmp_path.iterdir()) == []


def test_single_worker_runs(tmp_path):
    out = tmp_path / "k1"
    code = main(_quick(out, "--K", "1", bounds=("sgd", "local_sgd_noniid")))
    assert code == 0
    rep = json.loads((out / "results.json").read_text())
    assert {r["K"] for r in rep["results"] if r["verdict"] != V.NOT_VERIFIABLE} == {1}


@pytest.mark.parametrize("noise", ["none", "finite_sum", "rademacher"])
def test_noise_models(tmp_path, noise):
    out = tmp_path / noise
    code = main(_quick(out, "--noise", noise, problems=("quadratic", "robust_regression")))
    assert code == 0
    rep = json.loads((out / "results.json").read_text())
    assert {r["noise"] for r in rep["results"]} == {noise}
    assert all(r["verdict"] in (V.HOLDS, V.OUTSIDE) for r in rep["results"])


def test_help_documents_exit_codes(capsys):
    assert main(["verify", "--help"]) == 0
    text = capsys.readouterr().out
    assert "exit codes" in text and "--declare" in text and "--quick" in text


@pytest.mark.slow
def test_default_main_job(tmp_path, capsys):
    """The embedded default run (the main job): every file, no violated bound but the
    known findings."""
    out = tmp_path / "verify"
    code = main(["verify", "--out", str(out), "--no-progress"])
    text = capsys.readouterr().out
    rep = json.loads((out / "results.json").read_text())
    assert code == rep["summary"]["exit_code"]
    assert code == FOUND_CODE, text
    _only_the_findings(rep)
    assert sorted(p.name for p in out.iterdir()) == sorted(REPORT_FILES)
    assert not rep["summary"]["exact_vs_mc_disagreements"]
    tested = rep["summary"]["counts"]
    assert tested[V.HOLDS] > 0 and tested[V.OUTSIDE] > 0


def test_torch_backend_for_the_monte_carlo_part(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "torch"
    code = main(_quick(out, "--backend", "torch", bounds=("easgd",), problems=("cosine",)))
    assert code == 0
    rep = json.loads((out / "results.json").read_text())
    assert rep["settings"]["backend"] == "torch"
    assert any(r["verdict"] == V.HOLDS for r in rep["results"])


def test_device_needs_the_torch_backend(tmp_path, capsys):
    assert main(_quick(tmp_path / "d", "--device", "cuda")) == 2
    assert "'device' needs backend 'torch'" in capsys.readouterr().err


def test_sizes_too_large_for_memory_are_refused_before_any_work(tmp_path, capsys):
    """--d 1e11 is refused up front with the flags to lower, nothing is written."""
    out = tmp_path / "v"
    assert main(["verify", "--d", "100000000000", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--d" in err and "memory" in err and "Traceback" not in err
    assert not out.exists()
