"""``palsgd probe``: estimate L, sigma^2, zeta^2 and F0 on a real model, then set a run's
measured rate against the encoded bounds.

The objective
-------------
A run trains on ``K`` shards ``S_1..S_K`` of a training split (the run's own sharding:
:func:`empirical.data.shard_indices` with its ``iid`` setting, epoch 0). With per-sample
losses ``l_i(x)``, worker k's objective is ``f_k = mean_{i in S_k} l_i`` and
``f = (1/K) sum_k f_k`` (assumptions A1-A4, ``theory.assumptions``). Large shards are
subsampled: the *probe set* ``P_k`` is a seeded uniform subset of ``m_k`` samples of
``S_k`` (``m_k = |S_k|`` when the shard is small enough, and every estimate below is then
exact for the run's data). Every gradient is of ``f_P = (1/K) sum_k mean_{i in P_k} l_i``.
The model is evaluated in eval mode (no dropout, BatchNorm with running statistics), so
``f`` is a deterministic function of the parameters. A language-model sample is one
sequence and its loss is the mean next-token cross entropy over its targets.

Estimators (one set per trajectory point ``x``: the initial model and checkpoints)
---------------------------------------------------------------------------------
* **L** (A1). ``||H v||`` after power iteration (Golub and Van Loan, *Matrix
  Computations*, 4th ed., section 7.3.1) on Hessian-vector products computed by double
  backward (Pearlmutter, "Fast exact multiplication by the Hessian", Neural Computation
  6(1), 1994) of the mean loss over a fixed batch of ``--hvp-samples`` probe samples. For a
  unit vector ``||Hv|| <= ||H||_2``, so each value is a lower estimate of the local spectral
  norm; the maximum over points is a *local lower estimate* of the global ``L``. A small
  batch biases ``lambda_max`` up (``lambda_max`` is convex, so by Jensen
  ``E lambda_max(H_batch) >= lambda_max(E H_batch)``). The secant
  ``||grad f_P(x_j) - grad f_P(x_{j-1})|| / ||x_j - x_{j-1}||`` between consecutive points
  is a rigorous lower bound of the smoothness constant of ``f_P``.
* **sigma^2** (A2). ``n_k`` per-sample gradients per shard, drawn without replacement from
  ``P_k``; ``d_i = ||g_i - grad f_k||^2`` has mean exactly the population variance over
  ``P_k`` (the shard gradient is computed exactly over ``P_k``). The CI is a Student-t
  interval with the finite-population correction ``(m_k - n_k)/(m_k - 1)`` (Cochran,
  *Sampling Techniques*, 3rd ed., 1977, Theorem 2.2); the factor
  ``m_k/(m_k - 1) * (|S_k| - 1)/|S_k|`` turns the variance over ``P_k`` into an unbiased
  estimate of the variance over ``S_k``. i.i.d. runs pool the shards around ``grad f``
  (a worker's epoch shard is a fresh uniform subset); non-i.i.d. runs take the largest
  shard value (A2 holds for every k). The noise of one step's gradient, the mean of
  ``b = A*B`` distinct samples of a population of ``N`` (``N = |S|`` i.i.d., ``|S_k|``
  non-i.i.d.), is ``sigma_1^2 / b * (N - b)/(N - 1)`` (Cochran, Theorem 2.2); that value
  feeds the bound.
* **zeta^2** (A3). ``raw = (1/K) sum_k ||g_k - g||^2`` with the probe-set shard gradients
  ``g_k`` and ``g = mean_k g_k``. When ``g_k = grad f_k + e_k`` with independent zero-mean
  errors of variance ``v_k = sigma_k^2/m_k * (|S_k| - m_k)/(|S_k| - 1)``,
  ``E raw = zeta^2 + (1 - 1/K) (1/K) sum_k v_k`` (expand ``e_k - mean_j e_j``); the probe
  subtracts that noise term (estimated from the per-sample gradients) and clips at 0.
  The noise is zero when ``P_k = S_k``. For i.i.d. runs the theory's ``zeta`` is 0 by
  construction (each epoch reshuffles the shards); the measured heterogeneity of the
  epoch-0 shards is reported as a consistency check and is not fed to the bound.
* **F0** (A4). ``f(x0)`` over the probe set (with its standard error) minus a lower
  bound ``f_lower`` of the loss (0 for cross entropy) feeds the bound: ``f_lower <= f_star``
  makes it a valid upper estimate of the gap. ``f(x0)`` minus the best loss the run reached
  is reported too; it can be smaller than the true gap.
* **measured rate**. ``||grad f_P(xbar_t)||^2`` at the workers' average model
  ``xbar_t = mean_k x_k`` of each checkpoint (noise-corrected by ``Var(g) =
  (1/K^2) sum_k v_k``), averaged over the local phase ``[T0, T)`` as a left Riemann sum over
  the recorded steps. The trainer does not record gradient norms, so this is always a
  replay of checkpoints; it is one realisation of a random trajectory, the bounds are on
  the expectation.

The constants and the run's hyperparameters go to :func:`theory.check.check`; the report
lists every way in which the run is outside the theory (inner AdamW or momentum, weight
decay, Nesterov/SGD outer steps, clipping, shared coins, the authors' code's quirks) and
shows the numbers anyway, as an indication.

CLI: ``palsgd probe [--run DIR | --model NAME --dataset NAME ...] [--points N]
[--samples N] [--out DIR] [--json]``; see :func:`add_arguments`. Without ``--run`` it
first trains a short PALSGD run (inner SGD, outer averaging, no clipping: inside the
theory unless ``--train-preset``/``--train-config`` choose otherwise). Writes
``probe.json`` and ``points.csv`` to ``--out``. Exit 0 on success, 2 on bad input.

Files:

* ``settings.py``: :class:`ProbeSettings`, :class:`SamplingPlan`, :func:`make_plan`.
* ``problem.py``: per-sample losses, flat parameters, :class:`ProbeProblem`.
* ``gradients.py``: shard and per-sample gradients, Hessian-vector products, power iteration.
* ``estimate.py``: :class:`PointEstimate` and :func:`estimate_point` (one point).
* ``trajectory.py``: :func:`probe_points`, :func:`aggregate`, :func:`measured_rate`.
* ``compare.py``: :func:`theory_scope`, :func:`theory_values`, :func:`compare_with_theory`.
* ``runs.py``: :func:`load_run`, :func:`run_problem`, :func:`run_points`,
  :func:`train_reference_run`.
* ``report.py``: :func:`probe_run`, :func:`render`, :func:`write_outputs`.
* ``options.py``: the options of ``palsgd probe`` as :class:`~core.options.Option`
  records (:data:`~empirical.probe.options.OPTIONS`) and :func:`add_arguments`.
* ``cli.py``: :func:`run` (``palsgd probe``), the checks of the options' values.
* ``__main__.py``: ``python -m empirical.probe``, the same as ``palsgd probe``.
"""

