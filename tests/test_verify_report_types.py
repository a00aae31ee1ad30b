"""The typed report of ``palsgd verify``: one serialisation, sections in a fixed order, and
the selection resolved once by the command line."""

from __future__ import annotations

import json
import math

import pytest

from core.errors import UserInputError
from palsgd.cli import main
from theory import verify as V
from theory.verify.report_types import Power, Statistics, VerifyReport

#: the order of results.json's sections (the files written before the report was typed)
SECTIONS = [
    "tool", "settings", "versions", "exact", "hetero", "hetero_skipped", "combined", "lower",
    "crossings",
    "findings", "tightness", "controls", "class_results", "class_designs", "power", "bounds", "constant_checks", "results",
    "rates", "speedup", "exact_vs_mc", "exact_vs_mc_summary", "consensus", "statistics",
    "elapsed_s", "summary", "columns",
]  # fmt: skip


def _report(**kw) -> VerifyReport:
    empty = {name: [] for name in ("exact", "hetero", "hetero_skipped", "lower", "crossings")}
    empty |= {name: [] for name in ("findings", "tightness", "controls", "bounds")}
    report = VerifyReport(
        settings=V.VerifySettings(),
        versions={"python": "3"},
        power=Power(),
        constant_checks=[],
        statistics=Statistics(correction="holm", family_wise_level=0.05),
        elapsed_s=1.5,
        **(empty | kw),
    )
    report.summary = V.summary_of(report)
    return report


def test_json_has_the_sections_in_order_and_cleans_values():
    rows = [{"bound": "b", "ratio": math.inf, "lcb": math.nan, "verdict": V.HOLDS}]
    text = _report(results=rows).to_json({"results.csv": ("bound", "ratio")})
    data = json.loads(text)
    assert list(data) == SECTIONS
    assert data["results"] == [{"bound": "b", "ratio": "inf", "lcb": None, "verdict": V.HOLDS}]
    # without a Monte-Carlo stage the statistics are the correction and the level only
    assert data["statistics"] == {"correction": "holm", "family_wise_level": 0.05}
    assert list(data["summary"])[:7] == [
        "exact_bounds", "exact_violated", "hetero_worst", "exact_worst", "vacuous_share",
        "untested_terms", "power",
    ]  # fmt: skip
    assert data["summary"]["exit_code"] == 0 and data["columns"] == {
        "results.csv": ["bound", "ratio"]
    }
    assert data["settings"]["seed"] == V.VerifySettings().seed


def test_a_table_is_named_or_refused():
    report = _report(results=[{"bound": "b"}])
    assert report.table("results") == [{"bound": "b"}]
    with pytest.raises(KeyError):
        report.table("summary")  # a section, not a table


def test_the_command_resolves_bounds_and_problems_once(tmp_path, monkeypatch, capsys):
    seen = {}
    resolved = []
    real = V.resolve_bounds

    def counting(*a, **k):
        resolved.append(a)
        return real(*a, **k)

    def stop(settings, **kw):
        seen.update(kw)
        raise UserInputError("stop here")

    monkeypatch.setattr(V, "resolve_bounds", counting)
    monkeypatch.setattr(V, "run_verification", stop)
    argv = ["verify", "--bounds", "sgd", "--problems", "quadratic", "--out", str(tmp_path / "r")]
    assert main([*argv, "--no-progress"]) == 2 and "stop here" in capsys.readouterr().err
    assert len(resolved) == 1
    assert [b.name for b in seen["bounds"]] == ["sgd"] and list(seen["problems"]) == ["quadratic"]
