"""Every option of ``palsgd train`` is declared once, with its field
(:mod:`empirical.config.flags`, :mod:`empirical.config.fields`): a declaration is checked,
and every declared range, choice and rule on resume is the one the configuration and the
resume enforce."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from core.errors import UserInputError
from core.validation import ParameterError
from empirical.config import (
    CHOICES,
    FLAGS,
    TRAINER_PARAMS,
    TrainConfig,
    config_to_dict,
    resolve_config,
)
from empirical.config.flags import CHANGE, FREE, MATCH, Flag, Range
from empirical.resume import changed_hyperparameters, checkpoint_meta


def test_a_declaration_is_checked():
    assert Flag("x", resume=MATCH, match_default=None).match_default is None
    with pytest.raises(ValueError, match="resume rule"):
        Flag("x", resume="sometimes")
    with pytest.raises(ValueError, match="match_default"):
        Flag("x", resume=CHANGE, match_default=1)  # only a field a resume must match has one


def test_every_field_is_declared_with_help_and_a_resume_rule():
    assert [f.name for f in fields(TrainConfig)] == list(FLAGS)
    for name, d in FLAGS.items():
        assert len(d.help) > 5, name
        assert d.resume in (MATCH, FREE, CHANGE), name
        assert d.range is None or isinstance(d.range, Range), name


def _below(r: Range) -> float:
    """A value outside the range ``r`` (below it when it has a finite lower end)."""
    return r.low - 1 if math.isfinite(r.low) else r.high + 1


@pytest.mark.parametrize("name", sorted(TRAINER_PARAMS))
def test_every_declared_range_is_enforced(name):
    r = FLAGS[name].range
    with pytest.raises(ParameterError) as exc:
        resolve_config(overrides={name: _below(r)})
    assert exc.value.name == name
    if r.integer:
        with pytest.raises(UserInputError, match=name):
            resolve_config(overrides={name: r.low + 0.5})


@pytest.mark.parametrize("name", sorted(CHOICES))
def test_every_declared_choice_is_enforced(name):
    with pytest.raises(UserInputError, match=name.split("_")[-1]):
        resolve_config(overrides={name: "nonesuch"})
    for value in CHOICES[name]:  # every declared value is accepted (with what it needs)
        extra = {"dataset": "tokens"} if name == "token_dtype" and value != "auto" else {}
        if extra:
            continue  # the tokens dataset needs a file (tests/test_token_file.py)
        if name == "backend" and value == "nccl":
            extra = {"device": "cuda"}
        assert getattr(resolve_config(overrides={name: value, **extra}), name) == value


def _other(value):
    """A value unlike ``value`` (the resume checks compare values, not their validity)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value * 2 + 1
    if value is None:
        return "set"
    return str(value) + "-other"


@pytest.mark.parametrize("name", list(FLAGS))
def test_every_field_follows_its_rule_on_resume(name):
    """A checkpoint written with another value of the field: a hyperparameter shows as a
    change (refused unless allowed), a field a resume must match is in the manifest's
    comparison, and a free one is neither."""
    cfg = resolve_config()
    saved = config_to_dict(cfg)
    saved[name] = _other(saved[name])
    changed = changed_hyperparameters(cfg, {"config": saved})
    rule = FLAGS[name].resume
    assert set(changed) == ({name} if rule == CHANGE else set())
    assert (name in checkpoint_meta(cfg, 2)) == (rule == MATCH)
