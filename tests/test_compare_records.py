"""The map's typed records round-trip to what is written: every field of a CSV row is a
column of map.csv, a cell rebuilt from its map.json object equals the cell, and the summary
records read like the summary written."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import fields

import pytest

from core.io import from_json_safe, json_safe
from theory.compare.records import CellResult, CellRow, MethodColumns
from theory.compare.run import run_map
from theory.compare.spec import MapSpec
from theory.compare.summary import summarize
from theory.compare.summary_records import Fewest, RatioStats, Verdicts
from theory.compare.tune import Grid

TINY = dict(
    H=(4, 16), eta=(5.0,), p=(0.5,), zeta=(1.0,), eps=(0.05,),
    budgets={"grads": 2e4, "rounds": 300}, methods=("sgd", "local_sgd", "palsgd"),
    grid=Grid(n_alpha=4, n_outer=2, max_extend=0),
)  # fmt: skip


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("map")
    res = run_map(MapSpec(**TINY), tuned_points=False)
    res.write(out / "map.json", out / "map.csv")
    return res, json.loads((out / "map.json").read_text()), (out / "map.csv").read_text()


def _written(value):
    """``value`` as the JSON writer leaves it, read back."""
    return from_json_safe(json.loads(json.dumps(json_safe(value))))


def test_every_field_of_a_row_is_a_column_of_the_csv(written):
    res, _, text = written
    header = next(csv.reader(text.splitlines()))
    scalar = [f.name for f in fields(CellRow) if f.name not in ("methods", "bound_columns")]
    per_method = [f.name for f in fields(MethodColumns) if f.name not in ("method", "interval")]
    for c in res.cells:
        row = c.row()
        expected = set(scalar)
        expected |= {f"{f}_{m.method}" for m in row.methods for f in per_method}
        expected |= {
            f"{f}_{m.method}" for m in row.methods if m.interval for f in ("cost_lo", "cost_hi")
        }
        expected |= {f"bound_{k}" for k in row.bound_columns}
        assert expected <= set(header), expected - set(header)
        assert set(row.to_dict()) == expected  # no column that is not a field
    assert "bound_ratio" in header  # the bound map was scored
    # each row written is the record's dict, value for value
    for c, line in zip(res.cells, csv.DictReader(text.splitlines()), strict=True):
        want = {k: "" if v is None else str(json_safe(v)) for k, v in c.row().to_dict().items()}
        assert {k: line[k] for k in want} == want


def test_a_cell_rebuilt_from_its_json_object_equals_the_cell(written):
    res, data, _ = written
    assert len(data["cells"]) == len(res.cells)
    for c, obj in zip(res.cells, data["cells"], strict=True):
        back = CellResult.from_dict(from_json_safe(obj))
        assert back == c
        assert back.to_dict()["winner"] == obj["winner"] and back.ratio == c.ratio


def test_intervals_and_infinities_round_trip():
    c = CellResult(
        H=8, eta=1.0, p=0.5, zeta=None, eps=0.1, budget="rounds", B=9.0,
        cost={"palsgd": 3.0, "local_sgd": None}, rounds={"palsgd": 3, "local_sgd": None},
        tuned={}, intervals={"palsgd": (2.0, math.inf), "local_sgd": None},
    )  # fmt: skip
    assert CellResult.from_dict(_written(c.to_dict())) == c
    cols = c.row().to_dict()
    assert cols["cost_lo_palsgd"] == 2.0 and cols["cost_hi_palsgd"] == math.inf
    assert cols["cost_lo_local_sgd"] is None and "bound_ratio" not in cols
    assert list(cols)[7:13] == [
        "cost_palsgd", "cost_lo_palsgd", "cost_hi_palsgd", "rounds_palsgd", "alpha_palsgd",
        "gamma_palsgd",
    ]  # fmt: skip


def test_the_summary_records_read_like_the_summary_written(written):
    res, data, _ = written
    s = res.summary
    assert _written(s.to_dict()) == data["summary"]
    assert s["verdicts"] == data["summary"]["verdicts"] == s.verdicts.to_dict()
    assert dict(s.verdicts) == s.verdicts.to_dict()
    assert Verdicts(**data["summary"]["verdicts"]) == s.verdicts
    assert tuple(Fewest(**f) for f in data["summary"]["fewest_rounds"]) == s.fewest_rounds
    g = s.groups[0]
    assert set(data["summary"]["groups"][0]) == set(g)
    assert "palsgd_per_pull" in g["largest_H"] and "sgd_per_pull" not in g["largest_H"]
    assert s.agreement is not None and data["summary"]["agreement"]["cells"] > 0
    assert "why" in g  # the exact engine diagnoses the closest cell


def test_optional_fields_are_left_out_not_null():
    assert "min" not in RatioStats(cells=2, unreached_by_palsgd=2)
    assert RatioStats(cells=1, min=0.5, median=0.5, max=0.5).to_dict() == {
        "cells": 1, "min": 0.5, "median": 0.5, "max": 0.5, "unreached_by_palsgd": 0,
    }  # fmt: skip
    s = summarize([])
    assert "criterion" not in s and "agreement" not in s and s.cells == 0
