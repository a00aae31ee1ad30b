"""Range and name checks of a :class:`~empirical.config.fields.TrainConfig` that need no
torch: the theory's parameters through :func:`theory.validation.validate`, the trainer's
own (:data:`TRAINER_PARAMS`) reported the same way, and the names of choices."""

from __future__ import annotations

import os
import re
from pathlib import Path

from core.errors import UserInputError
from core.files import check_input_file, missing_reason
from core.limits import check_processes, check_steps
from core.validation import ParameterError, ParamSpec, check_spec
from empirical.config.fields import OPTIMIZERS, PRECISIONS, TrainConfig
from empirical.config.tables import (
    _FIELDS,
    CHOICES,
    FLAGS,
    MATCH_FIELDS,
    RUN_ONLY_FIELDS,
    THEORY_FIELDS,
    _canonical_key,
)
from theory.algorithm import distributed_choices, lookup
from theory.validation import canonicalize, validate

__all__ = [
    "TRAINER_PARAMS",
    "PRECISIONS",
    "validate_config",
    "allowed_changes",
    "check_workers_per_process",
]

#: ranges of the trainer's own numeric parameters (declared with their fields), reported
#: like theory.validation's
TRAINER_PARAMS: dict[str, ParamSpec] = {
    name: ParamSpec(
        name,
        d.help,
        d.range.low,
        d.range.high,
        low_open=d.range.low_open,
        high_open=d.range.high_open,
        integer=d.range.integer,
        unit=d.range.unit,
    )
    for name, d in FLAGS.items()
    if d.range is not None
}

#: a run name: no path separators, not "." or ".." (it names files and W&B runs)
_RUN_NAME = re.compile(r"[A-Za-z0-9_=+,-][A-Za-z0-9._=+,-]{0,199}")


