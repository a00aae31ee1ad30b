"""The algorithm spec: one algorithm of the table and its hyperparameters, validated once.

:class:`AlgorithmSpec` is the one description of an algorithm run that every layer takes
(module docstring of :mod:`theory.algorithm`). The rules of the table for one run are its
checks (:func:`_rule_errors`) and methods; the pull coefficient ``alpha*eta/p`` and its
stability verdict are written here once (:func:`pull_coefficient`, :func:`pull_stability`):
``palsgd check`` and ``palsgd train`` both take the verdict.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.validation import ParameterError, check_choice, check_int, check_number
from theory.algorithm.table import (
    ALGORITHMS,
    COINS,
    VARIANTS,
    Algorithm,
    check_sync_delay,
    lookup,
)
from theory.sync import OUTER_ALIASES, OUTERS, is_landing_step, is_sync_step, outer_step
from theory.validation import canonicalize, validate

__all__ = [
    "AlgorithmSpec", "PullStability", "PULL_EDGE", "pull_coefficient", "pull_stability",
    "fields_fixed", "covered_names", "spec_summary", "spec_from_summary",
]  # fmt: skip


#: a pull multiplies ``x - z`` by ``1 - c`` (``c = alpha*eta/p``): pulls contract toward the
#: anchor iff ``|1 - c| < 1``, i.e. ``0 < c < 2``. At ``c = 2`` a pull maps ``x - z`` to
#: ``-(x - z)`` (no contraction: repeated pulls oscillate forever), above 2 they diverge.
PULL_EDGE = 2.0


def pull_coefficient(alpha: Any, eta: Any, p: Any) -> Any:
    """The pull coefficient ``alpha*eta/p`` (0 where ``p = 0``: no pulls); numbers or arrays."""
    if np.ndim(p) == 0:
        return alpha * eta / p if p > 0 else 0.0 * alpha * eta
    p = np.asarray(p, dtype=float)
    return np.where(p > 0, alpha * eta / np.where(p > 0, p, 1.0), 0.0)


@dataclass(frozen=True)
class PullStability:
    """The verdict on a pull coefficient ``c`` (:func:`pull_stability`): ``status``
    ``"ok"`` (``c <= 1``: a pull moves ``x`` part of the way to the anchor), ``"overshoot"``
    (``1 < c < 2``: ``x - z`` changes sign at every pull but shrinks) or ``"unstable"``
    (``c >= 2``: see :data:`PULL_EDGE`). ``coefficient`` is ``None`` without pull steps."""

    coefficient: float | None
    status: str
    message: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def stable(self) -> bool:
        return self.status != "unstable"


def pull_stability(alpha: float, eta: float, p: float) -> PullStability:
    """The verdict on the pull coefficient ``alpha*eta/p`` (the one place it is decided)."""
    if not p > 0:
        return PullStability(None, "ok", "no pull steps (p = 0)")
    c = float(pull_coefficient(alpha, eta, p))
    shown = f"pull coefficient alpha*eta/p = {c:.4g}"
    if c >= PULL_EDGE:
        return PullStability(
            c, "unstable",
            f"{shown} >= 2: a pull multiplies x - z by 1 - c with |1 - c| >= 1, so repeated "
            "pulls do not contract toward the anchor (at 2 they flip x - z, above 2 they "
            f"diverge); choose eta < {PULL_EDGE * p / alpha:.4g}",
        )  # fmt: skip
    if c > 1:
        return PullStability(
            c, "overshoot",
            f"{shown} in (1, 2): a pull step overshoots the anchor (x - z changes sign at "
            "every pull) but still contracts",
        )  # fmt: skip
    return PullStability(
        c,
        "ok",
        f"{shown} <= 1: each pull moves x a fraction of the way to the anchor (no overshoot)",
    )


def _rule_errors(spec: AlgorithmSpec, a: Algorithm, k: str) -> None:
    """The table's rules for ``spec`` (its kind's row ``a``, called ``k`` by the caller);
    raise naming the field."""
    pulls = ", ".join(repr(b.name) for b in ALGORITHMS.values() if b.pulls)
    if spec.p > 0 and not a.pulls:
        raise ParameterError(
            "p", spec.p, f"[0, 0] for {k!r}", f"pull steps exist only in {pulls}"
        )  # fmt: skip
    if spec.outer not in a.outers:
        hint = f": use {a.outer_name!r}" if spec.outer in lookup(a.outer_name or k).outers else ""
        raise UserInputError(
            f"{k!r} takes the outer update(s) {list(a.outers)}, got outer={spec.outer!r}{hint}"
        )
    if spec.coins not in a.coins:
        raise UserInputError(
            f"coins = {spec.coins!r} is a coin model of pull steps; {k!r} has none "
            f"(pull steps exist only in {pulls})"
        )
    if a.warmup == "none" and spec.T0 > 0:
        hint = f"; use {a.warmup_name!r} for a DDP warm-up" if a.warmup_name else ""
        raise ParameterError("T0", spec.T0, f"[0, 0] for {k!r}", f"{a.label} has no warm-up{hint}")
    if a.warmup == "required" and spec.T0 == 0:
        raise ParameterError("T0", 0, "integer in [1, inf)", f"{k} needs a warm-up")
    if spec.outer == "average" and (spec.gamma != 1.0 or spec.mu != 0.0):
        raise UserInputError(
            f"outer='average' is z <- mean_k x_k (gamma = 1, mu = 0), but gamma={spec.gamma!r}, "
            f"mu={spec.mu!r} were given: use outer='sgd' or 'nesterov' for other values"
        )
    if a.elastic and spec.outer_steps_per_sync != 1:
        raise UserInputError(
            f"{k!r} has no outer optimiser (its centre moves by the elastic mixing); got "
            f"outer_steps_per_sync={spec.outer_steps_per_sync}"
        )
    if spec.easgd_alpha is not None and not a.elastic:
        raise UserInputError(
            f"easgd_alpha = {spec.easgd_alpha} is EASGD's elastic coefficient; {k!r} does not "
            "use it"
        )


# ------------------------------------------------------------------ the spec


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm of :data:`ALGORITHMS` and its hyperparameters (validated on
    construction against the table; :meth:`of` also takes a preset name or an alias).

    ``kind``: the table name (an alias such as ``"ddp"`` is stored as its name). ``alpha``:
    the inner learning rate; ``None`` leaves it to the caller (the distributed
    configuration's inner optimiser, a bound's designs, a compared method's tuning grid):
    the simulator and the exact recursions need it. ``outer``, ``gamma``, ``mu`` left as
    ``None`` take the table's defaults: the kind's first outer update with the kind's
    ``gamma``, ``mu`` (DiLoCo: Nesterov 0.7/0.9); another outer update chosen without them
    takes ``gamma = 1, mu = 0`` (as ``torch.optim.SGD``; averaging is ``gamma = 1, mu = 0``).

    ``easgd_alpha``: EASGD's elastic coefficient ``a`` (the paper's ``alpha``, not the
    learning rate ``alpha`` here); ``None`` (default) means Lemma 1's ``2/(K+2)``, the value
    Theorem 3 assumes, resolved with the problem's ``K`` by :meth:`elastic_coef`.
    ``sync_delay``: ``tau`` of the overlapped sync (:mod:`theory.sync`; 0 is the blocking
    sync). ``pull_fraction``: the share of coordinates a pull moves (simulator only).
    """

    kind: str
    alpha: float | None
    H: int = 1
    p: float = 0.0
    eta: float = 0.0
    outer: str | None = None
    gamma: float | None = None
    mu: float | None = None
    T0: int = 0
    coins: str = "independent"
    seed: int = 0
    pull_fraction: float = 1.0
    outer_steps_per_sync: int = 1
    sync_offset: int = 0
    easgd_alpha: float | None = None
    sync_delay: int = 0

    def __post_init__(self) -> None:
        given = self.kind
        a = lookup(given, "algorithm kind")
        set_ = object.__setattr__
        set_(self, "kind", a.name)
        outer = a.outers[0] if self.outer is None else OUTER_ALIASES.get(self.outer, self.outer)
        set_(self, "outer", check_choice("outer optimiser", outer, OUTERS))
        check_choice("coins", self.coins, COINS, plural="coins")
        default = outer == a.outers[0]  # the kind's own gamma, mu go with its default outer
        gamma = (a.gamma if default else 1.0) if self.gamma is None else self.gamma
        mu = (a.mu if default else 0.0) if self.mu is None else self.mu
        num = dict(H=self.H, p=self.p, eta=self.eta, gamma=gamma, mu=mu, T0=self.T0)
        validate(num if self.alpha is None else {"alpha": self.alpha, **num})
        pf = self.pull_fraction
        pf = check_number("pull_fraction", pf, 0, 1, low_open=True)
        for name, val in num.items():
            set_(self, name, int(val) if name in ("H", "T0") else float(val))
        if self.alpha is not None:
            set_(self, "alpha", float(self.alpha))
        set_(self, "pull_fraction", float(pf))
        for name, low in (("seed", 0), ("outer_steps_per_sync", 1), ("sync_offset", 0)):
            set_(self, name, check_int(name, getattr(self, name), low, integral_floats=True))
        set_(self, "sync_delay", check_sync_delay(given, self.sync_delay, self.H))
        _rule_errors(self, a, given)
        if self.easgd_alpha is not None:
            e = self.easgd_alpha
            # the widest range over K >= 1 (2/(K+1) <= 1); elastic_coef checks it per K
            if isinstance(e, bool) or not isinstance(e, int | float) or not 0 <= e < 1:
                raise ParameterError("easgd_alpha", e, "[0, 2/(K+1))", "EASGD stability")
            set_(self, "easgd_alpha", float(e))

    @classmethod
    def of(cls, name: str, **params: Any) -> AlgorithmSpec:
        """The spec of ``name`` (a table name, an alias or a preset of :data:`VARIANTS`) with
        ``params`` (project names or the authors' aliases: ``lr``, ``prob_no_grad``, ...);
        ``alpha`` may be left out (``None``)."""
        values = canonicalize(params, allow_unknown=True)
        preset = VARIANTS.get(name) if isinstance(name, str) else None
        if preset is not None:
            name, values = preset.base, {**dict(preset.values), **values}
        return cls(kind=name, **{"alpha": None, **values})

    @classmethod
    def from_params(cls, kind: str, **params: Any) -> AlgorithmSpec:
        """Build from project names or the authors' aliases (:meth:`of`)."""
        return cls.of(kind, **params)

    def replace(self, **changes: Any) -> AlgorithmSpec:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ the table's view
    @property
    def definition(self) -> Algorithm:
        """The table row of this kind."""
        return ALGORITHMS[self.kind]

    @property
    def local(self) -> bool:
        """True for the methods whose workers take local steps (:attr:`Algorithm.local`)."""
        return self.definition.local

    @property
    def pulls(self) -> bool:
        """True when pull steps happen: a kind with pulls and ``p > 0``."""
        return self.definition.pulls and self.p > 0

    @property
    def shared_coins(self) -> bool:
        return self.coins == "shared"

    @property
    def nesterov(self) -> bool:
        """True for the Nesterov outer update."""
        return self.outer == "nesterov"

    @property
    def uses_anchor(self) -> bool:
        """Whether the anchor ``z`` must be kept between syncs: pulls toward it, an outer
        optimiser stepping on it, an overlapped sync restarting from it, or EASGD's centre
        mixed with the workers (Local SGD with plain, blocking averaging needs none: ``z`` is
        the average computed at the sync)."""
        row = self.definition
        return self.local and (
            row.pulls or row.elastic or self.outer != "average" or self.sync_delay > 0
        )

    @property
    def warmup_steps(self) -> int:
        """The DDP warm-up steps run (``T0``, 0 for a kind without a warm-up)."""
        return self.T0 if self.definition.warms_up else 0

    # ------------------------------------------------------------------ the step
    @property
    def grad_lr(self) -> float:
        """Learning rate of a gradient step in the local phase, ``alpha/(1-p)``."""
        return self.alpha / (1.0 - self.p) if self.p > 0 else self.alpha

    @property
    def pull_coef(self) -> float:
        """Pull coefficient ``alpha*eta/p`` (0 when ``p = 0``; :func:`pull_coefficient`)."""
        return float(pull_coefficient(self.alpha, self.eta, self.p))

    def pull_stability(self, alpha: float | None = None) -> PullStability:
        """The verdict on the pull coefficient at ``alpha`` (default: the spec's;
        :func:`pull_stability`); without pull steps its coefficient is ``None``."""
        alpha = self.alpha if alpha is None else alpha
        if alpha is None:
            raise UserInputError("the pull coefficient alpha*eta/p needs the learning rate alpha")
        validate(alpha=alpha)
        return pull_stability(alpha, self.eta, self.p if self.pulls else 0.0)

    def elastic_coef(self, K: int) -> float:
        """EASGD's elastic coefficient for ``K`` workers (``easgd_alpha`` or ``2/(K+2)``).

        Raises :class:`ParameterError` naming ``easgd_alpha`` unless it lies in
        ``[0, 2/(K+1))`` (Wang and Joshi 2021, Section 4 / Lemma 1: the mixing matrix
        ``W_a`` has the eigenvalues ``1``, ``1 - a`` and ``1 - (K+1) a``, all in ``(-1, 1]``
        exactly on that range). Only for an elastic kind.
        """
        if not self.definition.elastic:
            raise UserInputError(f"kind {self.kind!r} has no elastic coefficient")
        K = check_int("K", K, 1, integral_floats=True)
        a = 2.0 / (K + 2) if self.easgd_alpha is None else self.easgd_alpha
        high = 2.0 / (K + 1)
        if not 0 <= a < high:
            raise ParameterError(
                "easgd_alpha", a, f"[0, 2/(K+1)) = [0, {high:.6g}) for K = {K}",
                "the mixing matrix of EASGD is unstable outside it",
            )  # fmt: skip
        return a

    def is_sync_step(self, t: int) -> bool:
        """Whether a sync follows local step ``t`` (global index; :func:`is_sync_step`)."""
        return bool(is_sync_step(t, self.T0, self.H, self.sync_offset))

    def is_landing_step(self, t: int) -> bool:
        """Whether an overlapped sync's outer update lands right after local step ``t``
        (:func:`is_landing_step`; never with ``sync_delay = 0``)."""
        return bool(is_landing_step(t, self.T0, self.H, self.sync_offset, self.sync_delay))

    def outer_step(self, z: Any, buf: Any, delta: Any) -> tuple[Any, Any]:
        """This algorithm's outer update (:func:`outer_step`)."""
        return outer_step(
            z, buf, delta, outer=self.outer, gamma=self.gamma, mu=self.mu,
            extra_steps=self.outer_steps_per_sync - 1,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def fields_fixed(name: str) -> dict[str, Any]:
    """The spec fields ``name`` (a table name or a preset) fixes itself, with their values:
    ``p`` and ``eta`` without pull steps, the outer update and its ``gamma``, ``mu`` without
    an outer optimiser, and the fields a preset sets. A configuration's defaults for them
    are not the algorithm's (``palsgd train`` drops them, with a note)."""
    row = lookup(name)
    keys = ["p", "eta"] if not row.pulls else []
    if row.outers == ("average",):
        keys += ["outer", "gamma", "mu"]
    if name in VARIANTS:
        keys += [k for k, _ in VARIANTS[name].values]
    own = AlgorithmSpec.of(name, T0=int(row.warmup == "required"))
    return {k: getattr(own, k) for k in dict.fromkeys(keys)}


def covered_names(spec: AlgorithmSpec | None) -> tuple[str, ...]:
    """The names a statement about ``spec`` covers: its kind, and the kind's distributed name
    where that differs (``sgd``: ``ddp``); none for ``None``."""
    if spec is None:
        return ()
    row = spec.definition
    return (row.name,) + ((row.distributed,) if row.distributed not in ("", row.name) else ())


def spec_summary(spec: AlgorithmSpec | None, outers: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """What a bound states about its algorithm, JSON-ready: ``kind``, ``coins``, ``outer``
    and the ``outers`` it covers (:func:`spec_from_summary` reads it back)."""
    if spec is None:
        return None
    return {"kind": spec.kind, "coins": spec.coins, "outer": spec.outer,
            "outers": list(outers or (spec.outer,))}  # fmt: skip


def spec_from_summary(summary: dict[str, Any] | None) -> AlgorithmSpec | None:
    """The spec of :func:`spec_summary` (``None`` for ``None``)."""
    if summary is None:
        return None
    return AlgorithmSpec.of(summary["kind"], coins=summary["coins"], outer=summary["outer"])
