"""EASGD's elastic sync on ``torch.distributed``: the sync part of the sync rule
``"elastic"`` (:data:`empirical.algorithms.local.SYNC_PARTS`).

Synchronous EASGD (Zhang, Choromanska & LeCun, NeurIPS 2015; as Wang & Joshi, JMLR 2021,
Sec. 4 and :mod:`theory.simulate` write it): every local step is a plain inner step; at a
sync step (the schedule of the other local algorithms, :func:`theory.algorithm.is_sync_step`)
the ``K`` workers and the centre ``z`` mix elastically, all at once, from the pre-mixing
values::

    x_k <- (1 - a) x_k + a z        (= x_k - a (x_k - z))
    z   <- (1 - K a) z + a sum_k x_k (= z + a sum_k (x_k - z))

with the elastic coefficient ``a`` of :meth:`theory.algorithm.AlgorithmSpec.elastic_coef`
(``K`` = the number of workers, the size of the sync's process group; ``a = 2/(K+2)``, Lemma
1 of Wang & Joshi, the simulator's default: :class:`AlgorithmConfig` has no field for another
``a``). The workers are NOT restarted from ``z``: each keeps its own iterate. The mixing
keeps ``u = (sum_k x_k + z)/(K+1)`` unchanged (the mixing matrix is doubly stochastic).

Communication: ONE flat all-reduce (SUM) per sync of ``x_k`` (a copy in the work buffer; the
parameters keep ``x_k`` for their own update), the floating-point buffers (averaged and kept
under the buffer policy ``"average"``, as the other syncs do) and the consensus scalar
``||x_k - z||^2`` (pre-mixing; the consensus ``mean_k ||x_k - xbar||^2`` is its mean minus
``||xbar - z||^2``). The centre persists between syncs in the
:class:`~empirical.algorithms.anchor.Anchor` (``anchor.z``: set to the workers' common model
when the local phase starts, saved and restored with the anchor by ``state_dict``); it is the
model the trainer evaluates and checkpoints as the global one (``anchor_state_dict``).

Memory (beyond model and inner optimizer): the centre (one model copy) and the work buffer
(one model copy plus the buffers and one scalar). Units: parameters in the model's dtype;
``a`` dimensionless. The mixing is blocking: there is no overlapped variant
(``sync_delay > 0`` is refused).
"""

from __future__ import annotations

from typing import Any

import torch

from core.errors import UserInputError
from empirical.algorithms.anchor import Anchor
from empirical.algorithms.base import Communicator
from empirical.algorithms.config import AlgorithmConfig
from empirical.algorithms.flat_model import FlatModel
from empirical.algorithms.sync import Sync, sq_norm
from empirical.timing import DeviceClock

__all__ = ["ElasticSync"]


class ElasticSync(Sync):
    """EASGD's blocking elastic mixing of ``model`` (this worker) and the centre kept in
    ``anchor`` over ``comm`` (module docstring); the interface of
    :class:`~empirical.algorithms.sync.Sync` (``run``, ``finish``, ``lands_after``, the
    statistics ``syncs``, ``outer_steps`` (one per mixing), ``last_consensus``, the clock's
    ``time_sync_s``). ``coef``: the elastic coefficient ``a`` for ``K = comm.size``.
    """

    def __init__(
        self,
        model: FlatModel,
        anchor: Anchor,
        comm: Communicator,
        config: AlgorithmConfig,
        stats: dict[str, Any],
        clock: DeviceClock,
    ) -> None:
        if config.sync_delay:
            raise UserInputError(
                f"sync_delay = {config.sync_delay}: EASGD's elastic mixing is blocking (it has "
                "no overlapped variant); give sync_delay 0 (--sync-delay 0)"
            )
        super().__init__(model, anchor, comm, config, stats, clock)
        self.coef = float(config.spec.elastic_coef(comm.size))

    @torch.no_grad()
    def _sync(self) -> None:
        """One elastic mixing: the all-reduce of ``x_k`` (and buffers, consensus scalar),
        ``x_k <- (1 - a) x_k + a z``, ``z <- (1 - K a) z + a sum_k x_k``, the consensus
        statistic and the buffer policy."""
        fm, anchor, z = self.model, self.anchor, self.anchor.z
        assert z is not None
        K, a = self.comm.size, self.coef
        due = self.consensus_due()
        buf = fm.work()[: fm.n_sync]
        s, last = buf[: fm.n], fm.n_sync - 1
        fm.read_into(s)  # x_k, a copy: the parameters keep x_k for their own update
        buf[last] = self._sq_dist_to_anchor(s) if due else 0.0
        if fm.avg_buffers:
            fm.buf_layout.gather(fm.float_buffers, buf)
        self.comm.all_reduce_sum(buf)  # s = sum_k x_k
        consensus = None
        if due:  # mean_k ||x_k - z||^2 - ||xbar - z||^2, before the mixing
            consensus = buf[last] / K - sq_norm(s / K - z)
        self._mix_workers(a)
        z.mul_(1.0 - K * a).add_(s, alpha=a)
        if fm.avg_buffers and K > 1:
            buf[fm.n : last].div_(K)
        if consensus is not None:
            self.consensus_pending = consensus.clamp_min(0.0)
        elif not self.comm.active:
            self.consensus_pending = None
            self.stats["last_consensus"] = 0.0
        self.stats["outer_steps"] += 1
        self.stats["syncs"] += 1
        anchor.apply_buffer_policy(buf)

    @torch.no_grad()
    def _mix_workers(self, a: float) -> None:
        """``x_k <- (1 - a) x_k + a z`` in place on this worker's parameters (``z``: the
        pre-mixing centre)."""
        fm, anchor = self.model, self.anchor
        assert anchor.z is not None
        if fm.flat is not None:
            fm.flat[: fm.n].mul_(1.0 - a).add_(anchor.z, alpha=a)
            return
        for p, zv in zip(fm.local_params, anchor.z_views, strict=True):
            p.mul_(1.0 - a).add_(zv.to(p.dtype), alpha=a)
