"""Settings of a verification run: verdict labels, report columns, configurations."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.files import check_memory
from core.validation import check_number
from theory.algorithm import AlgorithmSpec
from theory.validation import validate_one

__all__ = [
    "VERDICTS",
    "HOLDS",
    "VIOLATED",
    "INCONCLUSIVE",
    "OUTSIDE",
    "NOT_VERIFIABLE",
    "CORRECTIONS",
    "RESULTS_COLUMNS",
    "RATES_COLUMNS",
    "EXACT_COLUMNS",
    "SPEEDUP_COLUMNS",
    "CONSENSUS_COLUMNS",
    "DEFAULT_PROBLEMS",
    "Config",
    "VerifySettings",
]

#: verdict labels
HOLDS, VIOLATED, INCONCLUSIVE = "holds", "violated", "inconclusive"
OUTSIDE = "outside conditions"
NOT_VERIFIABLE = "not verifiable here"
VERDICTS = (HOLDS, VIOLATED, INCONCLUSIVE, OUTSIDE, NOT_VERIFIABLE)
CORRECTIONS = ("holm", "bonferroni")

#: the default problem set of ``palsgd verify``: a heterogeneous quadratic and nonconvex families
DEFAULT_PROBLEMS = ("quadratic", "cosine", "logistic")

#: value above which a replica counts as diverged in the distribution-free (Markov) test
DIVERGENCE_LEVEL = 1e300

#: columns of ``results.csv`` (one row per configuration)
RESULTS_COLUMNS = (
    "index",
    "bound",
    "problem",
    "algorithm",
    "outer",
    "coins",
    "K",
    "d",
    "noise",
    "H",
    "p",
    "eta",
    "gamma",
    "alpha",
    "alpha_role",
    "alpha_max",
    "T",
    "R",
    "seed",
    "L",
    "sigma2",
    "zeta2",
    "F0",
    "conditions_hold",
    "failed_conditions",
    "measured_mean",
    "measured_sd",
    "measured_se",
    "skewness",
    "diverged",
    "ci_level_one_sided",
    "t_lcb",
    "t_ucb",
    "boot_lcb",
    "boot_ucb",
    "lcb",
    "ucb",
    "bound_value",
    "ratio",
    "ratio_ucb",
    "p_holds",
    "p_violated",
    "p_value",
    "p_adjusted",
    "verdict",
    "consensus_mean",
    "note",
)
#: columns of ``rates.csv`` (one row per (bound, T) point; the fit is repeated on each row)
RATES_COLUMNS = (
    "bound",
    "problem",
    "algorithm",
    "K",
    "H",
    "p",
    "eta",
    "step_rule",
    "T",
    "alpha",
    "R",
    "measured_mean",
    "measured_se",
    "bound_value",
    "fitted_slope",
    "slope_ci_low",
    "slope_ci_high",
    "bound_slope",
    "bound_leading_exponent",
    "rate_verdict",
    "conditions_hold",
)
#: columns of ``exact_vs_mc.csv`` (one row per algorithm, metric and step)
EXACT_COLUMNS = (
    "algorithm",
    "label",
    "metric",
    "step",
    "exact",
    "mc_mean",
    "mc_se",
    "z",
)
#: columns of ``speedup.csv`` (one row per bound)
SPEEDUP_COLUMNS = (
    "bound",
    "problem",
    "algorithm",
    "K1",
    "K",
    "H",
    "p",
    "eta",
    "alpha",
    "T",
    "R",
    "measured_K1",
    "measured_K",
    "measured_speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "bound_K1",
    "bound_K",
    "predicted_speedup",
    "linear_speedup",
    "conditions_hold",
)
#: columns of ``consensus.csv`` (one row per algorithm and H)
CONSENSUS_COLUMNS = (
    "problem",
    "algorithm",
    "K",
    "H",
    "p",
    "eta",
    "alpha",
    "T",
    "R",
    "consensus_mean",
    "consensus_se",
    "grad_norm_sq_mean",
    "grad_norm_sq_se",
)


@dataclass(frozen=True)
class Config:
    """One configuration to simulate and test: the bound's algorithm spec (``algorithm``,
    :attr:`theory.bound.Bound.algorithm`; a table name is read as its spec) with these
    hyperparameters (:meth:`spec`).

    ``alpha_role``: ``"recommended"`` (the bound's step, clipped to the largest feasible
    step), ``"fraction"`` (a fraction of the largest feasible step), ``"outside"`` (beyond
    it), or ``"given"`` (set by the user).
    """

    bound: str
    problem: str
    algorithm: AlgorithmSpec
    K: int
    T: int
    alpha: float
    H: int = 1
    p: float = 0.0
    eta: float = 0.0
    gamma: float = 1.0
    alpha_role: str = "given"
    alpha_max: float = math.nan
    seed: int = 0
    problem_kwargs: tuple[tuple[str, Any], ...] = ()
    backend: str = "numpy"
    device: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.algorithm, str):  # a name of the table: its spec
            object.__setattr__(self, "algorithm", AlgorithmSpec.of(self.algorithm))

    @property
    def kind(self) -> str:
        """The algorithm's name in the table."""
        return self.algorithm.kind

    @property
    def outer(self) -> str:
        return self.algorithm.outer

    @property
    def coins(self) -> str:
        return self.algorithm.coins

    def spec(self) -> AlgorithmSpec:
        """The spec simulated: the algorithm with this configuration's hyperparameters."""
        return self.algorithm.replace(
            alpha=self.alpha, H=self.H, p=self.p, eta=self.eta, gamma=self.gamma, seed=self.seed
        )

    def summary(self) -> str:
        row = self.algorithm.definition
        parts = [f"K={self.K}"]
        if row.rounds:
            parts.append(f"H={self.H}")
        if row.pulls:
            parts += [f"p={self.p:.2g}", f"eta={self.eta:.2g}"]
        if self.outer != "average":
            parts.append(f"gamma={self.gamma:.2g}")
        if row.pulls and self.algorithm.shared_coins:
            parts.append(f"coins={self.coins}")
        parts += [f"alpha={self.alpha:.3g}", f"T={self.T}"]
        return " ".join(parts)


