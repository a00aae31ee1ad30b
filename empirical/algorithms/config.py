"""Configuration of the distributed algorithms: one frozen dataclass, validated in one place.

An :class:`AlgorithmConfig` holds the algorithm's :class:`~theory.algorithm.AlgorithmSpec`
(the table row of its name, :data:`theory.algorithm.ALGORITHMS`, and its hyperparameters,
validated against the table) plus the switches of the distributed implementation (buffers,
the authors' quirks, the emulated link, memory). Its names (``AlgorithmConfig.name``) are
the table's distributed names (``ddp`` for minibatch SGD, ``local_sgd``, ``post_local_sgd``,
``diloco``, ``palsgd``) and the presets built on them (``slowmo``). PALSGD (Naganuma et al.,
TMLR 2025, Algorithm 1): each local step is, with probability ``p``, a pull
``x <- x - (alpha*eta/p)(x - z)`` toward the anchor ``z`` (no gradient), otherwise an
inner-optimizer step with learning rate ``alpha/(1-p)``.

The outer optimizer acts at every sync on the outer gradient ``Delta = z - mean_k x_k``:
``"average"`` sets ``z <- mean_k x_k`` (SGD with ``gamma = 1``, ``mu = 0``); ``"sgd"`` is
``torch.optim.SGD(lr=gamma, momentum=mu)``; ``"nesterov"`` adds ``nesterov=True``.

All numeric ranges are checked by :mod:`theory.validation`, so the API, the CLI and the
trainer report a bad value with the same message.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from core.errors import UserInputError
from core.validation import ParameterError, check_choice, check_int, check_number
from theory.algorithm import (
    COINS,
    DILOCO_DEFAULT_GAMMA,
    DILOCO_DEFAULT_MU,
    OUTERS,
    PULL_EDGE,
    VARIANTS,
    Algorithm,
    AlgorithmSpec,
    PullStability,
    authors_sync_offset,
    distributed_choices,
    lookup,
)
from theory.validation import validate

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

#: the names ``AlgorithmConfig.name`` takes: the distributed algorithms of the table and the
#: presets built on them (:func:`theory.algorithm.distributed_choices`)
NAMES = distributed_choices()
BUFFERS = ("average", "anchor", "local")
SYNC_SCHEDULES = ("rounds", "global_step")
#: the fields of :class:`~theory.algorithm.AlgorithmSpec` a configuration gives (the rest of
#: its fields are the distributed implementation's own switches)
SPEC_FIELDS = ("H", "p", "eta", "T0", "outer", "gamma", "mu", "coins", "seed",
               "outer_steps_per_sync", "sync_offset", "sync_delay")  # fmt: skip
#: the switches that are booleans
_FLAGS = ("pull_first_tensor_only", "discard_batch_on_pull", "interleave_outer_steps",
          "offload_outer_state")  # fmt: skip


def _row(name: str) -> Algorithm:
    """The table row of a distributed name or a preset."""
    return lookup(name, "name")


@dataclass(frozen=True)
class AlgorithmConfig:
    """Which algorithm to run and its hyperparameters (the authors' notation): the
    algorithm's :class:`~theory.algorithm.AlgorithmSpec` (:attr:`spec`, built from the
    fields of :data:`SPEC_FIELDS` and validated against the algorithm table) plus the
    distributed implementation's own switches.

    ``name``: a distributed name of the table or a preset on one (``"slowmo"``: DiLoCo's
    rounds with outer SGD momentum, :data:`theory.algorithm.VARIANTS`); a preset is resolved
    on construction (``name`` becomes its base, the preset's outer settings fill the fields
    left ``None``). ``outer``, ``gamma`` and ``mu`` left as ``None`` take the algorithm's
    defaults (the table): ``diloco`` gets Nesterov with ``gamma = 0.7, mu = 0.9``; every
    other name gets ``"average"`` with ``gamma = 1, mu = 0``. After construction they are
    always set.

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
    steps (:meth:`DistributedAlgorithm.micro_batch_done`); otherwise all at once. The
    Nesterov outer optimiser is ``torch.optim.SGD(nesterov=True)``, which needs ``mu > 0``.

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
    later, ``1 <= tau <= H - 1`` (:mod:`theory.sync` writes the update down;
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
    #: the algorithm these fields describe (built on construction)
    spec: AlgorithmSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        check_choice("name", self.name, NAMES)
        preset = VARIANTS.get(self.name)
        if preset is not None:
            for key, val in preset.values:
                if getattr(self, key) is None:
                    set_(self, key, val)
        row = _row(self.name)
        set_(self, "name", row.distributed)
        check_choice("sync_schedule", self.sync_schedule, SYNC_SCHEDULES)
        if self.sync_schedule == "global_step":
            check_int("H", self.H, 1)
            check_int("T0", self.T0, 0)
            warm = self.T0 if row.warms_up else 0
            derived = authors_sync_offset(self.name, warm, self.H)
            if self.sync_offset is not None and self.sync_offset % self.H != derived:
                raise ParameterError(
                    "sync_offset",
                    self.sync_offset,
                    f"[{derived}, {derived}] (mod H) for sync_schedule='global_step'",
                    f"the authors' schedule at T0={self.T0}, H={self.H} is offset {derived}; "
                    "leave sync_offset unset or use sync_schedule='rounds'",
                )
            set_(self, "sync_offset", derived)
        elif self.sync_offset is None:
            set_(self, "sync_offset", 0)
        if self.outer is not None:
            check_choice("outer", self.outer, OUTERS)
        check_choice("coins", self.coins, COINS)
        spec = AlgorithmSpec(
            row.name, None, **{k: getattr(self, k) for k in SPEC_FIELDS}
        )  # validated against the table
        set_(self, "spec", spec)
        for key in ("outer", "gamma", "mu"):
            set_(self, key, getattr(spec, key))
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
        row = _row(check_choice("name", kw.setdefault("name", "palsgd"), NAMES))
        if not row.local:
            return cls(**kw)
        preset: dict[str, Any] = {"buffers": "anchor", "sync_schedule": "global_step"}
        if row.pulls:
            preset.update(
                coins="shared",
                pull_first_tensor_only=True,
                discard_batch_on_pull=True,
                outer_steps_per_sync=1 if a is None else a,
                interleave_outer_steps=True,
            )
        elif a is not None and "outer_steps_per_sync" not in kw:
            pulls = [n for n in NAMES if _row(n).pulls]
            raise UserInputError(
                f"'A' is used by the reference-faithful preset of {pulls} only, not {kw['name']!r}"
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
        """Plain dict of the fields (JSON-serialisable; the spec is rebuilt from them)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}

    # ------------------------------------------------------------------ properties
    @property
    def has_pulls(self) -> bool:
        """True when pull steps can happen (an algorithm with pulls and ``p > 0``)."""
        return self.spec.pulls

    @property
    def uses_anchor(self) -> bool:
        """True when the algorithm must store the anchor ``z`` between syncs
        (:attr:`theory.algorithm.AlgorithmSpec.uses_anchor`)."""
        return self.spec.uses_anchor

    @property
    def warmup_steps(self) -> int:
        """Number of gradient-all-reduce warm-up steps (0 for ``ddp`` and ``local_sgd``)."""
        return self.spec.warmup_steps

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Check the implementation's own switches; raise
        :class:`~core.errors.UserInputError` naming the bad one. The algorithm's fields
        (``name``, ``H``, ``p``, ``eta``, ``T0``, the outer optimiser, ``coins``, ...) are
        checked by the :class:`~theory.algorithm.AlgorithmSpec` built from them, against the
        algorithm table. Stability of the pull (``alpha*eta/p``) depends on ``alpha`` and is
        checked by :func:`check_stability`.
        """
        check_choice("buffers", self.buffers, BUFFERS)
        for flag in _FLAGS:
            if not isinstance(getattr(self, flag), bool):
                raise UserInputError(f"'{flag}' must be True or False, got {getattr(self, flag)!r}")
        check_int("consensus_interval", self.consensus_interval, 0)
        for name in ("comm_delay_s", "comm_delay_per_byte_s"):
            check_number(name, getattr(self, name), 0, unit="seconds")
        if self.clip_grad_norm is not None:
            check_number("clip_grad_norm", self.clip_grad_norm, 0, low_open=True)
        if self.spec.nesterov and self.mu == 0:  # torch.optim.SGD(nesterov=True) needs it
            raise ParameterError(
                "mu", self.mu, "(0, 1)", "outer='nesterov' needs a momentum mu > 0"
            )
        if self.sync_delay and self.interleave_outer_steps:
            raise UserInputError(
                "sync_delay > 0 (the overlapped sync) lands all outer steps at once; it does "
                "not combine with interleave_outer_steps"
            )


#: the verdict on the pull coefficient (:class:`theory.algorithm.PullStability`)
StabilityReport = PullStability


def check_stability(
    config: AlgorithmConfig, alpha: float, *, strict: bool = False
) -> StabilityReport:
    """The verdict of the algorithm's spec on its pull coefficient ``c = alpha*eta/p``
    (:meth:`theory.algorithm.AlgorithmSpec.pull_stability`, the one place it is decided:
    ``palsgd check`` takes the same). A pull maps ``x - z`` to ``(1 - c)(x - z)``, so pulls
    contract iff ``0 < c < 2``; ``c >= 2`` is unstable (at 2 a pull flips ``x - z``),
    ``c > 1`` overshoots the anchor. ``alpha`` is the inner learning rate (for a schedule,
    its largest value). With ``strict=True`` an unstable configuration raises
    :class:`~core.validation.ParameterError` on ``eta``.
    """
    validate(alpha=alpha)
    rep = config.spec.pull_stability(alpha)
    if strict and not rep.stable:
        limit = PULL_EDGE * config.p / alpha
        raise ParameterError("eta", config.eta, f"[0, {limit:.6g})", rep.message)
    return rep
