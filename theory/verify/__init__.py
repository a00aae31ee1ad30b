"""Verification of the encoded convergence bounds (``palsgd verify``).

A bound states ``(1/T) sum_{t<T} E||grad f(xbar_t)||^2 <= B(...)`` under step-size
conditions, for the algorithm spec it holds (:attr:`theory.bound.Bound.algorithm`: kind,
coin model, outer updates); the verifier simulates exactly that spec with each design's
hyperparameters (:func:`~theory.verify.sampling.bound_spec`), never guessing it from the
formula. The run is a straight line, one file per role:

* :mod:`~theory.verify.settings`: verdict labels, report columns, :class:`VerifySettings`;
* :mod:`~theory.verify.designs`: term-isolating designs on quadratics, each a single source
  (initial gap, noise or heterogeneity) on one eigendirection;
* :mod:`~theory.verify.oracle`: the exact measured value of a design
  (:mod:`theory.moments.oracle`) and the bound's value, terms and conditions;
* :mod:`~theory.verify.search`: adversarial search of measured/bound inside the conditions;
* :mod:`~theory.verify.exact`: the exact verdict, per-term tightness, vacuous share and the
  worst case of one bound;
* :mod:`~theory.verify.pinned`: bounds stated at one step (designs take that step);
* :mod:`~theory.verify.hetero`: the second exact oracle, heterogeneous two-curvature
  instances (:mod:`theory.lower.hetero`), for every bound whose assumptions admit
  heterogeneous workers;
* :mod:`~theory.verify.controls`: false variants of a bound and the detection power;
* :mod:`~theory.verify.lower`, :mod:`~theory.verify.lower_designs`,
  :mod:`~theory.verify.lower_witness`: lower bounds verified against their own instances
  (exact, by the verifier's own code) and the known worst case of the class, with their
  controls; :mod:`~theory.verify.crossings`: an upper bound below a lower bound, settled by
  the exact oracle;
* :mod:`~theory.verify.findings`: the known findings (published statements the verifier is
  expected to refute), checked to still reproduce; they set the exit code;
* :mod:`~theory.verify.sampling`, :mod:`~theory.verify.montecarlo`,
  :mod:`~theory.verify.stats`: Monte-Carlo tests where no exact recursion exists
  (nonconvex problems, EASGD);
* :mod:`~theory.verify.checks`, :mod:`~theory.verify.agreement`: rate in ``T``, speed-up in
  ``K``, exact vs Monte Carlo, consensus vs ``H``;
* :mod:`~theory.verify.run`, :mod:`~theory.verify.stages`, :mod:`~theory.verify.report`,
  :mod:`~theory.verify.plots`, :mod:`~theory.verify.cli`: the main job (its exact stages),
  its report files and the command line; the bounds and problems are resolved once (by the
  command line, before anything is written) and passed to the run;
* :mod:`~theory.verify.pipeline`: the contract of the stages, ``plan -> designs -> measure
  -> judge -> report``: :class:`~theory.verify.pipeline.Design`,
  :class:`~theory.verify.pipeline.Measurement`, the ``Oracle`` and ``Judge`` protocols and
  their registries; the oracles :mod:`~theory.verify.oracle_exact`,
  :mod:`~theory.verify.oracle_hessians`, :mod:`~theory.verify.oracle_montecarlo`,
  :mod:`~theory.verify.oracle_class` and the judge :mod:`~theory.verify.judge_exact`;
  :mod:`~theory.verify.records`: the typed rows of the report tables;
  :mod:`~theory.verify.context`: the run's state; :mod:`~theory.verify.stage_montecarlo`:
  the Monte-Carlo stage; :mod:`~theory.verify.report_edge`: records to rows, once
  (``docs/verify_pipeline.md``);
* :mod:`~theory.verify.report_types`: the typed report, :class:`VerifyReport` with its
  sections (:class:`Power`, :class:`Statistics`, :class:`Summary`), serialised to
  ``results.json`` in one place (:meth:`VerifyReport.to_json`).

Files: ``settings.py`` (settings, verdicts, columns), ``designs.py``, ``oracle.py``,
``search.py``, ``exact.py``, ``exact_report.py`` (exact verification on quadratics),
``pinned.py`` (bounds stated at one step), ``hetero.py`` (heterogeneous instances),
``controls.py`` (negative controls), ``lower.py``, ``lower_designs.py``,
``lower_witness.py`` (lower bounds), ``crossings.py`` (contradictions), ``findings.py``
(known findings), ``bound_file.py``, ``bound_file_lower.py`` (user bounds, upper and lower),
``untested.py`` (a bound no design tested: its verdict and exit code 6), ``at.py`` (one
design), ``sampling.py``,
``montecarlo.py``, ``stats.py``, ``checks.py``, ``agreement.py`` (Monte Carlo on nonconvex
problems, rates, speed-up, exact vs Monte Carlo), ``run.py`` (the whole run), ``stages.py``
(its exact stages), ``report_types.py`` (the typed report), ``report.py``, ``plots.py``,
``plots_exact.py``, ``classstage.py``, ``class_report.py`` (the class stage: every bound
against the worst case over its class, :mod:`theory.worstcase`), ``combined.py``,
``joint.py``, ``hetero_designs.py`` (the joint gap + heterogeneity and noise stages),
``options.py`` (the command's flags and settings), ``cli.py`` (the command),
``pipeline.py``, ``oracle_exact.py``, ``oracle_hessians.py``, ``oracle_montecarlo.py``,
``oracle_class.py``, ``judge_exact.py`` (the measure and judge stages), ``records.py``,
``context.py``, ``stage_montecarlo.py``, ``report_edge.py``, ``progress.py`` (the typed
pipeline, ``docs/verify_pipeline.md``).
"""

