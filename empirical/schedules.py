"""Learning-rate schedules of the inner and the outer optimizer.

``constant``: the base rate. ``cosine``: linear warm-up then cosine decay, the authors'
ImageNet recipe (reference implementation ``resnet_imagenet``: inner warm-up then cosine
to 0; outer warm-up from 0 then cosine), here per step instead of per epoch:

* warm-up, ``s < warmup``: ``base * (s + 1) / warmup`` (reaches ``base`` at the last
  warm-up step; the authors' factor ``e / warmup`` gives a rate of exactly 0 in the first
  epoch, which is not reproduced);
* then ``base * (r + (1 - r) * (1 + cos(pi * q)) / 2)`` with
  ``q = (s - warmup) / (total - warmup)`` clipped to 1 and ``r = min_ratio``.

A ``constant`` schedule with ``warmup > 0`` ramps up and then stays at ``base``.
The inner schedule counts the optimizer steps ``s = t`` over ``total = T``; the outer one
the local steps after the warm-up, ``s = t - T0`` over ``total = T - T0``. PALSGD's pull
uses the scheduled inner rate (its coefficient is ``alpha_t * eta / p``).
"""

from __future__ import annotations

import math

__all__ = ["SCHEDULES", "rate_at"]

SCHEDULES = ("constant", "cosine")


def rate_at(
    kind: str, base: float, step: int, total: int, warmup: int = 0, min_ratio: float = 0.0
) -> float:
    """The rate of schedule ``kind`` at step ``step`` (0-based) of ``total`` steps."""
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule {kind!r}: choose one of {', '.join(SCHEDULES)}")
    step = max(int(step), 0)
    if warmup > 0 and step < warmup:
        return base * (step + 1) / warmup
    if kind == "constant":
        return base
    span = max(int(total) - int(warmup), 1)
    q = min((step - warmup) / span, 1.0)
    return base * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * q)))
