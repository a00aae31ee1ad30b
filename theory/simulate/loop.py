"""The step schedule of a simulator run, shared by the numpy and the torch backends.

:class:`RunLoop` runs the steps of :mod:`theory.simulate` (recording, warm-up, coins,
local step, sync or elastic mixing, the landing of an overlapped sync) and keeps the
counters (gradient evaluations, all-reduces, pulls); a backend supplies the arithmetic in
``record``, ``draw``, ``warm_step``, ``local_step``, ``mix``, ``sync``, ``start_sync``,
``land`` and ``trace``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from theory.algorithm import AlgorithmSpec, pull_coefficient
from theory.coins import CoinChunks
from theory.problems import Problem
from theory.simulate.trace import Trace


class RunLoop:
    """One run of ``spec`` on ``problem``: ``T`` steps of ``R`` replicas (inputs validated)."""

    def __init__(
        self,
        problem: Problem,
        spec: AlgorithmSpec,
        *,
        T: int,
        R: int,
        seed: int,
        record_every: int,
        per_replica: dict[str, np.ndarray] | None = None,
    ) -> None:
        self.problem, self.spec = problem, spec
        self.T, self.R, self.K, self.d = T, R, problem.K, problem.d
        self.seed, self.record_every = seed, record_every
        self.easgd = spec.definition.elastic
        self.a_el = spec.elastic_coef(self.K) if self.easgd else 0.0
        #: pulls act on the first m coordinates
        self.m = min(self.d, math.ceil(spec.pull_fraction * self.d - 1e-12))
        self.alpha, self.lr_g, self.c = spec.alpha, spec.grad_lr, spec.pull_coef
        #: per-replica outer rate (``None``: the spec's)
        self.gamma = None
        if per_replica:  # replica r runs spec with its own alpha, eta, gamma (arrays (R,))
            a = per_replica.get("alpha", np.full(R, spec.alpha))
            eta = per_replica.get("eta", np.full(R, spec.eta))
            self.alpha = a
            self.lr_g = a / (1.0 - spec.p) if spec.p > 0 else a
            self.c = pull_coefficient(a, eta, spec.p) if spec.p > 0 else np.zeros(R)
            self.gamma = per_replica.get("gamma")
        self.coins = None
        if spec.local and spec.p > 0:
            self.coins = CoinChunks(spec.seed, spec.p, R, self.K, T, shared=spec.shared_coins)
        n_rec = (T + record_every - 1) // record_every
        self.n_rec = n_rec
        self.comm_rec = np.empty(n_rec)
        self.ge_rec = np.empty((R, n_rec))
        self.grad_evals = np.zeros(R)
        self.comm = 0
        self.in_flight = False  # an overlapped sync's outer step is pending

    # ---- the backend's arithmetic ------------------------------------------------------
    def record(self, i: int) -> None:
        raise NotImplementedError

    def draw(self) -> Any:
        raise NotImplementedError

    def warm_step(self, draw: Any) -> None:
        raise NotImplementedError

    def local_step(self, draw: Any, i: int | None, do_grad: bool, do_pull: bool) -> None:
        """One local step; ``i``: the step's index into ``self.coins`` (None: no pulls)."""
        raise NotImplementedError

    def mix(self) -> None:
        raise NotImplementedError

    def sync(self) -> None:
        raise NotImplementedError

    def start_sync(self) -> None:
        """Overlapped sync: keep ``Delta = z - xbar`` in flight, restart the workers from
        ``z`` (:mod:`theory.algorithm`, ``sync_delay``)."""
        raise NotImplementedError

    def land(self) -> None:
        """Overlapped sync: the outer step on the ``Delta`` in flight, ``x_k += z' - z``."""
        raise NotImplementedError

    def trace(self) -> Trace:
        raise NotImplementedError

    # ---- the schedule --------------------------------------------------------------------
    def run(self, progress: bool, label: str) -> Trace:
        """Every step: record (every ``record_every``), draw the noise, then a warm-up / SGD
        step or a local step followed, at a sync step, by the outer step or the mixing."""
        spec = self.spec
        steps = range(self.T)
        for t in tqdm(steps, desc=label, unit="step") if progress else steps:
            if t % self.record_every == 0:
                i = t // self.record_every
                self.record(i)
                self.ge_rec[:, i] = self.grad_evals
                self.comm_rec[i] = self.comm
            draw = self.draw()
            if not spec.local or t < spec.T0:
                self.warm_step(draw)
                self.grad_evals += 1.0
                self.comm += 1
                continue
            self._local(t, draw)
            if spec.sync_delay and spec.is_landing_step(t):
                self.land()
                self.in_flight = False
            if not spec.is_sync_step(t):
                continue
            if self.easgd:
                self.mix()
                self.comm += 1
            elif spec.sync_delay:
                self.start_sync()
                self.in_flight = True
                self.comm += spec.outer_steps_per_sync
            else:
                self.sync()
                self.comm += spec.outer_steps_per_sync
        if self.in_flight:  # the run ends with the update in flight landed
            self.land()
        return self.trace()

    def _local(self, t: int, draw: Any) -> None:
        if self.coins is None:
            self.grad_evals += 1.0
            self.local_step(draw, None, True, False)
            return
        i = self.coins.at(t)
        n_pull = int(self.coins.n_pull[i])
        self.grad_evals += self.coins.grad_evals[i]
        self.local_step(draw, i, n_pull < self.R * self.K, n_pull > 0 and np.any(self.c != 0.0))

    def make_trace(self, rec: dict[str, np.ndarray], **final: np.ndarray) -> Trace:
        """The :class:`Trace` of the run from the recorded ``gn, lg, cons, anc`` (R, n_rec)
        and the ``final_x``, ``anchor``, ``final_grad_norm_sq``, ``final_loss_gap``."""
        pulls = self.coins.pull_steps if self.coins else np.zeros((self.R, self.K), np.int64)
        return Trace(
            steps=np.arange(0, self.T, self.record_every),
            grad_norm_sq=rec["gn"],
            loss_gap=rec["lg"],
            consensus=rec["cons"],
            anchor_dist=rec["anc"],
            grad_evals=self.ge_rec,
            comm_rounds=self.comm_rec,
            T=self.T,
            record_every=self.record_every,
            pull_steps=pulls,
            spec=self.spec.to_dict(),
            problem=self.problem.describe(),
            seed=self.seed,
            **final,
        )
