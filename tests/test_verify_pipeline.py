"""The typed pipeline of ``palsgd verify`` (:mod:`theory.verify.pipeline`): oracles are
interchangeable parts found by name, a new oracle is one class registered in one place, and
a false bound is rejected through ``design -> measure -> judge``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from theory import bounds as registry
from theory.verify import pipeline
from theory.verify.oracle import evaluate, family_of, parse_design
from theory.verify.pipeline import Design, Measurement, Oracle

#: deterministic gradient descent on one eigendirection (K = 1, no noise, no heterogeneity)
GD = ("L=1 lam_F=1 F0=1 T=10 alpha=1", "L=2 lam_F=2 F0=1 T=7 alpha=0.2",
      "L=0.5 lam_F=0.5 F0=3 T=40 alpha=1.5", "L=4 lam_F=1 F0=0.5 T=100 alpha=0.25")  # fmt: skip


def _gd_design(bound) -> Design:
    parts = [parse_design(t) for t in GD]
    d = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return Design(family_of(bound).spec, "quadratic", d, bound=bound)


class GradientDescentOracle:
    """A toy oracle: the closed form of deterministic gradient descent on one eigendirection,
    ``(1/T) sum_{t<T} lam^2 (1 - alpha lam)^(2t) y0^2`` with ``y0^2 = 2 F0 / lam``."""

    name = "toy_gd"

    def measure(self, design: Design) -> Measurement:
        d = design.params
        lam, a, T = d["lam_F"], d["alpha"], d["T"].astype(int)
        c = (1 - a * lam) ** 2
        mean = np.array([np.mean(ci ** np.arange(t)) for ci, t in zip(c, T, strict=True)])
        y = 2 * lam * d["F0"] * mean
        return Measurement(self.name, design, y, ~np.isfinite(y), companions={"initial": y})


def test_builtin_oracles_and_judges_are_found_by_name():
    for name in pipeline.BUILTIN_ORACLES:
        assert isinstance(pipeline.oracle(name), Oracle)
        assert pipeline.oracle(name).name == name
    assert pipeline.judge_named("exact").name == "exact"
    with pytest.raises(Exception, match="unknown oracle"):
        pipeline.oracle("nope")


def test_a_new_oracle_is_one_class_registered_in_one_place(monkeypatch):
    """The toy oracle, registered once, runs through the measure stage and agrees with the
    exact quadratic oracle; put in the place of the exact oracle, the exact stage's code
    path (:func:`theory.verify.oracle.evaluate`) measures with it."""
    monkeypatch.setattr(pipeline, "ORACLES", dict(pipeline.ORACLES))
    pipeline.register_oracle(GradientDescentOracle)
    bound = registry.get("sgd")
    design = _gd_design(bound)
    toy = pipeline.measure(design, "toy_gd")
    exact = pipeline.measure(design, "exact")
    assert toy.oracle == "toy_gd" and exact.oracle == "exact"
    np.testing.assert_allclose(toy.measured, exact.measured, rtol=1e-10)
    verdict = pipeline.judge(bound, toy)
    assert verdict.verdict == "not shown false" and verdict.worst_ratio == pytest.approx(1.0)

    class Doubled(GradientDescentOracle):
        name = "exact"

        def measure(self, design: Design) -> Measurement:
            m = super().measure(design)
            return dataclasses.replace(m, measured=2 * m.measured)

    pipeline.register_oracle(Doubled)
    ev = evaluate(bound, family_of(bound), design.params)
    np.testing.assert_allclose(ev.measured, 2 * exact.measured, rtol=1e-10)


def test_an_oracle_without_measure_is_refused():
    class NoMeasure:
        name = "broken"

    with pytest.raises(TypeError):
        pipeline.register_oracle(NoMeasure)


@pytest.mark.parametrize("factor", [0.5, 0.9])
def test_a_false_bound_is_rejected_through_the_pipeline(factor):
    """The SGD bound is attained by gradient descent at ``alpha L = 1`` (ratio 1); scaled by
    0.5 (or the 0.9 of the negative controls, :mod:`theory.verify.controls`) it is false,
    and design -> measure -> judge says so; the true bound is not shown false."""
    bound = registry.get("sgd")
    false = dataclasses.replace(
        bound, name=f"sgd~scaled[{factor}]", expression=bound.expression * factor
    )
    m = pipeline.measure(_gd_design(bound), "exact")
    true_verdict = pipeline.judge(bound, m)
    false_verdict = pipeline.judge(false, m)
    assert true_verdict.verdict == "not shown false"
    assert true_verdict.worst_ratio == pytest.approx(1.0)
    assert false_verdict.verdict == "violated"
    assert false_verdict.worst_ratio == pytest.approx(1 / factor)


def test_monte_carlo_oracle_measures_one_value_per_replica():
    from theory import problems
    from theory.verify.oracle_montecarlo import design_of
    from theory.verify.settings import Config

    prob = problems.make_problem("quadratic", K=2, d=3, noise="gaussian", sigma=1.0, seed=0)
    cfg = Config(bound="sgd", problem="quadratic", algorithm="sgd", K=2, T=8, alpha=0.1, seed=1)
    m = pipeline.measure(design_of(prob, cfg, 5), "monte_carlo")
    assert m.measured.shape == (5,) and not m.exact and np.all(np.isfinite(m.measured))
    again = pipeline.measure(design_of(prob, cfg, 5), "monte_carlo")
    np.testing.assert_array_equal(m.measured, again.measured)  # the configuration's seed


def test_a_new_stage_is_one_entry_of_the_stage_loop(monkeypatch):
    """The stage loop runs the enabled stages of ``STAGES`` in order, a registered one too."""
    from theory.verify import stages
    from theory.verify.context import RunContext, Stage
    from theory.verify.sampling import ProblemCache
    from theory.verify.settings import VerifySettings

    ran = []
    fake = [Stage(n, lambda ctx, n=n: ran.append(n)) for n in ("exact", "lower", "monte_carlo")]
    monkeypatch.setattr(stages, "STAGES", fake)
    stages.register_stage(Stage("toy", lambda ctx: ran.append("toy")), before="monte_carlo")
    stages.register_stage(Stage("off", lambda ctx: ran.append("off"), lambda ctx: False))
    settings = VerifySettings(quick=True)
    stages.run_stages(RunContext(settings, [], [], ProblemCache(settings), progress=False))
    assert ran == ["exact", "lower", "toy", "monte_carlo"]
