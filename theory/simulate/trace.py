"""The record of a simulator run: :class:`Trace`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.io import atomic_write_json


@dataclass
class Trace:
    """Recorded trajectory statistics of :func:`simulate` (float64 arrays unless noted).

    Recorded before step ``t`` is applied, for ``t`` in ``steps`` (``n_rec`` entries), with
    ``xbar_t = mean_k x_{k,t}`` and the evaluation point ``v_t``: ``v_t = xbar_t`` for every
    kind except ``"easgd"``, where ``v_t = u_t = (sum_k x_{k,t} + z_t)/(K+1)``, the average
    *including* the centre variable, the point of Wang and Joshi's Theorem 3:

    * ``grad_norm_sq`` (R, n_rec): ``||grad f(v_t)||^2``;
    * ``loss_gap`` (R, n_rec): ``f(v_t) - f_star`` (the problem's declared ``f_star``);
    * ``consensus`` (R, n_rec): ``(1/K) sum_k ||x_k - xbar||^2``;
    * ``anchor_dist`` (R, n_rec): ``(1/K) sum_k ||x_k - z||^2`` (0 while the model is
      synchronised every step, i.e. SGD and warm-up; for EASGD ``z`` is the centre);
    * ``grad_evals`` (R, n_rec): gradient evaluations per worker so far (mean over workers;
      pull steps cost none);
    * ``comm_rounds`` (n_rec,): all-reduces so far (one per SGD / warm-up step,
      ``outer_steps_per_sync`` per sync, one per EASGD mixing).

    After the last step: ``final_x`` (R, K, d), ``anchor`` (R, d) (EASGD: the centre),
    ``final_grad_norm_sq`` and ``final_loss_gap`` (R,) at the final ``v``, ``pull_steps``
    (R, K) int counts.
    ``spec``, ``problem`` (its :meth:`~theory.problems.Problem.describe`) and ``seed``
    identify the run.
    """

    steps: np.ndarray
    grad_norm_sq: np.ndarray
    loss_gap: np.ndarray
    consensus: np.ndarray
    anchor_dist: np.ndarray
    grad_evals: np.ndarray
    comm_rounds: np.ndarray
    final_x: np.ndarray
    anchor: np.ndarray
    T: int = 0
    record_every: int = 1
    final_grad_norm_sq: np.ndarray = field(default_factory=lambda: np.zeros(0))
    final_loss_gap: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pull_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    spec: dict[str, Any] = field(default_factory=dict)
    problem: dict[str, Any] = field(default_factory=dict)
    seed: int = 0

    def mean_grad_norm_sq(self) -> np.ndarray:
        """``(1/T) sum_{t<T} ||grad f(v_t)||^2`` per replica, shape (R,) (``v_t``: see above)."""
        if self.record_every != 1:
            raise UserInputError(
                f"mean_grad_norm_sq needs every step recorded (record_every=1), "
                f"got record_every={self.record_every}"
            )
        return self.grad_norm_sq.mean(axis=1)

    def to_dict(self, include_state: bool = False) -> dict[str, Any]:
        """JSON-ready dict (lists); the final iterates only with ``include_state``."""
        out: dict[str, Any] = {}
        for k, v in self.__dict__.items():
            if k in ("final_x", "anchor") and not include_state:
                continue
            out[k] = v.tolist() if isinstance(v, np.ndarray) else v
        return out

    def save_json(self, path: str, include_state: bool = False) -> None:
        """Write :meth:`to_dict` to ``path`` (atomically: :func:`core.io.atomic_write_json`,
        which refuses a device, FIFO or directory at ``path``)."""
        atomic_write_json(path, self.to_dict(include_state))
