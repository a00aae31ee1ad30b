"""The algorithm table: every algorithm the toolkit knows, with its parts, once.

:data:`ALGORITHMS` is the one table of algorithm definitions (:class:`Algorithm`): name,
aliases, local steps or not, its sync rule (:data:`SYNC_RULES`), pull steps or not, warm-up,
allowed outer updates, coin models, exact oracle, simulator, distributed name and the
implementation that runs it (:data:`IMPLEMENTATION_KEYS`; the trainer reads the row's
``implementation``, ``local`` and ``sync``, never a list of names). Every list of names,
argparse choice and help text of the toolkit is derived from it (the name lists below,
:func:`distributed_choices`, :func:`describe_choices`); :data:`VARIANTS` names compositions
of its parts. The rules it implies for one run are :mod:`theory.algorithm.spec`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.validation import ParameterError, check_choice, check_int
from theory.sync import OUTERS

__all__ = [
    "Algorithm", "Variant", "ALGORITHMS", "SYNC_RULES", "IMPLEMENTATION_KEYS", "VARIANTS",
    "COINS", "NAMES", "KINDS", "DISTRIBUTED_NAMES", "LOCAL_NAMES", "WARMUP_NAMES",
    "DILOCO_DEFAULT_GAMMA", "DILOCO_DEFAULT_MU", "LABELS", "lookup", "distributed_choices", "describe_choices", "local_choices",
    "check_sync_delay", "authors_sync_offset",
]  # fmt: skip

#: the coin models of the pull steps: one coin per worker and step, or one for all workers
COINS = ("independent", "shared")
#: warm-up rules (:attr:`Algorithm.warmup`)
WARMUPS = ("none", "optional", "required", "ignored")
#: exact oracles (:attr:`Algorithm.exact`): the moment recursions of :mod:`theory.moments`,
#: EASGD's batched recursion, or Local SGD with one worker (an all-reduce base)
EXACT = ("moments", "elastic", "all_reduce", "")
#: sync rules (:attr:`Algorithm.sync`): the models (or, without local steps, the gradients)
#: averaged, an outer update of the anchor by the averaged outer gradient, or EASGD's
#: elastic mixing of the workers and a centre
SYNC_RULES = ("average", "outer", "elastic")
#: the distributed implementations a row may name (:attr:`Algorithm.implementation`; the
#: classes are :data:`empirical.algorithms.IMPLEMENTATIONS`): torch's DDP, or rounds of
#: local steps closed by a sync part (:data:`empirical.algorithms.local.SYNC_PARTS`)
IMPLEMENTATION_KEYS = ("ddp", "local")


@dataclass(frozen=True)
class Algorithm:
    """One row of the algorithm table.

    ``local``: the workers take local steps between syncs (minibatch SGD and an all-reduce
    base average their gradients at every step). ``sync``: the sync rule
    (:data:`SYNC_RULES`): ``"average"`` (``z <- mean_k x_k``; every step's gradients
    without local steps), ``"outer"`` (an outer update of the anchor, averaging among its
    choices) or ``"elastic"`` (EASGD's elastic mixing instead of a restart from the
    anchor). ``rounds``: a sync closes every ``H`` steps. ``pulls``: pull steps toward the
    anchor (``p > 0`` allowed). ``warmup``: the DDP warm-up ``T0``: ``"none"`` (``T0 = 0``;
    :attr:`warmup_name` has one), ``"optional"``, ``"required"`` (``T0 >= 1``) or
    ``"ignored"`` (every step already averages). ``outers``: the outer updates allowed, the
    default first, with the default ``gamma`` and ``mu`` of a non-averaging one;
    ``outer_name``: the algorithm that runs the same rounds with an outer optimiser (Local
    SGD's is DiLoCo's rounds). ``coins``: the coin models of the pulls. ``exact``: its exact
    oracle (:data:`EXACT`). ``simulated``: :mod:`theory.simulate` runs it.
    ``distributed``: its name on ``torch.distributed`` (``""``: none), shown as
    ``distributed_label`` where that differs from ``label``; ``implementation``: the
    implementation that runs it there (:data:`IMPLEMENTATION_KEYS`), named exactly when
    ``distributed`` is (the trainer builds it, or refuses a row whose local steps and sync
    rule that implementation does not run: :func:`empirical.algorithms.implementation_for`).
    ``sync_shift``: the authors' code tests the sync on ``global_step + sync_shift``
    (:func:`authors_sync_offset`).
    """

    name: str
    label: str
    summary: str
    source: str
    aliases: tuple[str, ...] = ()
    local: bool = True
    sync: str = "average"
    rounds: bool = True
    pulls: bool = False
    warmup: str = "optional"
    warmup_name: str = ""
    outer_name: str = ""
    outers: tuple[str, ...] = ("average",)
    gamma: float = 1.0
    mu: float = 0.0
    coins: tuple[str, ...] = ("independent",)
    exact: str = "moments"
    simulated: bool = True
    distributed: str = ""
    distributed_label: str = ""
    implementation: str = ""
    sync_shift: int = 0

    def __post_init__(self) -> None:
        assert self.warmup in WARMUPS and self.exact in EXACT
        assert set(self.outers) <= set(OUTERS) and set(self.coins) <= set(COINS)
        if self.sync not in SYNC_RULES:
            raise ValueError(f"row {self.name!r}: sync {self.sync!r} is not one of {SYNC_RULES}")
        if self.sync == "average" and self.outers != ("average",):
            raise ValueError(
                f"row {self.name!r}: sync 'average' has no outer update, but outers = "
                f"{self.outers}: its sync rule is 'outer'"
            )
        if self.implementation not in ("", *IMPLEMENTATION_KEYS):
            raise ValueError(
                f"row {self.name!r}: implementation {self.implementation!r} is not one of "
                f"{IMPLEMENTATION_KEYS}"
            )
        if bool(self.distributed) != bool(self.implementation):
            raise ValueError(
                f"row {self.name!r}: a distributed name and an implementation go together "
                f"(distributed={self.distributed!r}, implementation={self.implementation!r})"
            )

    @property
    def elastic(self) -> bool:
        """Whether its sync is EASGD's elastic mixing (``sync == "elastic"``)."""
        return self.sync == "elastic"

    @property
    def warms_up(self) -> bool:
        """Whether it runs a DDP warm-up of ``T0`` steps (optional or required)."""
        return self.warmup in ("optional", "required")

    @property
    def overlappable(self) -> bool:
        """Whether its sync can overlap the local steps (``sync_delay``): rounds of local
        steps closed by an outer update (not EASGD's elastic mixing)."""
        return self.local and self.rounds and not self.elastic


