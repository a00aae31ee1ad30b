"""One list of presets for every command: ``palsgd check`` and ``palsgd train`` know the same
names, print the same list, and agree on the hyperparameters of the presets both run."""

from __future__ import annotations

import pytest

from empirical.config import TRAIN_PRESETS, resolve_config
from palsgd.cli import main
from theory.presets import PRESETS, preset_names, render_presets

#: theory name -> TrainConfig field
_FIELD = {"K": "nproc", "H": "H", "T0": "T0", "p": "p", "eta": "eta", "alpha": "alpha"}
_FIELD |= {"gamma": "gamma", "mu": "mu", "A": "A"}


def test_train_runs_every_preset_but_those_that_say_why_not():
    assert set(TRAIN_PRESETS) == set(preset_names("train"))
    for name in set(PRESETS) - set(TRAIN_PRESETS):
        assert PRESETS[name].not_trained and "train" not in PRESETS[name].commands


@pytest.mark.parametrize("name", sorted(TRAIN_PRESETS))
def test_shared_presets_agree_on_hyperparameters(name):
    cfg = resolve_config(preset=name)
    for key, value in PRESETS[name].values.items():
        field = _FIELD[key]
        if key == "K" and "nproc" not in TRAIN_PRESETS[name] and name != "tiny":
            continue  # the trainer runs the setting with --nproc workers (default 2)
        got = getattr(cfg, field)
        if got is not None:
            assert float(got) == pytest.approx(float(value)), (name, key)


@pytest.mark.parametrize("command", ["check", "train"])
def test_both_commands_list_the_same_presets(command, capsys):
    assert main([command, "--list-presets"]) == 0
    assert capsys.readouterr().out.strip() == render_presets().strip()


def test_a_check_only_preset_is_refused_by_train_with_the_reason(capsys):
    assert main(["train", "--preset", "authors-defaults-gptneo"]) == 2
    err = capsys.readouterr().err
    assert "palsgd check only" in err and "Adam" in err and "Traceback" not in err


def test_check_runs_a_train_preset(capsys):
    argv = ["check", "--preset", "tiny", "--L", "1", "--sigma", "1", "--zeta", "0.1"]
    assert main([*argv, "--F0", "1", "--T", "1000"]) == 0
    assert "(preset tiny)" in capsys.readouterr().out
