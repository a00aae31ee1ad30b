"""Issue 27 item 5: the mechanism table at the map's own step ratio, every profile row with
the link each gain needs."""

import math

import pytest

from empirical.cost.mechanisms import PROFILES, format_mechanisms, link_needed_Gbps, mechanism_table
from empirical.cost.paper import SETTINGS, paper_scale_prediction
from empirical.cost.profiles import cluster_profile
from theory.compare import Grid, MapSpec, ProblemSource, run_map
from theory.compare.steps import step_ratio


def test_every_profile_row_with_the_link_its_gain_needs():
    rows = mechanism_table()
    assert {(r["setting"], r["profile"]) for r in rows} == {
        (s, cluster_profile(p).name) for s in SETTINGS for p in PROFILES
    }
    for r in rows:
        bw = r["link_needed_Gbps"]
        assert bw is not None and math.isfinite(bw)
        prof = cluster_profile(r["profile"])
        from empirical.cost.mechanisms import _with_bandwidth

        at = paper_scale_prediction(r["setting"], _with_bandwidth(prof, bw), coins=r["coins"])
        assert at["predicted_time_reduction"] == pytest.approx(r["paper_reported"], abs=1e-6)
        # a faster link than the needed one gives less than the paper's gain, a slower more
        gbps = prof.link.bandwidth_Bps * 8 / 1e9
        assert (r["model_predicted"] >= r["paper_reported"]) == (gbps <= bw)


def test_a_step_ratio_above_one_costs_the_pull_itself_and_a_slower_link():
    base = {(r["setting"], r["profile"], r["coins"]): r for r in mechanism_table()}
    for r in mechanism_table(step_ratio={"independent": 2.0, "shared": 1.5}):
        b = base[r["setting"], r["profile"], r["coins"]]
        assert r["step_ratio"] == (2.0 if r["coins"] == "independent" else 1.5)
        assert r["the_pull_itself"] < 0 and r["model_predicted"] < b["model_predicted"]
        need = r["link_needed_Gbps"]
        assert need is None or need < b["link_needed_Gbps"]


def test_unreachable_gain_is_none():
    assert link_needed_Gbps("gptneo-8m-tinystories", "64xGPU-100Gbps", coins="independent",
                            step_ratio=50.0) is None  # fmt: skip


def test_step_ratio_of_a_map_and_its_table():
    spec = MapSpec(H=(16,), eta=(5.0,), p=(0.5,), zeta=(1.0,), eps=(0.05,),
                   budgets={"rounds": 2e3}, grid=Grid(n_alpha=6, n_outer=2, max_extend=1))  # fmt: skip
    res = run_map(spec, ProblemSource(d=2), bounds=False)
    (c,) = res.cells
    got = step_ratio(res)
    best = min(c.rounds[n] for n in ("palsgd", "palsgd_nesterov") if c.rounds[n] is not None)
    assert got["independent"].median == pytest.approx(best * 16 / c.rounds["sgd"])
    assert got["shared"].median == pytest.approx(c.rounds["palsgd_shared"] * 16 / c.rounds["sgd"])
    text = format_mechanisms(got)
    assert text.count("\n| ") == len(SETTINGS) * len(PROFILES) * 2 + 1
    assert f"{got['independent'].median:.3g}" in text
