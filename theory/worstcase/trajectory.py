"""One run of a method of the algorithm table, written once for any vector type.

:func:`run` steps an :class:`~theory.algorithm.AlgorithmSpec` for ``T`` steps at
``sigma = 0`` (exact gradients) on an :class:`Oracle`: the oracle gives worker ``k``'s
gradient at a point and the vector arithmetic is the points' own (``+``, ``-``, scalar
``*``). The same code runs on PEPit points (the class oracle, :mod:`theory.worstcase.pep`)
and on numpy arrays (explicit functions, :mod:`theory.worstcase.lift`), so the method the
class oracle bounds is the method an instance runs.

The rules are the simulator's (:mod:`theory.simulate`) without noise:

* a step of minibatch SGD, of an all-reduce base, or of the warm-up ``t < T0``:
  ``x <- x - alpha * mean_k grad f_k(x)`` for every worker (the anchor follows the model);
* a local step ``t >= T0`` of worker ``k``: a pull ``x_k <- x_k - c (x_k - z)``
  (``c = alpha*eta/p``) where its coin says pull, else ``x_k <- x_k - alpha/(1-p) grad f_k(x_k)``;
* a sync after step ``t`` (:meth:`AlgorithmSpec.is_sync_step`): ``Delta = z - mean_k x_k``,
  ``(z, buf) = outer_step(z, buf, Delta)`` and every worker restarts from ``z``.

Coins: a fixed pattern (``pulls[k][t]``, a pull where true; shared coins repeat one row)
or, with ``pulls=None`` and ``p > 0``, every coin path of the ``T`` steps with its
probability (``p`` per pull): the states branch at every local step, ``2^K`` ways with
independent coins, 2 with shared coins, and a quantity's expectation is the weighted sum
over the leaves.

Measured (the ``measured`` of a bound): ``"iterates"``, ``(1/T) sum_{t<T} ||grad f(xbar_t)||^2``
with ``xbar_t`` the workers' average before step ``t`` (the anchor at a round's start);
``"anchors"``, ``(1/R) sum_{r<R} ||grad f(z_r)||^2`` over the anchors at the start of the
``R = T/H`` rounds. :class:`Trajectory` lists the points of that sum with their weights
and every point the run visits (worker iterates, averages, anchors, the last anchor).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from theory.algorithm import AlgorithmSpec

__all__ = ["Oracle", "Trajectory", "run", "path_count", "MEASURED"]

#: what a bound's left-hand side averages (:attr:`theory.bound.Bound.measured`)
MEASURED = ("iterates", "anchors")


class Oracle(Protocol):
    """The gradients of the ``K`` workers' functions: ``grad(k, y)`` is ``grad f_k(y)``."""

    def grad(self, k: int, y: Any) -> Any: ...


@dataclass
class Trajectory:
    """What one run (or every coin path of it) visits and measures.

    ``metric``: ``(weight, y)`` pairs; the measured quantity is
    ``sum weight * ||grad f(y)||^2`` (``grad f`` the workers' mean gradient).
    ``visited``: every point of the run, each once (by identity), ``x0`` first.
    ``leaves``: the coin paths' probabilities (one ``1.0`` for a fixed pattern).
    ``owner``: the worker of each worker iterate (by identity); the others are shared.
    """

    metric: list[tuple[float, Any]] = field(default_factory=list)
    visited: list[Any] = field(default_factory=list)
    leaves: list[float] = field(default_factory=list)
    owner: dict[int, int] = field(default_factory=dict, repr=False)
    _seen: set[int] = field(default_factory=set, repr=False)

    def visit(self, y: Any, worker: int | None = None) -> None:
        """Record ``y`` (once); ``worker``: the worker whose own iterate it is (``None``: a
        point every worker shares, such as an average or an anchor)."""
        if id(y) not in self._seen:
            self._seen.add(id(y))
            self.visited.append(y)
            if worker is not None:
                self.owner[id(y)] = worker

    def shared(self) -> list[Any]:
        """The visited points no single worker owns (averages, anchors, common iterates)."""
        return [y for y in self.visited if id(y) not in self.owner]


@dataclass
class _State:
    """One node of the coin tree: the workers' iterates, anchor, outer buffer, probability."""

    x: list[Any]
    z: Any
    buf: Any
    prob: float


def _mean(vs: Sequence[Any]) -> Any:
    if all(v is vs[0] for v in vs):
        return vs[0]
    total = vs[0]
    for v in vs[1:]:
        total = total + v
    return (1.0 / len(vs)) * total


