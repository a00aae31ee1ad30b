"""The DDP baseline: ``torch.nn.parallel.DistributedDataParallel``.

Gradients are averaged by torch's bucketed all-reduce during ``backward`` (overlapped with
the backward pass); ``step`` clips, runs the inner optimizer and zeroes the gradients.
Without an initialised process group (a single process) the bare model is used.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from empirical.algorithms.base import DistributedAlgorithm, StepInfo
from empirical.algorithms.config import AlgorithmConfig
from empirical.algorithms.slowlink import (
    SlowLinkState,
    delayed_allreduce_hook,
    link_delay_fn,
)
from empirical.timing import DeviceClock

__all__ = ["DDPAlgorithm"]


class DDPAlgorithm(DistributedAlgorithm):
    """``name = "ddp"``. ``model`` is the DDP wrapper (call forward on it); ``module`` the bare model.

    ``stats["allreduce_calls"]`` counts one logical gradient all-reduce per step (torch
    splits it into buckets) and ``stats["bytes_communicated"]`` adds the gradient bytes of
    the trainable parameters per step; ``time_comm_s`` stays 0 because the all-reduce
    overlaps with the backward pass, which the trainer times.

    With ``config.comm_delay_s``/``comm_delay_per_byte_s`` > 0 (an emulated slow link) a
    :func:`~empirical.algorithms.slowlink.delayed_allreduce_hook` is registered as DDP's
    communication hook.
    """

    def __init__(
        self,
        config: AlgorithmConfig,
        model: nn.Module,
        inner_optimizer: torch.optim.Optimizer,
        *,
        process_group: Any = None,
        ddp_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self._start(config, model, inner_optimizer)
        self.module = model
        dev = self.params[0].device if self.params else torch.device("cpu")
        self.clock = DeviceClock(dev, self.stats)
        initialized = dist.is_available() and dist.is_initialized()
        self.world_size = dist.get_world_size(process_group) if initialized else 1
        self.rank = dist.get_rank(process_group) if initialized else 0
        if initialized:
            kw: dict[str, Any] = {"process_group": process_group}
            if dev.type == "cuda":
                kw["device_ids"] = [dev.index]
            kw.update(ddp_kwargs or {})
            self.model: nn.Module = nn.parallel.DistributedDataParallel(model, **kw)
            delay = link_delay_fn(config.comm_delay_s, config.comm_delay_per_byte_s)
            if delay is not None and self.world_size > 1:
                self.model.register_comm_hook(
                    SlowLinkState(delay, process_group), delayed_allreduce_hook
                )
        else:
            self.model = model
        self._grad_bytes = sum(p.numel() * p.element_size() for p in self.params)

    def next_action(self) -> str:
        return "grad"

    def no_sync(self) -> contextlib.AbstractContextManager[Any]:
        if isinstance(self.model, nn.parallel.DistributedDataParallel):
            return self.model.no_sync()
        return contextlib.nullcontext()

    def step(self, scaler: Any = None) -> StepInfo:
        """Clip, inner step (through ``scaler`` if given), ``zero_grad``, ``t += 1``."""
        self._inner_step(0.0, scaler)
        self.inner_optimizer.zero_grad(set_to_none=True)
        self.t += 1
        self.stats["grad_steps"] += 1
        if self.world_size > 1:
            self.stats["allreduce_calls"] += 1
            self.stats["bytes_communicated"] += self._grad_bytes
        return StepInfo(action="grad", synced=False, t=self.t)

    @torch.no_grad()
    def anchor_state_dict(
        self, device: torch.device | str | None = None
    ) -> dict[str, torch.Tensor]:
        """The model's state (identical on all ranks under DDP), copied to ``device`` if given."""
        state = self.module.state_dict()
        if device is None:
            return {k: v.detach().clone() for k, v in state.items()}
        return {k: v.detach().to(device, copy=True) for k, v in state.items()}

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "config": self.config.to_dict(),
            "t": self.t,
            "world_size": self.world_size,
            "stats": dict(self.stats),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._check_state_name(state)
        self.t = int(state["t"])
        self.stats.update(state.get("stats", {}))