_TABLE = (
    Algorithm(
        "sgd", "minibatch SGD (DDP)", "gradients averaged at every step",
        "Ghadimi & Lan 2013; torch DistributedDataParallel",
        aliases=("ddp", "minibatch", "minibatch_sgd", "mbsgd"), local=False, rounds=False,
        warmup="ignored", distributed="ddp", distributed_label="DDP", implementation="ddp",
    ),
    Algorithm(
        "local_sgd", "Local SGD", "H local steps, then the models are averaged",
        "Stich, ICLR 2019; Lin et al., ICLR 2020", warmup="none",
        warmup_name="post_local_sgd", outer_name="diloco", distributed="local_sgd",
        implementation="local",
    ),
    Algorithm(
        "post_local_sgd", "Post-Local SGD", "T0 >= 1 DDP warm-up steps, then Local SGD",
        "Lin et al., ICLR 2020", warmup="required", outer_name="diloco",
        distributed="post_local_sgd", implementation="local",
    ),
    Algorithm(
        "diloco", "DiLoCo", "Local SGD rounds with an outer optimiser (Nesterov 0.7/0.9)",
        "Douillard et al. 2023, Sec. 2", sync="outer", outers=("nesterov", "sgd"), gamma=0.7,
        mu=0.9, distributed="diloco", implementation="local",
    ),
    Algorithm(
        "palsgd", "PALSGD", "with probability p a pull toward the anchor, else a gradient step",
        "Naganuma et al., TMLR 2025, Algorithm 1", sync="outer", pulls=True,
        outers=("average", "sgd", "nesterov"), coins=COINS, distributed="palsgd",
        implementation="local", sync_shift=1,
    ),
    Algorithm(
        "easgd", "EASGD", "elastic mixing of the workers and a centre every H steps",
        "Zhang, Choromanska & LeCun, NeurIPS 2015; Wang & Joshi, JMLR 2021, Sec. 4",
        sync="elastic", exact="elastic", distributed="easgd", implementation="local",
    ),
    Algorithm(
        "slowmo_ar_sgd", "SlowMo over all-reduce SGD",
        "gradients averaged at every step, an outer heavy-ball step every H steps",
        "Wang, Tantia, Ballas & Rabbat, ICLR 2020, eqs. (2)-(3)", local=False, sync="outer",
        warmup="none", outers=("sgd",), exact="all_reduce", simulated=False,
    ),
)  # fmt: skip

#: the algorithm table, by name
ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in _TABLE}


@dataclass(frozen=True)
class Variant:
    """A named composition of the table's parts: a base algorithm and the values it fixes
    (an outer update, its rate and momentum); given values override them."""

    name: str
    base: str
    label: str
    summary: str
    source: str
    values: tuple[tuple[str, Any], ...]


