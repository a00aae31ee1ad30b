"""The algorithm spec: names, hyperparameters, the sync schedule and the outer update, once.

Every layer takes its description of an algorithm from here: the simulator
(:mod:`theory.simulate`), the exact moment recursions (:mod:`theory.moments`), the
verifier, the distributed configuration (:mod:`empirical.algorithms.config`) and the cost
model.

Notation (Naganuma et al., TMLR 2025, Algorithm 1; README): ``K`` workers, ``H`` local steps
between syncs (pull steps count), ``p`` pull probability, ``alpha`` inner learning rate,
``eta`` pull rate (pull coefficient ``alpha*eta/p``), ``T0`` warm-up steps, ``gamma, mu``
outer learning rate and momentum.

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

from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from theory.validation import (
    ParameterError,
    UserInputError,
    canonicalize,
    check_choice,
    check_int,
    validate,
)

__all__ = [
    "NAMES",
    "KINDS",
    "DISTRIBUTED_NAMES",
    "LOCAL_NAMES",
    "WARMUP_NAMES",
    "OUTERS",
    "COINS",
    "DILOCO_DEFAULT_GAMMA",
    "DILOCO_DEFAULT_MU",
    "AlgorithmSpec",
    "is_sync_step",
    "is_landing_step",
    "check_sync_delay",
    "authors_sync_offset",
    "outer_step",
]

#: Every algorithm the toolkit knows ("sgd" in theory is "ddp" on torch.distributed).
NAMES = ("sgd", "ddp", "local_sgd", "post_local_sgd", "diloco", "palsgd", "easgd")
#: The algorithms of the theory layer (simulator, exact recursions).
KINDS = ("sgd", "local_sgd", "post_local_sgd", "diloco", "palsgd", "easgd")
#: The algorithms on ``torch.distributed``.
DISTRIBUTED_NAMES = ("ddp", "local_sgd", "post_local_sgd", "diloco", "palsgd")
#: The algorithms with rounds of local steps and an outer update.
LOCAL_NAMES = ("local_sgd", "post_local_sgd", "diloco", "palsgd")
#: The algorithms that take a DDP warm-up of ``T0`` steps.
WARMUP_NAMES = ("post_local_sgd", "diloco", "palsgd")
OUTERS = ("average", "sgd", "nesterov")
COINS = ("independent", "shared")

#: DiLoCo's outer Nesterov settings (Douillard et al. 2023, Sec. 2: lr 0.7, momentum 0.9).
DILOCO_DEFAULT_GAMMA = 0.7
DILOCO_DEFAULT_MU = 0.9

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


def check_sync_delay(name: str, sync_delay: Any, H: Any) -> int:
    """The validated ``sync_delay`` of algorithm ``name`` with ``H`` local steps per round:
    ``0``, or ``1 <= sync_delay <= H - 1`` for the methods with rounds (:data:`LOCAL_NAMES`;
    EASGD's mixing and minibatch SGD have no outer all-reduce to overlap)."""
    tau = check_int("sync_delay", sync_delay, 0, integral_floats=True)
    if tau == 0:
        return 0
    if name not in LOCAL_NAMES:
        raise ParameterError(
            "sync_delay", tau, f"[0, 0] for {name!r}",
            "the overlapped sync delays the outer step of the methods with rounds: "
            + ", ".join(LOCAL_NAMES),
        )  # fmt: skip
    if tau > int(H) - 1:
        raise ParameterError(
            "sync_delay", tau, f"integer in [0, H - 1] = [0, {int(H) - 1}]",
            "the outer step must land before the next sync starts (one all-reduce in flight)",
        )  # fmt: skip
    return tau


def authors_sync_offset(name: str, T0: int, H: int) -> int:
    """The ``sync_offset`` that reproduces the authors' absolute-counter sync test.

    The authors' code tests the sync on its step counter ``global_step`` (warm-up steps
    included) right after each local step (docs/reference-faithful.md): PALSGD syncs after
    the step that makes ``(global_step + 1) % H == 0``, DiLoCo, Local and Post-Local SGD
    after the step that makes ``global_step % H == 0``. Step ``s`` leaves
    ``global_step = s + 1`` and :func:`is_sync_step` syncs after ``s >= T0`` with
    ``(s - T0 + 1 + offset) % H == 0``, so the offset is ``(T0 + 1) mod H`` for PALSGD and
    ``T0 mod H`` for the others (``T0`` = the warm-up steps actually run).
    """
    return (T0 + (1 if name == "palsgd" else 0)) % H


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
    if isinstance(mu, int | float) and mu == 0:
        return z - gamma * delta, buf
    buf = mu * buf + delta
    z = z - gamma * (delta + mu * buf) if outer == "nesterov" else z - gamma * buf
    for _ in range(extra_steps):
        buf = mu * buf
        z = z - gamma * mu * buf if outer == "nesterov" else z - gamma * buf
    return z, buf


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm and its hyperparameters (validated on construction).

    ``kind``: ``"sgd"`` (minibatch SGD / DDP: gradients averaged every step; ``H`` and the
    outer settings are not used), ``"local_sgd"`` (``p = 0``, outer ``"average"``,
    ``T0 = 0``), ``"post_local_sgd"`` (Local SGD after ``T0 >= 1`` warm-up steps),
    ``"diloco"`` (``p = 0`` with outer ``"sgd"`` or ``"nesterov"``), ``"palsgd"`` (any
    ``p`` in ``[0, 1)``, any outer optimiser), ``"easgd"`` (``p = 0``, no outer optimiser:
    ``outer="average"`` and ``outer_steps_per_sync = 1``; the elastic mixing every ``H``
    steps instead of a restart). See the module docstring for the exact step.

    ``easgd_alpha``: EASGD's elastic coefficient ``a`` (the paper's ``alpha``, not the
    learning rate ``alpha`` here); ``None`` (default) means Lemma 1's ``2/(K+2)``, the value
    Theorem 3 assumes, resolved with the problem's ``K`` by :meth:`elastic_coef`. Allowed:
    ``[0, 2/(K+1))``, the range the paper states for a stable mixing matrix ``W_a``
    (``a = 0``: no mixing, independent SGD per worker and a frozen centre). Only
    ``kind="easgd"`` takes it.

    ``sync_delay``: ``tau`` of the overlapped sync (module docstring; 0, the default, is the
    blocking sync; ``1 <= tau <= H - 1`` for the kinds with rounds).
    """

    kind: str
    alpha: float
    H: int = 1
    p: float = 0.0
    eta: float = 0.0
    outer: str = "average"
    gamma: float = 1.0
    mu: float = 0.0
    T0: int = 0
    coins: str = "independent"
    seed: int = 0
    pull_fraction: float = 1.0
    outer_steps_per_sync: int = 1
    sync_offset: int = 0
    easgd_alpha: float | None = None
    sync_delay: int = 0

    def __post_init__(self) -> None:
        check_choice("algorithm kind", self.kind, KINDS)
        check_choice("outer optimiser", self.outer, OUTERS)
        check_choice("coins", self.coins, COINS, plural="coins")
        validate(
            alpha=self.alpha, H=self.H, p=self.p, eta=self.eta, gamma=self.gamma, mu=self.mu,
            T0=self.T0,
        )  # fmt: skip
        pf = self.pull_fraction
        if isinstance(pf, bool) or not (isinstance(pf, int | float) and 0 < pf <= 1):
            raise ParameterError("pull_fraction", pf, "(0, 1]")
        set_ = object.__setattr__
        set_(self, "H", int(self.H))
        set_(self, "T0", int(self.T0))
        set_(self, "alpha", float(self.alpha))
        set_(self, "p", float(self.p))
        set_(self, "eta", float(self.eta))
        set_(self, "gamma", float(self.gamma))
        set_(self, "mu", float(self.mu))
        set_(self, "pull_fraction", float(pf))
        set_(self, "seed", check_int("seed", self.seed, 0, integral_floats=True))
        set_(
            self,
            "outer_steps_per_sync",
            check_int("outer_steps_per_sync", self.outer_steps_per_sync, 1, integral_floats=True),
        )
        set_(
            self, "sync_offset", check_int("sync_offset", self.sync_offset, 0, integral_floats=True)
        )
        k = self.kind
        set_(self, "sync_delay", check_sync_delay(k, self.sync_delay, self.H))
        if k != "palsgd" and self.p != 0:
            raise UserInputError(
                f"kind {k!r} has no pull steps (p = 0); got p = {self.p}: use kind='palsgd'"
            )
        if k in ("local_sgd", "post_local_sgd") and self.outer != "average":
            raise UserInputError(
                f"kind {k!r} averages the models (outer='average'); got outer={self.outer!r}: "
                "use kind='diloco' or 'palsgd'"
            )
        if k == "diloco" and self.outer == "average":
            raise UserInputError(
                "kind 'diloco' needs an outer optimiser ('nesterov' or 'sgd'); "
                "with outer='average' use kind='local_sgd'"
            )
        if k == "local_sgd" and self.T0 > 0:
            raise UserInputError(
                "kind 'local_sgd' has no warm-up; with T0 > 0 use 'post_local_sgd'"
            )
        if k == "post_local_sgd" and self.T0 == 0:
            raise ParameterError("T0", 0, "integer in [1, inf)", "post_local_sgd needs a warm-up")
        if k == "easgd":
            if self.outer != "average" or self.outer_steps_per_sync != 1:
                raise UserInputError(
                    "kind 'easgd' has no outer optimiser (its centre variable moves by the "
                    f"elastic mixing); got outer={self.outer!r}, "
                    f"outer_steps_per_sync={self.outer_steps_per_sync}"
                )
            if self.easgd_alpha is not None:
                a = self.easgd_alpha
                # the widest range over K >= 1 (2/(K+1) <= 1); elastic_coef checks it per K
                if isinstance(a, bool) or not isinstance(a, int | float) or not 0 <= a < 1:
                    raise ParameterError("easgd_alpha", a, "[0, 2/(K+1))", "EASGD stability")
                set_(self, "easgd_alpha", float(a))
        elif self.easgd_alpha is not None:
            raise UserInputError(
                f"easgd_alpha = {self.easgd_alpha} is EASGD's elastic coefficient; kind {k!r} "
                "does not use it: use kind='easgd'"
            )

    @classmethod
    def from_params(cls, kind: str, **params: Any) -> AlgorithmSpec:
        """Build from project names or the authors' aliases (``lr``, ``prob_no_grad``, ...)."""
        return cls(kind=kind, **canonicalize(params, allow_unknown=True))

    @property
    def local(self) -> bool:
        """True for the methods with local steps (every kind except ``"sgd"``)."""
        return self.kind != "sgd"

    @property
    def grad_lr(self) -> float:
        """Learning rate of a gradient step in the local phase, ``alpha/(1-p)``."""
        return self.alpha / (1.0 - self.p) if self.p > 0 else self.alpha

    @property
    def pull_coef(self) -> float:
        """Pull coefficient ``alpha*eta/p`` (0 when ``p = 0``)."""
        return self.alpha * self.eta / self.p if self.p > 0 else 0.0

    def elastic_coef(self, K: int) -> float:
        """EASGD's elastic coefficient for ``K`` workers (``easgd_alpha`` or ``2/(K+2)``).

        Raises :class:`ParameterError` naming ``easgd_alpha`` unless it lies in
        ``[0, 2/(K+1))`` (Wang and Joshi 2021, Section 4 / Lemma 1: the mixing matrix
        ``W_a`` has the eigenvalues ``1``, ``1 - a`` and ``1 - (K+1) a``, all in ``(-1, 1]``
        exactly on that range). Only for ``kind="easgd"``.
        """
        if self.kind != "easgd":
            raise UserInputError(f"kind {self.kind!r} has no elastic coefficient")
        K = check_int("K", K, 1, integral_floats=True)
        a = 2.0 / (K + 2) if self.easgd_alpha is None else self.easgd_alpha
        high = 2.0 / (K + 1)
        if not 0 <= a < high:
            raise ParameterError(
                "easgd_alpha",
                a,
                f"[0, 2/(K+1)) = [0, {high:.6g}) for K = {K}",
                "the mixing matrix of EASGD is unstable outside it",
            )
        return a

    def is_sync_step(self, t: int) -> bool:
        """Whether a sync follows local step ``t`` (global index; :func:`is_sync_step`)."""
        return bool(is_sync_step(t, self.T0, self.H, self.sync_offset))

    def is_landing_step(self, t: int) -> bool:
        """Whether an overlapped sync's outer update lands right after local step ``t``
        (:func:`is_landing_step`; never with ``sync_delay = 0``)."""
        return bool(is_landing_step(t, self.T0, self.H, self.sync_offset, self.sync_delay))

    def outer_step(self, z: A, buf: A, delta: A) -> tuple[A, A]:
        """This algorithm's outer update (:func:`outer_step`)."""
        return outer_step(
            z, buf, delta, outer=self.outer, gamma=self.gamma, mu=self.mu,
            extra_steps=self.outer_steps_per_sync - 1,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
