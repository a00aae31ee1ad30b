"""The Monte-Carlo oracle (``"monte_carlo"``): a configuration of a
:mod:`theory.problems` problem simulated ``R`` times (:func:`theory.simulate.simulate`), one
measured value per replica; for the problems and algorithms without an exact recursion."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from core.errors import UserInputError
from theory import simulate as sim
from theory.verify.pipeline import Design, Measurement, register_oracle

if TYPE_CHECKING:
    from theory.verify.settings import Config

__all__ = ["MonteCarloOracle", "design_of", "simulate_config"]


def simulate_config(problem: Any, cfg: Config, R: int, **extra: Any) -> Any:
    """Run the simulator on one configuration; returns its ``Trace``."""
    if int(problem.K) != int(cfg.K):
        raise UserInputError(
            f"inconsistent dimensions: problem {cfg.problem!r} has K = "
            f"{problem.K} workers but the configuration has K = {cfg.K}"
        )
    spec = cfg.spec().replace(**extra) if extra else cfg.spec()
    with np.errstate(all="ignore"):
        return sim.simulate(
            problem, spec, T=cfg.T, R=R, seed=cfg.seed, backend=cfg.backend, device=cfg.device
        )


def design_of(problem: object, cfg: object, R: int) -> Design:
    """The Monte-Carlo design of one :class:`~theory.verify.settings.Config` ``cfg`` on
    the built ``problem``, ``R`` replicas."""
    params = {k: np.array([float(getattr(cfg, k))]) for k in ("K", "H", "T", "alpha")}
    return Design(cfg.spec(), cfg.problem, params, instance=problem, config=cfg, replicas=int(R))  # type: ignore[attr-defined]


@register_oracle
class MonteCarloOracle:
    """``design.config`` on ``design.instance`` simulated ``design.replicas`` times (seed and
    backend of the configuration); ``measured``: ``(1/T) sum_t ||grad f(xbar_t)||^2`` per
    replica (shape ``(R,)``, not finite where a replica diverged); ``companions["trace"]``:
    the simulator's trace (consensus error, losses)."""

    name = "monte_carlo"

    def measure(self, design: Design) -> Measurement:
        trace = simulate_config(design.instance, design.config, design.replicas)
        y = np.asarray(trace.mean_grad_norm_sq(), dtype=float)
        return Measurement(
            self.name, design, y, ~np.isfinite(y), exact=False, companions={"trace": trace}
        )
