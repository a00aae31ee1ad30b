"""A variant of the algorithm table (SlowMo over Local SGD) is accepted wherever an algorithm
is: palsgd check, palsgd cost, palsgd train; and each name means one thing (VARIANTS: the
table's compositions; PRESETS: the named settings of theory.presets; TRAIN_PRESETS: the
trainer's configurations)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import empirical.config
import theory.algorithm
from core.errors import UserInputError
from empirical.cost.paper import paper_scale_prediction
from theory.algorithm import VARIANTS, distributed_choices, local_choices
from theory.check.evaluate import ALGORITHMS, check

BASE = {"L": 1.0, "sigma": 1.0, "zeta": 0.5, "F0": 1.0, "K": 4, "H": 8, "T": 1000}


def test_every_variant_is_a_choice_of_check_cost_and_train():
    for name in VARIANTS:
        assert name in ALGORITHMS and name in local_choices() and name in distributed_choices()


def test_check_runs_a_variant_as_its_base_with_the_variants_outer_settings():
    report = check(BASE, algorithm="slowmo")
    assert report.algorithm == "slowmo"
    assert report.inputs["mu"] == 0.5 and report.inputs["gamma"] == 1.0
    covered = [c.name for c in report.bounds if c.status == "evaluated"]
    assert covered == ["local_sgd_outer"]  # the averaging bounds do not cover mu = 0.5
    given = check({**BASE, "mu": 0.2}, algorithm="slowmo")  # a given value wins
    assert given.inputs["mu"] == 0.2
    plain = check(BASE, algorithm="local_sgd")  # negative control: no outer momentum
    assert "local_sgd_outer" not in [c.name for c in plain.bounds if c.status == "evaluated"]


def test_cost_predicts_a_variant_at_its_bases_per_step_costs():
    slowmo = paper_scale_prediction("gptneo-8m-tinystories", "64xGPU-100Gbps", method="slowmo")
    diloco = paper_scale_prediction("gptneo-8m-tinystories", "64xGPU-100Gbps", method="diloco")
    assert slowmo["predicted_time_reduction"] == pytest.approx(diloco["predicted_time_reduction"])
    with pytest.raises(UserInputError, match="unknown method 'slowmo_typo'"):
        paper_scale_prediction("gptneo-8m-tinystories", "64xGPU-100Gbps", method="slowmo_typo")


def test_the_command_lines_take_the_variant():
    run = [sys.executable, "-m", "palsgd"]
    out = subprocess.run(
        [
            *run,
            "check",
            "--algorithm",
            "slowmo",
            "--json",
            *(f"--{k}={v}" for k, v in BASE.items()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["algorithm"] == "slowmo"
    bad = subprocess.run(
        [*run, "check", "--algorithm", "slowmo_typo", "--L", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "slowmo_typo" in bad.stderr and "Traceback" not in bad.stderr


def test_one_meaning_per_name():
    assert not hasattr(theory.algorithm, "PRESETS") and not hasattr(theory.algorithm, "Preset")
    assert not hasattr(empirical.config, "PRESETS")
    assert set(empirical.config.TRAIN_PRESETS) and set(VARIANTS) == {"slowmo"}


def test_the_map_tunes_a_variant_with_its_own_outer_momentum():
    """``palsgd map --methods local_sgd slowmo``: SlowMo is tuned like Local SGD but runs its
    heavy-ball outer step (mu = 0.5); its tuned rounds are the exact engine's at the tuned
    configuration with that momentum, and a plain outer SGD step there (mu = 0, Local SGD's
    rule: the negative control) gives other rounds. The default methods do not include it."""
    import numpy as np

    from theory.compare import Grid, MapSpec, ProblemSource, run_map
    from theory.compare.exact import Quadratic, exact_rounds
    from theory.compare.methods import BASELINES, DEFAULT_METHODS, METHODS

    assert "slowmo" not in DEFAULT_METHODS and "slowmo" in BASELINES
    spec = MapSpec(H=(16,), eta=(2.0,), p=(0.5,), zeta=(1.0,), eps=(0.05,),
                   budgets={"rounds": 5e3}, methods=("local_sgd", "slowmo"),
                   grid=Grid(n_alpha=6, n_outer=3))  # fmt: skip
    res = run_map(spec, bounds=False, tuned_points=False)
    (cell,) = res.cells
    t = cell.tuned["slowmo"]
    assert t["mu"] == 0.5 and t["rounds"]
    q = Quadratic.of(ProblemSource().build(1.0))
    one = np.ones(1)

    def rounds(method: str) -> int:
        r = exact_rounds(
            q, METHODS[method], H=16, eta=2 * one, p=0.5 * one, alpha=t["alpha"] * one,
            gamma=t["gamma"] * one, eps=np.array([0.05]), cap=np.array([5000]),
            group=np.zeros(1, dtype=int), sustained=True,
        )[0]  # fmt: skip
        return int(np.asarray(r).reshape(-1)[0])

    assert rounds("slowmo") == t["rounds"]
    assert rounds("local_sgd") != t["rounds"]