#: named compositions (a new variant of existing parts is one entry here; docs/algorithms.md)
VARIANTS: dict[str, Variant] = {
    p.name: p
    for p in (
        Variant(
            "slowmo", "diloco", "SlowMo over Local SGD",
            "Local SGD rounds with an outer SGD step of slow momentum (heavy ball)",
            "Wang, Tantia, Ballas & Rabbat, ICLR 2020, Algorithm 1 with the Local SGD base; "
            "slow rate 1, slow momentum 0.5 (fairscale SlowMoDistributedDataParallel defaults)",
            (("outer", "sgd"), ("gamma", 1.0), ("mu", 0.5)),
        ),
    )
}  # fmt: skip

#: every algorithm the toolkit runs (simulated or distributed), with the distributed names
NAMES = tuple(
    dict.fromkeys(
        n for a in _TABLE if a.simulated or a.distributed for n in (a.name, a.distributed) if n
    )
)
#: the algorithms of the simulator and the exact recursions (:mod:`theory.simulate`)
KINDS = tuple(a.name for a in _TABLE if a.simulated)
#: the algorithms on ``torch.distributed``
DISTRIBUTED_NAMES = tuple(a.distributed for a in _TABLE if a.distributed)
#: the algorithms with rounds of local steps closed by an outer update
LOCAL_NAMES = tuple(a.name for a in _TABLE if a.overlappable)
#: the algorithms that take a DDP warm-up of ``T0`` steps
WARMUP_NAMES = tuple(a.name for a in _TABLE if a.warms_up)
#: DiLoCo's outer Nesterov settings (Douillard et al. 2023, Sec. 2: lr 0.7, momentum 0.9)
DILOCO_DEFAULT_GAMMA = ALGORITHMS["diloco"].gamma
DILOCO_DEFAULT_MU = ALGORITHMS["diloco"].mu

#: the display name of every name of the table, its distributed names and its presets
LABELS: dict[str, str] = {
    **{a.name: a.label for a in _TABLE},
    **{a.distributed: a.distributed_label or a.label for a in _TABLE if a.distributed},
    **{p.name: p.label for p in VARIANTS.values()},
}
_KEYS = {k: a.name for a in _TABLE for k in (a.name, *a.aliases, a.distributed) if k}


def lookup(name: Any, what: str = "algorithm") -> Algorithm:
    """The table row of ``name`` (a name, an alias such as ``ddp``, a distributed name, or a
    preset of :data:`VARIANTS`: its base); an unknown one is refused naming ``what`` and the
    known names."""
    if isinstance(name, str) and name in VARIANTS:
        name = VARIANTS[name].base
    key = _KEYS.get(name) if isinstance(name, str) else None
    if key is None:
        check_choice(what, name, (*_KEYS, *VARIANTS))
    return ALGORITHMS[key]


def distributed_choices() -> tuple[str, ...]:
    """The names ``palsgd train --algorithm`` takes: the distributed algorithms and the
    presets whose base has a distributed implementation."""
    presets = (p.name for p in VARIANTS.values() if ALGORITHMS[p.base].distributed)
    return DISTRIBUTED_NAMES + tuple(presets)


def local_choices() -> tuple[str, ...]:
    """The algorithms with rounds of local steps (:data:`LOCAL_NAMES`) and the variants on
    them (SlowMo over Local SGD): the methods the cost model compares with DDP."""
    return LOCAL_NAMES + tuple(v.name for v in VARIANTS.values() if v.base in LOCAL_NAMES)


def describe_choices(names: tuple[str, ...]) -> str:
    """One help line per name: ``name: label, summary`` (table rows and presets)."""
    parts = []
    for n in names:
        row = VARIANTS.get(n) or lookup(n)
        parts.append(f"{n}: {row.label}, {row.summary}")
    return "; ".join(parts)


def check_sync_delay(name: str, sync_delay: Any, H: Any) -> int:
    """The validated ``sync_delay`` of algorithm ``name`` with ``H`` local steps per round:
    ``0``, or ``1 <= sync_delay <= H - 1`` for the methods with rounds (:data:`LOCAL_NAMES`;
    EASGD's mixing and minibatch SGD have no outer all-reduce to overlap)."""
    tau = check_int("sync_delay", sync_delay, 0, integral_floats=True)
    if tau == 0:
        return 0
    if not lookup(name).overlappable:
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
    after the step that makes ``global_step % H == 0`` (:attr:`Algorithm.sync_shift`). Step
    ``s`` leaves ``global_step = s + 1`` and :func:`is_sync_step` syncs after ``s >= T0``
    with ``(s - T0 + 1 + offset) % H == 0``, so the offset is ``(T0 + sync_shift) mod H``
    (``T0`` = the warm-up steps actually run).
    """
    return (T0 + lookup(name).sync_shift) % H