def _cuda_visible() -> bool:
    """Whether a CUDA device may be present (without importing torch: the driver's
    variable or device node); ``auto`` then picks CUDA and the GPU count limits the ranks."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "x") not in ("", "-1") and os.path.exists(
        "/dev/nvidiactl"
    )


_DEVICES = ("auto", "cpu", "cuda")


def validate_config(cfg: TrainConfig) -> TrainConfig:
    """Range checks that need no torch: theory parameters and the trainer's own.

    Names (model, dataset, algorithm) and the stability of the pull
    (``alpha*eta/p``) are checked by :func:`empirical.train.prepare`, which imports the
    registries; both run before any process group is created.
    """
    theory_vals = {k: getattr(cfg, k) for k in THEORY_FIELDS if getattr(cfg, k) is not None}
    validate(theory_vals)
    for name in TRAINER_PARAMS:
        val = getattr(cfg, name)
        if val is not None:
            check_spec(TRAINER_PARAMS[name], val)
    if cfg.optimizer not in OPTIMIZERS:
        raise UserInputError(
            f"unknown inner optimizer '{cfg.optimizer}': choose one of {sorted(OPTIMIZERS)}"
        )
    dev = cfg.device
    if not (dev in _DEVICES or (dev.startswith("cuda:") and dev[5:].isdigit())):
        raise UserInputError(f"unknown device '{dev}': choose auto, cpu, cuda or cuda:N")
    if dev.startswith("cuda:") and cfg.nproc > 1:
        raise UserInputError(
            f"device '{dev}' names one GPU but --nproc {cfg.nproc} processes would share it: "
            "use --device cuda (each rank takes cuda:LOCAL_RANK)"
        )
    choices = {"algorithm": distributed_choices(), **CHOICES}
    for name, allowed in choices.items():
        if getattr(cfg, name) not in allowed:
            raise UserInputError(
                f"option '{name}' = {getattr(cfg, name)!r} is not one of {', '.join(allowed)}"
            )
    _check_shards(cfg)
    check_workers_per_process(cfg)
    if cfg.token_dtype != "auto" and cfg.dataset != "tokens":
        raise UserInputError(
            f"option 'token_dtype' = {cfg.token_dtype!r} applies to the 'tokens' dataset "
            f"(a file of token ids), not '{cfg.dataset}'"
        )
    if cfg.compile and cfg.reference_faithful:
        raise UserInputError(
            "option 'compile' is off in the faithful mode (--reference-faithful runs the "
            "authors' computation as it is): drop --compile or --reference-faithful"
        )
    if cfg.backend == "nccl" and dev == "cpu":
        raise UserInputError("backend 'nccl' needs CUDA devices, but device 'cpu' was given")
    if cfg.lr_warmup > cfg.T:
        raise ParameterError("lr_warmup", cfg.lr_warmup, f"[0, T = {cfg.T}]")
    if cfg.coins_file is not None:  # a bool or float64 trace of shape (T, K) at most
        check_input_file(
            cfg.coins_file,
            "coins file (option coins_file)",
            limit=8 * cfg.T * cfg.nproc * cfg.workers_per_process + 2**16,
        )
    check_steps(cfg.T, "T (option T)")
    if cfg.nproc > 1 and (dev == "cpu" or (dev == "auto" and not _cuda_visible())):
        check_processes(cfg.nproc, "nproc (option nproc)")
    if cfg.run_name is not None and not _RUN_NAME.fullmatch(str(cfg.run_name)):
        raise UserInputError(
            f"run_name (option run_name) = {cfg.run_name!r}: a name, not a path: letters, "
            "digits and . _ - = + , only, not starting with a dot"
        )
    allowed_changes(cfg)
    if cfg.data_path is not None and not Path(cfg.data_path).exists():
        why = missing_reason(cfg.data_path)
        raise UserInputError(f"data path '{cfg.data_path}' (option data_path) {why}")
    if cfg.max_steps_this_run is not None and cfg.checkpoint_interval == 0:
        raise UserInputError(
            "max_steps_this_run stops the run early to be resumed later; it needs "
            "checkpoint_interval > 0 so that there is a checkpoint to resume from"
        )
    return cfg


def _check_shards(cfg: TrainConfig) -> None:
    """``--shards S``: a divisor of ``--nproc``, for the local algorithms only."""
    if cfg.shards == 1:
        return
    if cfg.nproc % cfg.shards:
        raise ParameterError(
            "shards", cfg.shards, f"a divisor of --nproc {cfg.nproc}",
            "K = nproc / shards workers of shards ranks each",
        )  # fmt: skip
    if not lookup(cfg.algorithm).local:
        local = [n for n in distributed_choices() if lookup(n).local]
        raise UserInputError(
            "option 'shards' shards the workers of the local algorithms "
            f"({', '.join(local)}), not {cfg.algorithm!r}"
        )


def _stacked_refusals(cfg: TrainConfig) -> list[tuple[bool, str]]:
    """(refused, why) of every setting a stacked run (``workers_per_process > 1``) does not
    run, in the order they are reported."""
    return [
        (bool(cfg.sync_delay), f"--sync-delay {cfg.sync_delay}: the sync is blocking"),
        (bool(cfg.interleave_outer_steps), "--interleave-outer-steps: the outer steps of a "
         "sync are taken at once"),
        (cfg.precision == "fp16", "--precision fp16: no GradScaler (use bf16 or fp32)"),
        (cfg.shards > 1, f"--shards {cfg.shards}: the stacked workers are not sharded"),
        (cfg.compile, "--compile: the vmapped step is not compiled"),
        (cfg.nproc == 1 and bool(cfg.comm_delay_s or cfg.comm_delay_per_byte_s),
         "--comm-delay-s / --comm-delay-per-byte-s with --nproc 1: there is no all-reduce "
         "to delay"),
    ]  # fmt: skip


def _stackable_algorithms() -> list[str]:
    """The algorithms with local steps closed by an averaging or outer-step sync (the rows
    ``empirical.algorithms.local.SYNC_PARTS`` runs, named here without importing torch)."""
    rows = [(n, lookup(n)) for n in distributed_choices()]
    return [n for n, row in rows if row.local and row.sync in ("average", "outer")]


def check_workers_per_process(cfg: TrainConfig) -> None:
    """Refuse, naming the flags, what ``--workers-per-process W > 1`` does not run: an
    algorithm without local steps, and each setting of :func:`_stacked_refusals`."""
    w = cfg.workers_per_process
    if w == 1:
        return
    if cfg.algorithm not in (stackable := _stackable_algorithms()):
        local = stackable
        raise UserInputError(
            f"--workers-per-process {w} stacks the workers of the algorithms with local "
            f"steps ({', '.join(local)}), not --algorithm {cfg.algorithm}: give "
            "--workers-per-process 1 and --nproc K"
        )
    for refused, why in _stacked_refusals(cfg):
        if refused:
            raise UserInputError(f"--workers-per-process {w} does not support {why}")


def allowed_changes(cfg: TrainConfig) -> tuple[str, ...]:
    """The field names in ``cfg.allow_changed`` (comma-separated, aliases accepted); each
    must be a hyperparameter a resume may change (not in :data:`MATCH_FIELDS` or
    :data:`RUN_ONLY_FIELDS`)."""
    if not cfg.allow_changed:
        return ()
    names = []
    for raw in str(cfg.allow_changed).split(","):
        key = raw.strip()
        if not key:
            continue
        name = _canonical_key(canonicalize({key: 0}, allow_unknown=True).popitem()[0])
        if name not in _FIELDS:
            raise UserInputError(f"allow_changed names '{key}', which is not a training option")
        if name in MATCH_FIELDS:
            raise UserInputError(
                f"allow_changed names '{key}': '{name}' fixes what the checkpoint holds "
                "(model, data, algorithm, schedule of syncs and coins) and cannot change on resume"
            )
        if name in RUN_ONLY_FIELDS:
            raise UserInputError(
                f"allow_changed names '{key}': '{name}' may change on resume without it"
            )
        names.append(name)
    return tuple(names)