from __future__ import annotations

from core.lazy import lazy_exports

# lazy (core.lazy): `palsgd probe --help` builds its parser (options.py) without importing torch
# and scipy, which the modules below need
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.probe.cli": ("run",),
        "empirical.probe.options": ("OPTIONS", "add_arguments"),
        "empirical.probe.compare": (
            "compare_with_theory",
            "theory_scope",
            "theory_values",
            "warmup_steps",
        ),
        "empirical.probe.estimate": (
            "PointEstimate",
            "estimate_point",
            "step_noise_factor",
            "_t_quantile",
        ),
        "empirical.probe.gradients": (
            "PowerIteration",
            "make_hvp",
            "mean_loss_and_gradient",
            "per_sample_gradients",
            "power_iteration",
            "sample_gradient",
        ),
        "empirical.probe.problem": (
            "ProbeProblem",
            "SampleLoss",
            "get_flat",
            "image_sample_losses",
            "lm_sample_losses",
            "sample_loss_for_task",
            "set_flat",
            "trainable_parameters",
        ),
        "empirical.probe.report": (
            "probe_run",
            "render",
            "write_outputs",
        ),
        "empirical.probe.runs": (
            "RunInfo",
            "load_run",
            "run_points",
            "run_problem",
            "train_reference_run",
        ),
        "empirical.probe.settings": (
            "ProbeSettings",
            "SamplingPlan",
            "make_plan",
        ),
        "empirical.probe.trajectory": (
            "POINT_FIELDS",
            "ProbeResult",
            "aggregate",
            "measured_rate",
            "probe_points",
        ),
    },
)

__all__ = [
    "ProbeSettings",
    "ProbeProblem",
    "SamplingPlan",
    "PowerIteration",
    "PointEstimate",
    "ProbeResult",
    "RunInfo",
    "lm_sample_losses",
    "image_sample_losses",
    "sample_loss_for_task",
    "trainable_parameters",
    "get_flat",
    "set_flat",
    "make_plan",
    "mean_loss_and_gradient",
    "sample_gradient",
    "per_sample_gradients",
    "make_hvp",
    "power_iteration",
    "estimate_point",
    "probe_points",
    "measured_rate",
    "theory_scope",
    "theory_values",
    "compare_with_theory",
    "load_run",
    "run_problem",
    "run_points",
    "train_reference_run",
    "probe_run",
    "OPTIONS",
    "add_arguments",
    "run",
    "POINT_FIELDS",
    "render",
    "write_outputs",
    "aggregate",
    "step_noise_factor",
    "warmup_steps",
    "SampleLoss",
]
