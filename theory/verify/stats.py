"""Statistics of the Monte-Carlo tests: t and bootstrap-t tests, multiple testing, power-law fits."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from core.errors import UserInputError
from theory.verify.settings import CORRECTIONS, DIVERGENCE_LEVEL, HOLDS, INCONCLUSIVE, VIOLATED


class BootstrapPlan:
    """Multinomial resampling weights shared by every test on ``n`` replicas.

    ``counts[i, b]`` is how often replica ``i`` appears in bootstrap resample ``b``; a
    resample mean is then one vector-matrix product. Sharing the weights between
    configurations (same ``n``) makes the bootstrap cheap; each configuration's inference
    stays valid on its own, which is all the family-wise corrections need.
    """

    def __init__(self, n_resamples: int, seed: int = 0):
        if n_resamples < 99:
            raise UserInputError(f"bootstrap needs at least 99 resamples, got {n_resamples}")
        self.n_resamples = int(n_resamples)
        self.seed = int(seed)
        self._counts: dict[int, np.ndarray] = {}

    def counts(self, n: int) -> np.ndarray:
        """Resampling counts, shape ``(n, n_resamples)`` (column ``b`` is resample ``b``)."""
        if n not in self._counts:
            rng = np.random.default_rng([self.seed, n])
            c = rng.multinomial(n, np.full(n, 1.0 / n), size=self.n_resamples)
            self._counts[n] = np.ascontiguousarray(c.T, dtype=np.float64)
        return self._counts[n]

    @staticmethod
    def resamples_for(min_level: float, per_tail: int = 20) -> int:
        """Resamples giving about ``per_tail`` draws beyond the ``min_level`` quantile."""
        return int(min(400_000, max(1999, math.ceil(per_tail / min_level))))


@dataclass
class MeanTest:
    """Tests of ``E Y`` against a threshold ``b`` from i.i.d. draws ``Y_1..Y_n``.

    ``p_holds`` is the p-value of ``H0: E Y >= b`` and ``p_violated`` that of
    ``H0: E Y <= b`` (each the larger of the t and bootstrap-t p-values). ``p_value`` is the
    two-sided ``min(1, 2 min(p_holds, p_violated))`` and ``direction`` the verdict a
    rejection would give.
    """

    n: int
    mean: float
    sd: float
    se: float
    threshold: float
    n_diverged: int
    p_holds_t: float
    p_violated_t: float
    p_holds_boot: float
    p_violated_boot: float
    _t_star: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    skew: float = math.nan

    @property
    def p_holds(self) -> float:
        return max(self.p_holds_t, self.p_holds_boot)

    @property
    def p_violated(self) -> float:
        return max(self.p_violated_t, self.p_violated_boot)

    @property
    def p_value(self) -> float:
        return min(1.0, 2.0 * min(self.p_holds, self.p_violated))

    @property
    def direction(self) -> str:
        return HOLDS if self.p_holds <= self.p_violated else VIOLATED

    def confidence_bounds(self, level: float) -> dict[str, float]:
        """One-sided confidence bounds at error ``level`` each (t, bootstrap-t, conservative).

        ``ucb`` is the larger of the two upper bounds and ``lcb`` the smaller of the two
        lower bounds; ``b >= ucb`` is equivalent to ``p_holds <= level`` and ``b <= lcb`` to
        ``p_violated <= level`` (up to ties).
        """
        if not 0 < level < 0.5:
            raise UserInputError(f"one-sided confidence level must be in (0, 0.5), got {level}")
        if self.n_diverged:
            return {
                "t_lcb": math.inf,
                "t_ucb": math.inf,
                "boot_lcb": math.inf,
                "boot_ucb": math.inf,
                "lcb": math.inf,
                "ucb": math.inf,
            }
        m, se, n = self.mean, self.se, self.n
        if se == 0.0:
            return {k: m for k in ("t_lcb", "t_ucb", "boot_lcb", "boot_ucb", "lcb", "ucb")}
        if n < 2:
            inf = math.inf
            return {
                "t_lcb": -inf,
                "t_ucb": inf,
                "boot_lcb": -inf,
                "boot_ucb": inf,
                "lcb": -inf,
                "ucb": inf,
            }
        q = float(stats.t.ppf(1.0 - level, n - 1))
        t_lcb, t_ucb = m - q * se, m + q * se
        ts = self._t_star
        B = ts.size
        k = math.floor(level * (B + 1) - 1)  # p_boot <= level  <=>  count <= k
        if k < 0 or B == 0:
            boot_lcb, boot_ucb = -math.inf, math.inf
        else:
            # holds iff #{t* <= t_obs} <= k iff t_obs < t*_(k+1) iff b > m - t*_(k+1) se
            # (order statistics, 0-based k and B-1-k, by partial sorting)
            part = np.partition(ts, (k, B - 1 - k))
            boot_ucb = m - part[k] * se
            boot_lcb = m - part[B - 1 - k] * se
        return {
            "t_lcb": t_lcb,
            "t_ucb": t_ucb,
            "boot_lcb": float(boot_lcb),
            "boot_ucb": float(boot_ucb),
            "lcb": float(min(t_lcb, boot_lcb)),
            "ucb": float(max(t_ucb, boot_ucb)),
        }


def mean_test(
    values: Sequence[float] | np.ndarray, threshold: float, plan: BootstrapPlan | None = None
) -> MeanTest:
    """Test the mean of i.i.d. nonnegative draws ``values`` against ``threshold``.

    Student's t (``n - 1`` degrees of freedom) and the bootstrap-t with the resampling
    weights of ``plan`` (default: 9999 resamples, seed 0). Non-finite draws count as
    diverged (see the module docstring).
    """
    y = np.asarray(values, dtype=np.float64).ravel()
    n = y.size
    if n == 0:
        raise UserInputError("mean_test needs at least one value")
    b = float(threshold)
    bad = ~np.isfinite(y) | (y >= DIVERGENCE_LEVEL)
    n_div = int(bad.sum())
    if n_div:
        # Markov: under E Y <= b, P(Y >= c) <= b/c, so #{Y_i >= c} <= Binom(n, b/c)
        q = min(1.0, max(b, 0.0) / DIVERGENCE_LEVEL)
        p_viol = float(stats.binom.sf(n_div - 1, n, q))
        return MeanTest(n, math.inf, math.inf, math.inf, b, n_div, 1.0, p_viol, 1.0, p_viol)
    m = float(y.mean())
    sd = float(y.std(ddof=1)) if n > 1 else 0.0
    se = sd / math.sqrt(n) if n > 1 else 0.0
    if n < 2 and sd == 0.0:
        return MeanTest(n, m, math.nan, math.nan, b, 0, 1.0, 1.0, 1.0, 1.0)
    if sd <= 1e-12 * abs(m):  # identical draws up to rounding: the mean is known exactly
        sd = se = 0.0
    if se == 0.0:
        ph = 0.0 if m < b else 1.0
        pv = 0.0 if m > b else 1.0
        return MeanTest(n, m, 0.0, 0.0, b, 0, ph, pv, ph, pv)
    t_obs = (m - b) / se
    ph_t = float(stats.t.cdf(t_obs, n - 1))
    pv_t = float(stats.t.sf(t_obs, n - 1))
    plan = plan or BootstrapPlan(9999)
    counts = plan.counts(n)
    yc = y - m
    mom = np.stack([yc, yc * yc]) @ counts / n  # both moments in one pass over the weights
    mc = mom[0]
    var = np.maximum(mom[1] - mc * mc, 0.0) * (n / (n - 1))
    se_star = np.sqrt(var / n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_star = np.where(
            se_star > 0, mc / np.where(se_star > 0, se_star, 1.0), np.sign(mc) * np.inf
        )
    B = t_star.size
    ph_b = (1 + int(np.count_nonzero(t_star <= t_obs))) / (B + 1)
    pv_b = (1 + int(np.count_nonzero(t_star >= t_obs))) / (B + 1)
    skew = float(stats.skew(y, bias=False)) if n > 2 else math.nan
    return MeanTest(n, m, sd, se, b, 0, ph_t, pv_t, float(ph_b), float(pv_b), t_star, skew)


def _mean_se(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Mean of i.i.d. replica values and its standard error (0 for a single value)."""
    y = np.asarray(values, dtype=float).ravel()
    se = float(y.std(ddof=1) / math.sqrt(y.size)) if y.size > 1 else 0.0
    return float(y.mean()), se


