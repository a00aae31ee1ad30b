"""The paper's gains beside the cost model's, split by mechanism."""

import pytest

from empirical.cost.mechanisms import PROFILES, mechanism_table
from empirical.cost.paper import PAPER_REPORTED, SETTINGS


def test_the_parts_add_up_to_the_prediction_and_shared_coins_never_wait():
    rows = mechanism_table()
    assert len(rows) == len(SETTINGS) * len(PROFILES) * 2
    for r in rows:
        parts = (r["compute_skipped"] + r["fewer_syncs"] + r["straggler_wait"]
                 + r["pull_and_outer_cost"] + r["the_pull_itself"])  # fmt: skip
        assert parts == pytest.approx(r["model_predicted"], abs=1e-9)
        assert r["paper_reported"] == PAPER_REPORTED[r["setting"]]
        if r["coins"] == "shared":
            assert r["straggler_wait"] == 0
        assert r["compute_skipped"] > 0 and r["the_pull_itself"] == 0
    by = {(r["setting"], r["profile"], r["coins"]): r["model_predicted"] for r in rows}
    for s in SETTINGS:
        for prof in PROFILES:
            assert by[s, prof, "shared"] >= by[s, prof, "independent"]
