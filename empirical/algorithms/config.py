"""Configuration of the distributed algorithms: one frozen dataclass, validated in one place.

Names (``AlgorithmConfig.name``):

* ``"ddp"``: ``torch.nn.parallel.DistributedDataParallel``, gradients all-reduced every step.
* ``"local_sgd"``: local steps from the start, a sync every ``H`` steps (no warm-up, ``T0 = 0``).
* ``"post_local_sgd"``: ``T0`` warm-up steps with gradient all-reduce, then Local SGD
  (Lin et al., "Don't use large mini-batches, use local SGD", ICLR 2020).
* ``"diloco"``: Post-Local SGD whose outer optimizer defaults to Nesterov SGD with
  ``gamma = 0.7, mu = 0.9`` (Douillard et al., "DiLoCo", 2023, Sec. 2).
* ``"palsgd"``: PALSGD (Naganuma et al., TMLR 2025, Algorithm 1): each local step is, with
  probability ``p``, a pull ``x <- x - (alpha*eta/p)(x - z)`` toward the anchor ``z``
  (no gradient), otherwise an inner-optimizer step with learning rate ``alpha/(1-p)``.

The outer optimizer acts at every sync on the outer gradient ``Delta = z - mean_k x_k``:
``"average"`` sets ``z <- mean_k x_k`` (SGD with ``gamma = 1``, ``mu = 0``); ``"sgd"`` is
``torch.optim.SGD(lr=gamma, momentum=mu)``; ``"nesterov"`` adds ``nesterov=True``.

All numeric ranges are checked by :mod:`theory.validation`, so the API, the CLI and the
trainer report a bad value with the same message.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from theory.algorithm import (
    COINS,
    DILOCO_DEFAULT_GAMMA,
    DILOCO_DEFAULT_MU,
    DISTRIBUTED_NAMES,
    OUTERS,
    WARMUP_NAMES,
    authors_sync_offset,
    check_sync_delay,
)
from theory.validation import ParameterError, UserInputError, check_choice, check_int, validate

__all__ = [
    "AlgorithmConfig",
    "StabilityReport",
    "check_stability",
    "NAMES",
    "OUTERS",
    "COINS",
    "BUFFERS",
    "SYNC_SCHEDULES",
    "authors_sync_offset",
    "DILOCO_DEFAULT_GAMMA",
    "DILOCO_DEFAULT_MU",
]

NAMES = DISTRIBUTED_NAMES
BUFFERS = ("average", "anchor", "local")
SYNC_SCHEDULES = ("rounds", "global_step")


@dataclass(frozen=True)
class AlgorithmConfig:
    """Which algorithm to run and its hyperparameters (the authors' notation).

    ``outer``, ``gamma`` and ``mu`` left as ``None`` take the algorithm's defaults:
    ``diloco`` gets Nesterov with ``gamma = 0.7, mu = 0.9``; every other name gets
    ``"average"`` with ``gamma = 1, mu = 0``. After construction they are always set.

    Timing: local steps are numbered ``t = 0, 1, ...`` (pull steps count). Steps ``t < T0``
    are warm-up steps (gradient all-reduce, identical workers). A sync happens right after
    local step ``t >= T0`` when ``(t - T0 + 1 + sync_offset) % H == 0``. With
    ``sync_schedule = "rounds"`` (default) ``sync_offset`` defaults to 0: every round is
    exactly ``H`` steps. With ``sync_schedule = "global_step"`` the sync follows the
    authors' absolute step counter and ``sync_offset`` is derived from ``T0`` and ``H``
    (:func:`authors_sync_offset`; a different explicit value is an error).

    Outer steps: ``outer_steps_per_sync = A > 1`` takes ``A - 1`` further outer steps on a
    zero outer gradient after each sync (Q5). With ``interleave_outer_steps`` they are taken
    as the authors' code takes them, one after each of the first ``A - 1`` micro-batches of
    the following step, so micro-batch ``j`` (``j = 1..A``) is evaluated after ``j`` outer
    steps (:meth:`DistributedAlgorithm.micro_batch_done`); otherwise all at once.

    ``consensus_interval``: the consensus distance ``mean_k ||x_k - xbar||^2`` is computed at
    every ``consensus_interval``-th sync (0: never; it costs two reductions over the model).

    Reference-faithful switches (each off by default; reference-implementation.md §6):
    ``pull_first_tensor_only`` (Q1), ``coins = "shared"`` (Q4), ``discard_batch_on_pull``
    (Q3: consulted by the trainer), ``outer_steps_per_sync = A`` (Q5 / §4),
    ``sync_schedule = "global_step"`` (Q8), ``interleave_outer_steps`` (§4),
    ``buffers = "anchor"`` (Q10).

    Memory: ``offload_outer_state`` keeps the outer momentum in (pinned) CPU memory between
    syncs; it is moved to the device for the outer step only.

    Emulated slow link (:mod:`empirical.algorithms.slowlink`, for checking the cost model on
    one machine): every all-reduce of ``n`` payload bytes is followed by an extra delay of
    ``comm_delay_s + n * comm_delay_per_byte_s`` seconds (both 0 by default: no delay).

    Overlapped sync (``sync_delay = tau``, 0 by default: the blocking sync): the sync's
    all-reduce is started asynchronously and its outer step lands ``tau`` local steps
    later, ``1 <= tau <= H - 1`` (:mod:`theory.algorithm` writes the update down;
    :mod:`empirical.algorithms.overlap`). Not with ``interleave_outer_steps``.
    """

    name: str
    H: int = 1
    p: float = 0.0
    eta: float = 0.0
    T0: int = 0
    outer: str | None = None
    gamma: float | None = None
    mu: float | None = None
    coins: str = "independent"
    seed: int = 0
    clip_grad_norm: float | None = None
    buffers: str = "average"
    pull_first_tensor_only: bool = False
    discard_batch_on_pull: bool = False
    outer_steps_per_sync: int = 1
    sync_offset: int | None = None
    sync_schedule: str = "rounds"
    interleave_outer_steps: bool = False
    consensus_interval: int = 1
    offload_outer_state: bool = False
    comm_delay_s: float = 0.0
    comm_delay_per_byte_s: float = 0.0
    sync_delay: int = 0

    def __post_init__(self) -> None:
        check_choice("name", self.name, NAMES)
        diloco = self.name == "diloco"
        outer = self.outer if self.outer is not None else ("nesterov" if diloco else "average")
        check_choice("outer", outer, OUTERS)
        if outer == "average":
            gamma = 1.0 if self.gamma is None else self.gamma
            mu = 0.0 if self.mu is None else self.mu
        else:
            gamma = (
                self.gamma if self.gamma is not None else (DILOCO_DEFAULT_GAMMA if diloco else 1.0)
            )
            mu = self.mu if self.mu is not None else (DILOCO_DEFAULT_MU if diloco else 0.0)
        object.__setattr__(self, "outer", outer)
        object.__setattr__(self, "gamma", gamma)
        object.__setattr__(self, "mu", mu)
        check_choice("sync_schedule", self.sync_schedule, SYNC_SCHEDULES)
        if self.sync_schedule == "global_step":
            check_int("H", self.H, 1)
            check_int("T0", self.T0, 0)
            derived = authors_sync_offset(self.name, self.warmup_steps, self.H)
            if self.sync_offset is not None and self.sync_offset % self.H != derived:
                raise ParameterError(
                    "sync_offset",
                    self.sync_offset,
                    f"[{derived}, {derived}] (mod H) for sync_schedule='global_step'",
                    f"the authors' schedule at T0={self.T0}, H={self.H} is offset {derived}; "
                    "leave sync_offset unset or use sync_schedule='rounds'",
                )
            object.__setattr__(self, "sync_offset", derived)
        elif self.sync_offset is None:
            object.__setattr__(self, "sync_offset", 0)
        self.validate()

    # ------------------------------------------------------------------ construction helpers
    @classmethod
    def reference_faithful(cls, **kw: Any) -> AlgorithmConfig:
        """The authors' code's behaviour (reference-implementation.md §3.6, §6), quirks on.

        Every name but ``ddp``: the authors' sync schedule on the absolute step counter
        (``sync_schedule = "global_step"``, Q8: the offset follows from ``T0`` and ``H``)
        and workers reset to the anchor's stale buffers (Q10). For ``palsgd`` (the default
        name) also: shared coins (Q4), pull on the first parameter tensor only (Q1), the
        batch of a pull step discarded (Q3), ``outer_steps_per_sync = A`` (the README's
        ``--is_intended_impl False`` with ``A`` micro-batches, Q5; give ``A=`` or
        ``outer_steps_per_sync=``) with the extra outer steps interleaved with the next
        step's micro-batches as in the authors' code (§4). Any field given in ``kw``
        overrides the preset.
        """
        kw = dict(kw)
        a = kw.pop("A", None)
        name = kw.setdefault("name", "palsgd")
        if name == "ddp":
            return cls(**kw)
        preset: dict[str, Any] = {"buffers": "anchor", "sync_schedule": "global_step"}
        if name == "palsgd":
            preset.update(
                coins="shared",
                pull_first_tensor_only=True,
                discard_batch_on_pull=True,
                outer_steps_per_sync=1 if a is None else a,
                interleave_outer_steps=True,
            )
        elif a is not None and "outer_steps_per_sync" not in kw:
            raise UserInputError(
                f"'A' is used by the reference-faithful preset of 'palsgd' only, not {name!r}"
            )
        preset.update(kw)
        return cls(**preset)

    def replace(self, **changes: Any) -> AlgorithmConfig:
        """A copy with some fields changed (validated again; a derived ``sync_offset`` is
        derived again)."""
        if self.sync_schedule == "global_step" and "sync_offset" not in changes:
            changes["sync_offset"] = None
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (JSON-serialisable)."""
        return dataclasses.asdict(self)

    # ------------------------------------------------------------------ properties
    @property
    def has_pulls(self) -> bool:
        """True when pull steps can happen (PALSGD with ``p > 0``)."""
        return self.name == "palsgd" and self.p > 0

    @property
    def uses_anchor(self) -> bool:
        """True when the algorithm must store the anchor ``z`` between syncs.

        PALSGD pulls toward it; SGD/Nesterov outer optimizers step on it; an overlapped
        sync restarts the workers from it while the all-reduce runs. Local SGD with plain,
        blocking averaging needs no anchor (``z`` is the average computed at the sync).
        """
        return self.name != "ddp" and (
            self.name == "palsgd" or self.outer != "average" or self.sync_delay > 0
        )

    @property
    def warmup_steps(self) -> int:
        """Number of gradient-all-reduce warm-up steps (0 for ``ddp`` and ``local_sgd``)."""
        return int(self.T0) if self.name in WARMUP_NAMES else 0

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Check every field; raise :class:`~theory.validation.UserInputError` naming the bad one.

        Numeric ranges go through :func:`theory.validation.validate` (``H >= 1`` integer,
        ``0 <= p < 1``, ``eta >= 0``, ``gamma > 0``, ``0 <= mu < 1``, ``T0 >= 0`` integer).
        Stability of the pull (``alpha*eta/p``) depends on ``alpha`` and is checked by
        :func:`check_stability`.
        """
        check_choice("name", self.name, NAMES)
        check_choice("outer", self.outer, OUTERS)
        check_choice("coins", self.coins, COINS)
        check_choice("buffers", self.buffers, BUFFERS)
        validate(H=self.H, p=self.p, eta=self.eta, T0=self.T0, gamma=self.gamma, mu=self.mu)
        for flag in (
            "pull_first_tensor_only",
            "discard_batch_on_pull",
            "interleave_outer_steps",
            "offload_outer_state",
        ):
            if not isinstance(getattr(self, flag), bool):
                raise UserInputError(f"'{flag}' must be True or False, got {getattr(self, flag)!r}")
        check_int("outer_steps_per_sync", self.outer_steps_per_sync, 1)
        check_int("sync_offset", self.sync_offset, 0)
        check_int("consensus_interval", self.consensus_interval, 0)
        check_int("seed", self.seed, 0)
        for name in ("comm_delay_s", "comm_delay_per_byte_s"):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or not (math.isfinite(v) and v >= 0)
            ):
                raise ParameterError(name, v, "[0, inf) seconds")
        if self.clip_grad_norm is not None:
            c = self.clip_grad_norm
            if (
                isinstance(c, bool)
                or not isinstance(c, int | float)
                or not (math.isfinite(c) and c > 0)
            ):
                raise ParameterError("clip_grad_norm", c, "(0, inf) or None")
        if self.outer == "average" and (self.gamma != 1.0 or self.mu != 0.0):
            raise UserInputError(
                f"outer='average' is z <- mean_k x_k (gamma = 1, mu = 0), but gamma={self.gamma!r}, "
                f"mu={self.mu!r} were given: use outer='sgd' or 'nesterov' for other values"
            )
        if self.outer == "nesterov" and self.mu == 0:
            raise ParameterError(
                "mu", self.mu, "(0, 1)", "outer='nesterov' needs a momentum mu > 0"
            )
        if self.name != "palsgd" and self.p > 0:
            raise ParameterError(
                "p",
                self.p,
                "[0, 0] for " + repr(self.name),
                "pull steps exist only in 'palsgd'; use name='palsgd'",
            )
        check_sync_delay(self.name, self.sync_delay, self.H)
        if self.sync_delay and self.interleave_outer_steps:
            raise UserInputError(
                "sync_delay > 0 (the overlapped sync) lands all outer steps at once; it does "
                "not combine with interleave_outer_steps"
            )
        if self.name == "local_sgd" and self.T0 != 0:
            raise ParameterError(
                "T0",
                self.T0,
                "[0, 0] for 'local_sgd'",
                "Local SGD has no warm-up; use name='post_local_sgd' for a DDP warm-up",
            )


@dataclass(frozen=True)
class StabilityReport:
    """Outcome of :func:`check_stability`.

    ``coefficient`` is the pull coefficient ``c = alpha*eta/p`` (``None`` without pulls).
    ``status``: ``"ok"`` (``c <= 1``: the pull moves ``x`` part of the way to ``z``),
    ``"overshoot"`` (``1 < c < 2``: ``x - z`` changes sign at every pull but still shrinks),
    ``"unstable"`` (``c >= 2``: a pull does not shrink ``x - z``; for ``c > 2`` it grows).
    """

    coefficient: float | None
    status: str
    message: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def check_stability(
    config: AlgorithmConfig, alpha: float, *, strict: bool = False
) -> StabilityReport:
    """Check the pull coefficient ``c = alpha*eta/p`` of a PALSGD configuration.

    A pull maps ``x - z`` to ``(1 - c)(x - z)`` (Algorithm 1 of Naganuma et al. 2025), so a
    sequence of pulls contracts iff ``|1 - c| < 1``, i.e. ``0 < c < 2``; ``c > 1`` overshoots
    the anchor. ``alpha`` is the inner learning rate (for a schedule, its largest value).
    With ``strict=True`` an unstable configuration raises
    :class:`~theory.validation.ParameterError` on ``eta``.
    """
    validate(alpha=alpha)
    if not config.has_pulls or config.eta == 0:
        return StabilityReport(None, "ok", "no pull steps (p = 0, eta = 0 or not PALSGD)")
    c = alpha * config.eta / config.p
    if c >= 2:
        msg = (
            f"pull coefficient alpha*eta/p = {alpha}*{config.eta}/{config.p} = {c:.4g} >= 2: "
            "a pull multiplies x - z by (1 - c), |1 - c| >= 1, so pulls do not contract toward "
            f"the anchor (unstable); choose eta < {2 * config.p / alpha:.4g}"
        )
        if strict:
            raise ParameterError("eta", config.eta, f"[0, {2 * config.p / alpha:.6g})", msg)
        return StabilityReport(c, "unstable", msg)
    if c > 1:
        return StabilityReport(
            c,
            "overshoot",
            f"pull coefficient alpha*eta/p = {c:.4g} > 1: each pull overshoots the anchor "
            "(x - z changes sign) but still contracts",
        )
    return StabilityReport(c, "ok", f"pull coefficient alpha*eta/p = {c:.4g} <= 1")