@dataclass(frozen=True)
class Correction:
    """Result of a family-wise correction: rejections, adjusted p-values, per-test levels."""

    method: str
    level: float
    reject: np.ndarray
    adjusted: np.ndarray
    test_level: np.ndarray


def correct(
    pvalues: Sequence[float] | np.ndarray, level: float = 0.05, method: str = "holm"
) -> Correction:
    """Family-wise error control over ``len(pvalues)`` tests.

    ``bonferroni``: reject ``p_i <= level/m``. ``holm`` (Holm, Scand. J. Statist. 6, 1979):
    sort ascending, reject ``p_(j) <= level/(m - j)`` (0-based ``j``) while it holds.
    ``test_level[i]`` is the level the procedure applied to test ``i``: for Holm, the
    step's level for rejected tests and the stopping step's level for the others, so that
    ``reject[i] == (p_i <= test_level[i])``. ``adjusted`` are the adjusted p-values.
    """
    if method not in CORRECTIONS:
        raise UserInputError(f"unknown correction {method!r}; known: {list(CORRECTIONS)}")
    if not 0 < level < 1:
        raise UserInputError(f"family-wise level must be in (0, 1), got {level}")
    p = np.asarray(pvalues, dtype=float).ravel()
    m = p.size
    if m == 0:
        e = np.zeros(0)
        return Correction(method, level, e.astype(bool), e, e)
    if method == "bonferroni":
        tl = np.full(m, level / m)
        return Correction(method, level, p <= tl, np.minimum(1.0, p * m), tl)
    order = np.argsort(p, kind="stable")
    ps = p[order]
    steps = level / (m - np.arange(m))
    ok = ps <= steps
    j0 = int(np.argmin(ok)) if not ok.all() else m
    reject_sorted = np.arange(m) < j0
    tl_sorted = level / (m - np.minimum(np.arange(m), j0 if j0 < m else m - 1))
    adj_sorted = np.minimum(1.0, np.maximum.accumulate(ps * (m - np.arange(m))))
    reject, adj, tl = np.empty(m, bool), np.empty(m), np.empty(m)
    reject[order], adj[order], tl[order] = reject_sorted, adj_sorted, tl_sorted
    return Correction(method, level, reject, adj, tl)


