"""The outer optimizer: acts on the anchor ``z`` (a flat buffer) with the outer gradient
``Delta = z - mean_k x_k``.

* ``"average"``: ``z <- mean_k x_k`` (SGD with ``gamma = 1``, ``mu = 0``); no state.
* ``"sgd"``: ``torch.optim.SGD(lr=gamma, momentum=mu)``.
* ``"nesterov"``: ``torch.optim.SGD(lr=gamma, momentum=mu, nesterov=True)``, DiLoCo's outer
  optimizer (Douillard et al. 2023). PyTorch's form: ``m <- mu*m + Delta``,
  ``z <- z - gamma*(Delta + mu*m)`` (the first step initialises ``m = Delta``).

``steps_per_sync = A > 1`` reproduces the authors' ``--is_intended_impl False`` path
(reference-implementation.md §4): after the step on ``Delta``, ``A - 1`` further steps on a
zero outer gradient. For Nesterov each of them moves ``z`` by ``-gamma*mu*(mu*m)``.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["OuterOptimizer"]


class OuterOptimizer:
    """Outer update of the flat anchor ``z`` (a leaf tensor owned by the caller).

    ``step(delta)`` uses ``delta`` as ``z.grad`` (a view: nothing is copied) and leaves
    ``z.grad`` unset afterwards.
    """

    def __init__(
        self, z: torch.Tensor, kind: str, gamma: float, mu: float, steps_per_sync: int = 1
    ) -> None:
        self.z = z
        self.kind = kind
        self.steps_per_sync = int(steps_per_sync)
        self.optimizer: torch.optim.SGD | None = None
        if kind != "average":
            self.optimizer = torch.optim.SGD(
                [z], lr=gamma, momentum=mu, dampening=0.0, nesterov=(kind == "nesterov")
            )

    @torch.no_grad()
    def step(self, delta: torch.Tensor) -> int:
        """One outer update with outer gradient ``delta``; return the optimizer steps taken."""
        if self.optimizer is None:
            self.z.sub_(delta)
            return 1
        self.z.grad = delta
        try:
            self.optimizer.step()
            for _ in range(self.steps_per_sync - 1):
                delta.zero_()
                self.optimizer.step()
        finally:
            self.z.grad = None
        return self.steps_per_sync

    @property
    def momentum_buffer(self) -> torch.Tensor | None:
        """The outer momentum ``m`` (``None`` before the first step or without momentum)."""
        if self.optimizer is None:
            return None
        return self.optimizer.state.get(self.z, {}).get("momentum_buffer")

    def state_dict(self) -> dict[str, Any]:
        return {} if self.optimizer is None else self.optimizer.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.optimizer is not None and state:
            self.optimizer.load_state_dict(state)

    def state_bytes(self) -> int:
        """Bytes held by the optimizer state (the momentum buffer)."""
        buf = self.momentum_buffer
        return 0 if buf is None else buf.numel() * buf.element_size()
