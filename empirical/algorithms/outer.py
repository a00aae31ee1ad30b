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
:meth:`OuterOptimizer.zero_step` takes one of them alone (the interleaved form, §4).

``offload=True`` keeps the momentum buffer in pinned CPU memory between steps (a CUDA
anchor only; on the CPU it is a no-op): it is copied to the device for each step and back
after it, saving one model copy of device memory for two transfers per sync. Neither
transfer makes the host wait: a CUDA event marks the end of the copy back, and only what
reads the host copy on the host (:meth:`OuterOptimizer.state_dict`,
:attr:`OuterOptimizer.momentum_buffer`) waits for it.
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
        self,
        z: torch.Tensor,
        kind: str,
        gamma: float,
        mu: float,
        steps_per_sync: int = 1,
        offload: bool = False,
    ) -> None:
        self.z = z
        self.kind = kind
        self.steps_per_sync = int(steps_per_sync)
        self.offload = bool(offload) and z.is_cuda
        self._host: torch.Tensor | None = None  # pinned copy of the momentum when offloaded
        self._copied: Any = None  # CUDA event after the last copy into _host, not yet waited
        self.optimizer: torch.optim.SGD | None = None
        if kind != "average":
            self.optimizer = torch.optim.SGD(
                [z], lr=gamma, momentum=mu, dampening=0.0, nesterov=(kind == "nesterov")
            )

    @property
    def lr(self) -> float:
        """The outer learning rate ``gamma`` in use (1 for ``"average"``)."""
        return 1.0 if self.optimizer is None else float(self.optimizer.param_groups[0]["lr"])

    def set_hyperparameters(self, gamma: float | None = None, mu: float | None = None) -> None:
        """Set the outer learning rate and/or momentum (a schedule, or a changed resume)."""
        if self.optimizer is None:
            return
        group = self.optimizer.param_groups[0]
        if gamma is not None:
            group["lr"] = float(gamma)
        if mu is not None:
            group["momentum"] = float(mu)

    @torch.no_grad()
    def step(self, delta: torch.Tensor, steps: int | None = None) -> int:
        """One outer update with outer gradient ``delta``, then ``steps - 1`` on a zero
        gradient (``steps`` defaults to ``steps_per_sync``; ``delta`` is zeroed by those);
        return the optimizer steps taken."""
        if self.optimizer is None:
            self.z.sub_(delta)
            return 1
        steps = self.steps_per_sync if steps is None else int(steps)
        self._fetch()
        self.z.grad = delta
        try:
            self.optimizer.step()
            for _ in range(steps - 1):
                delta.zero_()
                self.optimizer.step()
        finally:
            self.z.grad = None
            self._stash()
        return steps

    @torch.no_grad()
    def zero_step(self, zeros: torch.Tensor) -> int:
        """One step on a zero outer gradient (``zeros`` is zeroed and used as the gradient)."""
        if self.optimizer is None:
            return 0
        zeros.zero_()
        return self.step(zeros, steps=1)

    def _fetch(self) -> None:
        if self._host is not None and self.optimizer is not None:
            dev = self._host.to(self.z.device, non_blocking=True, copy=True)
            self.optimizer.state[self.z]["momentum_buffer"] = dev

    def _stash(self) -> None:
        if not self.offload or self.optimizer is None:
            return
        buf = self.optimizer.state.get(self.z, {}).get("momentum_buffer")
        if buf is None or buf is self._host:
            return
        if self._host is None:
            self._host = torch.empty(buf.shape, dtype=buf.dtype, pin_memory=buf.is_cuda)
        self._host.copy_(buf, non_blocking=True)
        # the copy runs on the GPU's stream after this returns: readers of _host on the host
        # wait for this event (_host_ready); the next step's copy back is stream-ordered
        self._copied = torch.cuda.Event()
        self._copied.record()
        self.optimizer.state[self.z]["momentum_buffer"] = None  # frees the device copy

    def _host_ready(self) -> torch.Tensor | None:
        """The host copy of the momentum, once the copy into it has finished."""
        if self._copied is not None:
            self._copied.synchronize()
            self._copied = None
        return self._host

    @property
    def momentum_buffer(self) -> torch.Tensor | None:
        """The outer momentum ``m`` (``None`` before the first step or without momentum;
        the pinned host copy when offloaded)."""
        if self.optimizer is None:
            return None
        if self._host is not None:
            return self._host_ready()
        return self.optimizer.state.get(self.z, {}).get("momentum_buffer")

    def state_dict(self) -> dict[str, Any]:
        if self.optimizer is None:
            return {}
        state = self.optimizer.state_dict()
        host = self._host_ready()
        if host is not None:
            state["state"] = {
                k: {**v, "momentum_buffer": host.clone()} for k, v in state["state"].items()
            }
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.optimizer is not None and state:
            self.optimizer.load_state_dict(state)
            self._host_ready()  # no copy into the old host buffer may still be running
            self._host = None
            self._stash()

    def state_bytes(self) -> int:
        """Bytes of the optimizer state (the momentum buffer) held on the anchor's device."""
        if self.optimizer is None or self._host is not None:
            return 0
        buf = self.optimizer.state.get(self.z, {}).get("momentum_buffer")
        return 0 if buf is None else buf.numel() * buf.element_size()

    def offloaded_bytes(self) -> int:
        """Bytes of the optimizer state kept in host memory (0 without offload)."""
        return 0 if self._host is None else self._host.numel() * self._host.element_size()