# ruff: noqa: F405 (the names of __all__ below the settings' are lazy_exports')
from core.lazy import lazy_exports
from theory.verify import settings
from theory.verify.settings import *  # noqa: F403 (the names of settings.__all__)

# lazy (core.lazy): `palsgd verify --help` builds its parser from the settings without
# importing sympy and scipy, which the modules below need
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "theory.verify.agreement": (
            "consensus_vs_H",
            "exact_specs",
            "exact_vs_mc",
        ),
        "theory.verify.checks": (
            "leading_exponent",
            "rate_check",
            "speedup_check",
        ),
        "theory.verify.montecarlo": ("verify_configs",),
        "theory.verify.report": (
            "AtomicDirectory",
            "format_summary",
            "format_table",
            "summary_of",
            "write_report",
            "write_report_files",
        ),
        "theory.verify.report_types": (
            "Power",
            "Statistics",
            "Summary",
            "VerifyReport",
        ),
        "theory.verify.run": (
            "resolve_bounds",
            "resolve_problems",
            "run_verification",
        ),
        "theory.verify.sampling": (
            "ProblemCache",
            "apply_declared_constants",
            "bound_spec",
            "bound_values",
            "problem_constants",
            "sample_configs",
        ),
        "theory.verify.stats": (
            "BootstrapPlan",
            "Correction",
            "MeanTest",
            "RateFit",
            "correct",
            "decide",
            "fit_power_law",
            "mean_test",
        ),
    },
)

__all__ = [
    *settings.__all__,
    "BootstrapPlan",
    "MeanTest",
    "mean_test",
    "Correction",
    "correct",
    "decide",
    "RateFit",
    "fit_power_law",
    "bound_spec",
    "sample_configs",
    "verify_configs",
    "run_verification",
    "write_report",
    "format_table",
    "summary_of",
    "apply_declared_constants",
    "bound_values",
    "problem_constants",
    "leading_exponent",
    "ProblemCache",
    "AtomicDirectory",
    "rate_check",
    "speedup_check",
    "exact_vs_mc",
    "exact_specs",
    "consensus_vs_H",
    "write_report_files",
    "VerifyReport",
    "Power",
    "Statistics",
    "Summary",
    "format_summary",
    "resolve_bounds",
    "resolve_problems",
]
