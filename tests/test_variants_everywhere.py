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