@dataclass
class VerifySettings:
    """Settings of a verification run (every field is recorded in ``results.json``).

    ``configs`` configurations inside the conditions and ``outside`` beyond them are
    sampled per (bound, problem) pair; ``replicas`` Monte-Carlo replicas per configuration;
    ``T`` and ``K`` are the candidate horizons and worker counts; ``d``, ``noise``,
    ``sigma`` (``None``: the problem's default, 1 for additive noise, set by the data for
    finite sums of data problems), ``zeta`` parametrise the problems (``zeta`` is forced to 0 for bounds that
    assume i.i.d. data). ``declared`` maps a problem name (or ``"*"``) to constants the
    user declares (``L``, ``sigma2``, ``zeta2``, ``f_star``); they replace the problem's
    own and are checked by sampling first.

    Exact verification (bounds whose algorithm has an exact oracle): ``search`` runs the
    designs and the adversarial search of :mod:`theory.verify.exact` with its budget
    scaled by ``budget``; ``controls`` also verifies every bound's negative controls
    (budget ``control_budget``); ``controls_only`` skips the Monte-Carlo parts.
    ``class_stage``: judge every bound against the worst case over its whole class
    (:mod:`theory.verify.classstage`) at ``class_designs`` designs per bound.
    ``bound_file``: a YAML/JSON file of user bounds (:mod:`theory.verify.bound_file`).
    ``backend`` (``numpy`` | ``torch``) and ``device`` run the Monte-Carlo simulations
    (:func:`theory.simulate.simulate`).
    """

    bounds: tuple[str, ...] | None = None
    problems: tuple[str, ...] = DEFAULT_PROBLEMS
    replicas: int = 64
    configs: int = 5
    outside: int = 1
    seed: int = 0
    T: tuple[int, ...] = (96, 192)
    K: tuple[int, ...] = (2, 4)
    d: int = 6
    noise: str = "gaussian"
    sigma: float | None = None
    zeta: float = 1.0
    level: float = 0.05
    correction: str = "holm"
    n_boot: int | None = None
    rates: bool = True
    rate_T: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)
    rate_replicas: int = 48
    speedup: bool = True
    exact: bool = True
    exact_T: int = 40
    exact_replicas: int = 3000
    consensus: bool = True
    consensus_H: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    consensus_T: int = 128
    declared: dict[str, dict[str, float]] = field(default_factory=dict)
    check_constants: bool = True
    quick: bool = False
    search: bool = True
    controls: bool = True
    controls_only: bool = False
    budget: float = 1.0
    control_budget: float = 0.5
    bound_file: str | None = None
    backend: str = "numpy"
    device: str | None = None
    class_stage: bool = True
    class_designs: int = 4

    def __post_init__(self) -> None:
        self.validated()

    def validated(self) -> VerifySettings:
        """Check every field; raise :class:`UserInputError` naming the bad one (run on
        construction, and again by :func:`~theory.verify.run.run_verification` in case a
        field was changed since)."""
        validate_one("R", self.replicas)
        validate_one("R", self.rate_replicas)
        validate_one("R", self.exact_replicas)
        validate_one("d", self.d)
        for name, val in (("configs", self.configs), ("outside", self.outside)):
            if not isinstance(val, int | np.integer) or val < 0:
                raise UserInputError(f"'{name}' must be a nonnegative integer, got {val!r}")
        if not self.T:
            raise UserInputError("'T' needs at least one value")
        if not self.K:
            raise UserInputError("'K' needs at least one value")
        for t in (*self.T, *self.rate_T, self.exact_T, self.consensus_T):
            validate_one("T", t)
        for k in self.K:
            validate_one("K", k)
        for h in self.consensus_H:
            validate_one("H", h)
        R = max(self.replicas, self.rate_replicas)  # exact vs MC runs at K = d = 4
        check_memory(
            8.0 * 3.0 * max(R * max(self.K) * self.d, self.exact_replicas * 16),
            f"verify: R = {R} replicas x K = {max(self.K)} workers x d = {self.d} coordinates "
            "(--replicas, --K, --d)",
        )
        if self.sigma is not None:
            validate_one("sigma", self.sigma)
        validate_one("zeta", self.zeta)
        if not 0 < self.level < 1:
            raise UserInputError(f"'level' must be in (0, 1), got {self.level}")
        if self.correction not in CORRECTIONS:
            raise UserInputError(
                f"unknown correction {self.correction!r}; known: {list(CORRECTIONS)}"
            )
        if self.n_boot is not None and self.n_boot < 99:
            raise UserInputError(f"'n_boot' must be >= 99, got {self.n_boot}")
        if self.backend not in ("numpy", "torch"):
            raise UserInputError(f"'backend' must be 'numpy' or 'torch', got {self.backend!r}")
        if self.device is not None and self.backend != "torch":
            raise UserInputError(
                "'device' needs backend 'torch' (the numpy backend runs on the CPU)"
            )
        if not isinstance(self.class_designs, int | np.integer) or self.class_designs < 1:
            raise UserInputError(
                f"'class_designs' must be a positive integer, got {self.class_designs!r}"
            )
        for name in ("budget", "control_budget"):
            check_number(name, getattr(self, name), 0, 100, low_open=True)
        if int(self.seed) < 0:
            raise UserInputError(f"'seed' must be a nonnegative integer, got {self.seed}")
        return self
