"""The inner optimizers of :class:`~empirical.algorithms.stacked.StackedWorkers`: ``K``
workers' SGD, SGD with momentum and AdamW on ONE ``(K, n)`` buffer.

Each update is ``torch.optim``'s multi-tensor (``foreach``) update with the rows of the
workers taking a gradient step as its tensor list: worker ``k``'s row is updated as the
optimizer of a rank with one flat parameter would update it, and a pulling worker's row,
momentum and step count are not touched (a rank's inner optimizer is not stepped on a
pull step). Which workers step is known on the host (the coins are drawn there), so the
per-worker step counts, and with them AdamW's bias corrections, are host numbers: with
independent coins the workers' counts differ, each worker has its own. On a GPU each
``torch._foreach_*`` call is one fused launch over the ``m`` rows; nothing is read back.

Supported (:meth:`StackedInner.from_torch`): ``torch.optim.SGD`` (``momentum``,
``dampening``, ``nesterov``, ``weight_decay``) and ``torch.optim.AdamW`` (``betas``,
``eps``, ``weight_decay``); one hyperparameter set for all parameters (one param group, as
``palsgd train`` builds), no ``maximize``, ``amsgrad`` or ``differentiable``. The learning
rate is a host float given to every :meth:`StackedInner.step` (a schedule costs nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from core.errors import UserInputError

__all__ = ["StackedInner", "INNER_KINDS"]

#: the inner optimizers a stacked run supports (the names of ``palsgd train --optimizer``)
INNER_KINDS = ("sgd", "sgd_momentum", "adamw")


@dataclass
class StackedInner:
    """Hyperparameters and per-worker state of the inner optimizer (module docstring).

    ``kind``: one of :data:`INNER_KINDS` (``"sgd"`` with ``momentum > 0`` is the same
    update as ``"sgd_momentum"``). ``lr`` is the base learning rate ``alpha`` (unitless
    step size), read by the caller; the update uses the rate handed to :meth:`step`.
    """

    kind: str
    lr: float
    momentum: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        if self.kind not in INNER_KINDS:
            raise UserInputError(f"inner optimizer {self.kind!r}: use one of {INNER_KINDS}")
        self.steps: np.ndarray | None = None  # (K,) int64: inner steps taken per worker
        self.bufs: dict[str, torch.Tensor] = {}  # momentum / exp_avg, exp_avg_sq: (K, n)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_torch(cls, opt: torch.optim.Optimizer) -> StackedInner:
        """The hyperparameters of ``opt`` (an SGD or AdamW with one hyperparameter set);
        :class:`~core.errors.UserInputError` for anything else."""
        groups = opt.param_groups
        keys = ("lr", "momentum", "dampening", "nesterov", "weight_decay", "betas", "eps")
        first = {k: groups[0].get(k) for k in keys}
        if any({k: g.get(k) for k in keys} != first for g in groups[1:]):
            raise UserInputError("a stacked run takes one hyperparameter set for all param groups")
        g = groups[0]
        for flag in ("maximize", "amsgrad", "differentiable"):
            if g.get(flag):
                raise UserInputError(f"a stacked run does not support {flag}=True")
        lr, wd = float(g["lr"]), float(g["weight_decay"])
        if type(opt) is torch.optim.SGD:
            mom = float(g["momentum"])
            kind = "sgd_momentum" if mom else "sgd"
            return cls(kind, lr, mom, float(g["dampening"]), bool(g["nesterov"]), wd)
        if type(opt) is torch.optim.AdamW:
            b1, b2 = (float(b) for b in g["betas"])
            return cls("adamw", lr, weight_decay=wd, betas=(b1, b2), eps=float(g["eps"]))
        raise UserInputError(
            f"a stacked run supports torch.optim.SGD and torch.optim.AdamW, not "
            f"{type(opt).__name__}"
        )

    def _state(self, x: torch.Tensor, name: str) -> torch.Tensor:
        buf = self.bufs.get(name)
        if buf is None:
            buf = self.bufs[name] = torch.zeros_like(x)
        return buf

    # ------------------------------------------------------------------ the update
    @torch.no_grad()
    def step(self, x: torch.Tensor, g: torch.Tensor, workers: Sequence[int], lr: float) -> None:
        """One inner step with learning rate ``lr`` (unitless) of the workers ``workers``
        (host indices, ascending) on the parameters ``x`` (``(K, n)``, updated in place);
        ``g`` (``(m, n)``, overwritten): row ``i`` is the gradient of worker
        ``workers[i]``. No host synchronisation."""
        if self.steps is None:
            self.steps = np.zeros(x.shape[0], dtype=np.int64)
        rows = list(workers)
        if not rows:
            return
        xs, gs = [x[k] for k in rows], list(g.unbind(0))
        if self.kind == "adamw":
            self.steps[rows] += 1
            self._adamw(x, xs, gs, rows, lr)
        else:
            self._sgd(x, xs, gs, rows, lr)
            self.steps[rows] += 1

    def _sgd(self, x: torch.Tensor, xs: list, gs: list, rows: list[int], lr: float) -> None:
        """``torch.optim.SGD``'s foreach update (the momentum buffer starts as a copy of
        the first gradient)."""
        assert self.steps is not None
        if self.weight_decay != 0:
            torch._foreach_add_(gs, xs, alpha=self.weight_decay)
        if self.momentum != 0:
            buf = self._state(x, "momentum_buffer")
            first = [i for i, k in enumerate(rows) if self.steps[k] == 0]
            later = [i for i, k in enumerate(rows) if self.steps[k] > 0]
            if first:
                torch._foreach_copy_([buf[rows[i]] for i in first], [gs[i] for i in first])
            if later:
                bl = [buf[rows[i]] for i in later]
                torch._foreach_mul_(bl, self.momentum)
                torch._foreach_add_(bl, [gs[i] for i in later], alpha=1 - self.dampening)
            bufs = [buf[k] for k in rows]
            if self.nesterov:
                torch._foreach_add_(gs, bufs, alpha=self.momentum)
            else:
                gs = bufs
        torch._foreach_add_(xs, gs, alpha=-lr)

    def _adamw(self, x: torch.Tensor, xs: list, gs: list, rows: list[int], lr: float) -> None:
        """``torch.optim.AdamW``'s foreach update; the step counts are those after it."""
        assert self.steps is not None
        beta1, beta2 = self.betas
        m, v = self._state(x, "exp_avg"), self._state(x, "exp_avg_sq")
        ms, vs = [m[k] for k in rows], [v[k] for k in rows]
        if self.weight_decay != 0:
            torch._foreach_mul_(xs, 1 - lr * self.weight_decay)
        torch._foreach_lerp_(ms, gs, 1 - beta1)
        torch._foreach_mul_(vs, beta2)
        torch._foreach_addcmul_(vs, gs, gs, 1 - beta2)
        steps = [float(self.steps[k]) for k in rows]
        step_size = [(lr / (1 - beta1**s)) * -1 for s in steps]
        bc2_sqrt = [(1 - beta2**s) ** 0.5 for s in steps]
        denom = torch._foreach_sqrt(vs)
        torch._foreach_div_(denom, bc2_sqrt)
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(xs, ms, denom, step_size)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Copies of the per-worker state (step counts and buffers)."""
        return {
            "steps": None if self.steps is None else self.steps.copy(),
            "bufs": {k: v.clone() for k, v in self.bufs.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        steps = state.get("steps")
        self.steps = None if steps is None else np.array(steps, dtype=np.int64)
        self.bufs = {k: v.clone() for k, v in state.get("bufs", {}).items()}

    def worker_state(self, k: int) -> dict[str, Any]:
        """Worker ``k``'s state as flat tensors (``step``: a float, as torch keeps it)."""
        out: dict[str, Any] = {k2: v[k].clone() for k2, v in self.bufs.items()}
        out["step"] = 0.0 if self.steps is None else float(self.steps[k])
        return out

    def state_bytes(self) -> int:
        """Bytes of the per-worker optimizer state on the device."""
        return sum(v.numel() * v.element_size() for v in self.bufs.values())