def decide(
    tests: Sequence[MeanTest], level: float = 0.05, method: str = "holm"
) -> tuple[list[str], Correction]:
    """Verdicts of a family of tests: "holds", "violated" or "inconclusive"."""
    corr = correct([t.p_value for t in tests], level, method)
    verdicts = [t.direction if r else INCONCLUSIVE for t, r in zip(tests, corr.reject, strict=True)]
    return verdicts, corr


@dataclass(frozen=True)
class RateFit:
    """Weighted least-squares fit ``log y = a + slope * log T``."""

    slope: float
    intercept: float
    slope_se: float
    ci_low: float
    ci_high: float
    level: float
    dof: int
    chi2: float

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def fit_power_law(
    T: Sequence[float],
    mean: Sequence[float],
    se: Sequence[float] | None = None,
    level: float = 0.05,
) -> RateFit:
    """Fit ``mean ~ c T^slope`` on log-log axes with a two-sided ``1 - level`` CI on the slope.

    Weights ``1/var(log mean)`` with the delta-method ``var(log mean) = (se/mean)^2``; the
    slope's standard error is scaled up by ``sqrt(chi2/dof)`` when the points scatter more
    than their standard errors allow (never scaled down), and the CI uses Student's t
    with ``n - 2`` degrees of freedom. Without ``se`` (or with zero ``se``) this is ordinary
    least squares with the residual standard error.
    """
    x = np.log(np.asarray(T, dtype=float))
    m = np.asarray(mean, dtype=float)
    if x.size != m.size or x.size < 3:
        raise UserInputError("a rate fit needs at least 3 points (T, mean)")
    if np.any(m <= 0) or not np.all(np.isfinite(m)):
        raise UserInputError("a rate fit needs positive finite means")
    y = np.log(m)
    if se is None or np.any(np.asarray(se, dtype=float) <= 0):
        w = np.ones_like(y)
        known = False
    else:
        w = 1.0 / (np.asarray(se, dtype=float) / m) ** 2
        known = True
    X = np.column_stack([np.ones_like(x), x])
    XtW = X.T * w
    cov = np.linalg.inv(XtW @ X)
    beta = cov @ (XtW @ y)
    resid = y - X @ beta
    dof = x.size - 2
    chi2 = float(np.sum(w * resid**2))
    scale = max(1.0, chi2 / dof) if known else chi2 / dof
    slope_se = float(math.sqrt(cov[1, 1] * scale))
    q = float(stats.t.ppf(1 - level / 2, dof))
    return RateFit(
        float(beta[1]),
        float(beta[0]),
        slope_se,
        float(beta[1] - q * slope_se),
        float(beta[1] + q * slope_se),
        level,
        dof,
        chi2,
    )