def _mean_grad(oracle: Oracle, K: int, y: Any) -> Any:
    return _mean([oracle.grad(k, y) for k in range(K)])


def _move(spec: AlgorithmSpec, oracle: Oracle, k: int, s: _State, pull: bool) -> Any:
    """Worker ``k``'s local step from state ``s``: a pull toward the anchor or a gradient step."""
    if pull:
        return s.x[k] - spec.pull_coef * (s.x[k] - s.z)
    return s.x[k] - spec.grad_lr * oracle.grad(k, s.x[k])


def _branches(
    spec: AlgorithmSpec, K: int, t: int, pulls: Any
) -> list[tuple[tuple[bool, ...], float]]:
    """The coin outcomes of local step ``t`` with their probabilities."""
    if not spec.pulls:
        return [((False,) * K, 1.0)]
    if pulls is not None:
        return [(tuple(bool(pulls[k][t]) for k in range(K)), 1.0)]
    p = spec.p
    if spec.shared_coins:
        return [((True,) * K, p), ((False,) * K, 1.0 - p)]
    out = []
    for mask in range(1 << K):
        coins = tuple(bool(mask >> k & 1) for k in range(K))
        n = sum(coins)
        out.append((coins, p**n * (1.0 - p) ** (K - n)))
    return out


def path_count(spec: AlgorithmSpec, K: int, T: int) -> int:
    """The number of coin paths :func:`run` enumerates with ``pulls=None`` (1 without pulls)."""
    if not spec.pulls:
        return 1
    local = max(0, T - spec.warmup_steps) if spec.local else 0
    per = 2 if spec.shared_coins else 2**K
    return per**local


def run(
    spec: AlgorithmSpec,
    K: int,
    T: int,
    x0: Any,
    oracle: Oracle,
    *,
    measured: str = "iterates",
    pulls: Any = None,
    zero: Any = None,
) -> Trajectory:
    """``T`` steps of ``spec`` (``spec.alpha`` set) with ``K`` workers from ``x0``.

    ``pulls``: ``None`` (every coin path, weighted) or a ``K x T`` table of booleans (a
    pull where true; ignored without pull steps). ``zero``: the zero vector of the point
    type (default ``0 * x0``). Returns the :class:`Trajectory`; ``measured="anchors"``
    needs ``T`` a multiple of ``H`` and no warm-up.
    """
    zero = 0.0 * x0 if zero is None else zero
    traj = Trajectory()
    traj.visit(x0)
    states = [_State([x0] * K, x0, zero, 1.0)]
    local_kind = spec.local
    H = spec.H
    for t in range(T):
        if measured == "iterates":
            for s in states:
                xbar = _mean(s.x)
                traj.visit(xbar)
                traj.metric.append((s.prob / T, xbar))
        elif (t - spec.warmup_steps) % H == 0 and t >= spec.warmup_steps:
            R = T // H
            for s in states:
                traj.metric.append((s.prob / R, s.z))
        new: list[_State] = []
        for s in states:
            if not local_kind or t < spec.warmup_steps:
                x = s.x[0]
                x = x - spec.alpha * _mean_grad(oracle, K, x)
                traj.visit(x)
                z = x if local_kind else s.z
                children = [_State([x] * K, z, s.buf, s.prob)]
            else:
                children = []
                step: dict[tuple[int, bool], Any] = {}  # each worker's two moves, made once
                for coins, q in _branches(spec, K, t, pulls):
                    for k in range(K):
                        if (k, coins[k]) not in step:
                            step[k, coins[k]] = _move(spec, oracle, k, s, coins[k])
                            traj.visit(step[k, coins[k]], k)
                    xs = [step[k, coins[k]] for k in range(K)]
                    children.append(_State(xs, s.z, s.buf, s.prob * q))
            for c in children:
                if spec.definition.rounds and spec.is_sync_step(t):
                    delta = s.z - _mean(c.x) if local_kind else s.z - c.x[0]
                    z, buf = spec.outer_step(c.z if not local_kind else s.z, c.buf, delta)
                    traj.visit(z)
                    c.x, c.z, c.buf = [z] * K, z, buf
                new.append(c)
        states = new
    if measured == "anchors":
        for s in states:
            traj.visit(s.z)
    else:
        for s in states:
            traj.visit(_mean(s.x))
    traj.leaves = [s.prob for s in states]
    return traj
