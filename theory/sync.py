"""The sync schedule and the outer update of the methods with rounds, once.

Every layer steps its rounds with these functions: the simulator (:mod:`theory.simulate`),
the exact moment recursions (:mod:`theory.moments`), the distributed algorithms
(:mod:`empirical.algorithms`) and the cost model's step traces. Which algorithm may use which
outer update is the algorithm table's business (:mod:`theory.algorithm`).

Notation (Naganuma et al., TMLR 2025, Algorithm 1; README): ``H`` local steps between syncs
(pull steps count), ``T0`` warm-up steps, ``gamma, mu`` outer learning rate and momentum.

* Sync schedule (:func:`is_sync_step`): a sync follows local step ``t >= T0`` when
  ``(t - T0 + 1 + sync_offset) % H == 0``.
* Outer update (:func:`outer_step`) on the outer gradient ``Delta = z - mean_k x_k``:
  ``"average"``: ``z <- z - Delta = mean_k x_k``; ``"sgd"``: PyTorch
  ``SGD(lr=gamma, momentum=mu, dampening=0)``, i.e. ``buf <- mu buf + Delta``,
  ``z <- z - gamma buf`` (plain ``z <- z - gamma Delta`` at ``mu = 0``); ``"nesterov"``:
  ``buf <- mu buf + Delta``, ``z <- z - gamma (Delta + mu buf)`` (``nesterov=True``;
  DiLoCo, Douillard et al. 2023, Sec. 2).
* Overlapped sync (``sync_delay = tau >= 1``, :func:`is_landing_step`): the outer
  all-reduce runs while the workers compute, and its outer step lands ``tau`` local steps
  later. At the sync after step ``s`` (anchor ``z_r``), worker ``k`` sends
  ``Delta_k = z_r - x_k`` and restarts from the anchor it has, ``x_k <- z_r``; steps
  ``s+1 .. s+tau`` run as usual (pulls toward ``z_r``). Right after step ``s + tau`` the
  outer update lands: ``(z_{r+1}, buf) = outer_step(z_r, buf, mean_k Delta_k)`` and every
  worker keeps its ``tau`` steps of progress, shifted onto the new anchor:
  ``x_k <- x_k + (z_{r+1} - z_r)`` (so ``x_k - z`` is unchanged by the landing). A run
  of ``T`` steps ends with the update in flight landed. ``1 <= tau <= H - 1`` (one
  all-reduce in flight at a time); ``tau = 0`` is the blocking sync above, and with
  ``tau = 0`` the formulas reduce to it (``x_k <- z_r + (z_{r+1} - z_r) = z_{r+1}``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from core.validation import check_choice

__all__ = ["OUTERS", "OUTER_ALIASES", "is_sync_step", "is_landing_step", "outer_step"]

#: the outer updates (:func:`outer_step`)
OUTERS = ("average", "sgd", "nesterov")
#: other spellings of an outer update, read where a user writes one
OUTER_ALIASES = {"avg": "average", "averaging": "average", "mean": "average"}

A = TypeVar("A")


def is_sync_step(t: Any, T0: int, H: int, sync_offset: int = 0) -> Any:
    """Whether a sync follows local step ``t`` (global step index, pull steps count).

    ``t`` may be an int or an integer array (numpy or torch); the result has its type.
    """
    hit = (t - T0 + 1 + sync_offset) % H == 0
    return (t >= T0) & hit


def is_landing_step(t: Any, T0: int, H: int, sync_offset: int, sync_delay: int) -> Any:
    """Whether the outer update of an overlapped sync lands right after local step ``t``:
    the sync after step ``t - sync_delay`` (the module docstring). Never for
    ``sync_delay = 0`` (the blocking sync lands where it starts). Ints or integer arrays."""
    if sync_delay == 0:
        return t < 0
    return is_sync_step(t - sync_delay, T0, H, sync_offset)


def outer_step(
    z: A, buf: A, delta: A, *, outer: str, gamma: float, mu: float, extra_steps: int = 0
) -> tuple[A, A]:
    """One outer update on the outer gradient ``delta = z - mean_k x_k``: ``(z', buf')``.

    Written with ``+``, ``-`` and scalar ``*`` only, so the same function acts on values
    (numpy arrays, torch tensors), on coefficient vectors and on rows of a linear map (the
    exact recursions pass those). ``extra_steps`` further outer steps on a zero outer
    gradient follow (the authors' ``is_intended_impl=False`` with ``A`` micro-batches takes
    ``A - 1``): ``buf <- mu buf`` and ``z <- z - gamma buf`` (SGD with momentum) or
    ``z <- z - gamma mu buf`` (Nesterov); without momentum they do nothing.
    ``"average"`` ignores ``gamma``, ``mu`` and ``buf``. ``gamma`` and ``mu`` may be arrays
    (one value per design, broadcast against the values); an array ``mu`` takes the momentum
    form everywhere, which at ``mu = 0`` gives the same ``z'``.
    """
    if outer == "average":
        return z - delta, buf
    check_choice("outer optimiser", outer, OUTERS)
    nesterov = outer == "nesterov"
    if isinstance(mu, int | float) and mu == 0:
        return z - gamma * delta, buf
    buf = mu * buf + delta
    z = z - gamma * (delta + mu * buf) if nesterov else z - gamma * buf
    for _ in range(extra_steps):
        buf = mu * buf
        z = z - gamma * mu * buf if nesterov else z - gamma * buf
    return z, buf
