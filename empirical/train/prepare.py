"""Everything bad input can fail, checked on each rank before its process group exists:
names, data, the algorithm and its stability, the device, recorded coins and the
checkpoint to resume from (:func:`prepare`); and the inner optimizer."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from core.errors import UserInputError
from empirical import data as data_mod
from empirical import models
from empirical.algorithms import AlgorithmConfig, check_stability, recorded_coins
from empirical.checkpoint import (
    check_compatible,
    intact_checkpoints,
    latest_complete,
    read_manifest,
    resolve_resume,
)
from empirical.config import ALGORITHM_FIELDS, MATCH_DEFAULTS, TrainConfig
from empirical.distributed import bind_device, device_for_rank
from empirical.resume import check_resume, checkpoint_meta
from empirical.train.options import PROG
from empirical.train.outcomes import rank_tag
from empirical.train.stacked import check_stacked_algorithm
from theory.algorithm import lookup

__all__ = [
    "Prepared",
    "prepare",
    "algorithm_config",
    "backend_of",
    "resolve_device",
    "check_devices",
    "check_names",
    "check_seq_len",
    "MAX_SEQ_LEN",
    "build_inner_optimizer",
]

#: the task of each dataset name (as :func:`empirical.data.build_dataset` builds them),
#: for the model/dataset check before ranks launch (the datasets themselves are built by
#: each rank)
_DATASET_TASKS = {
    "embedded-text": "lm",
    "tinystories": "lm",
    "tokens": "lm",
    "embedded-images": "image",
    "cifar10": "image",
    "imagefolder": "image",
}


@dataclass
class Prepared:
    """What :func:`prepare` found: everything that can fail on bad input, before any
    process group exists."""

    cfg: TrainConfig
    algorithm: AlgorithmConfig
    stability: Any  # empirical.algorithms.StabilityReport
    task: str
    train_set: Any
    eval_set: Any
    model_overrides: dict[str, Any]
    vocab_size: int | None
    num_classes: int | None
    rank: int
    world_size: int
    local_rank: int
    device: str
    resume_dir: Path | None
    manifest: dict[str, Any] | None
    changed: dict[str, tuple[Any, Any]]
    resume_candidates: list[int] | None  # intact steps here (--resume auto), newest first
    resume_error: str | None  # a resume problem of this rank, reported after agreement
    coin_trace: Any  # recorded coins (numpy array) or None


def _world() -> tuple[int, int, int]:
    """``(rank, world_size, local_rank)`` from an existing group or the torchrun env."""
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), local
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")), local


def algorithm_config(cfg: TrainConfig) -> AlgorithmConfig:
    """The :class:`empirical.algorithms.AlgorithmConfig` of a training configuration."""
    kw = {ALGORITHM_FIELDS[k]: getattr(cfg, k) for k in ALGORITHM_FIELDS}
    kw = {k: v for k, v in kw.items() if v is not None}
    if kw.get("clip_grad_norm") == 0:
        kw["clip_grad_norm"] = None
    if cfg.reference_faithful:
        if lookup(cfg.algorithm).pulls and "outer_steps_per_sync" not in kw:
            kw["A"] = cfg.A
        return AlgorithmConfig.reference_faithful(**kw)
    return AlgorithmConfig(**kw)


def backend_of(cfg: TrainConfig, device: str) -> str:
    """The process-group backend: ``cfg.backend`` or, for ``auto``, NCCL on CUDA."""
    if cfg.backend != "auto":
        return cfg.backend
    return "nccl" if device.startswith("cuda") else "gloo"


def _requested_device(cfg: TrainConfig) -> str:
    """``cfg.device`` with ``auto`` read as CUDA when it is available, else the CPU."""
    if cfg.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return cfg.device


def resolve_device(cfg: TrainConfig, local_rank: int, world_size: int = 1) -> str:
    """This rank's device, decided once from its ``local_rank`` and bound with
    ``torch.cuda.set_device`` (see :func:`empirical.distributed.bind_device` for the rules
    and their errors): ``"cpu"`` or ``"cuda:I"``, the device the rank then uses as it is."""
    device = _requested_device(cfg)
    return str(bind_device(device, backend_of(cfg, device), local_rank, world_size))


def check_devices(cfg: TrainConfig, nproc: int) -> None:
    """Check, without binding anything in this process, that each of ``nproc`` local
    ranks has a device (raises :class:`UserInputError` naming the first that has none)."""
    device = _requested_device(cfg)
    backend = backend_of(cfg, device)
    for local in range(nproc):
        device_for_rank(device, backend, local, nproc)


def check_names(cfg: TrainConfig) -> str:
    """The model's task, after checking the model and dataset names and that their tasks
    agree (raises :class:`UserInputError` naming the option)."""
    task = models.model_task(cfg.model)
    if cfg.dataset not in data_mod.DATASET_NAMES:
        raise UserInputError(
            f"unknown dataset '{cfg.dataset}' (--dataset): known datasets are "
            f"{', '.join(data_mod.DATASET_NAMES)}"
        )
    data_task = _DATASET_TASKS.get(cfg.dataset, task)
    if data_task != task:
        raise UserInputError(
            f"--model '{cfg.model}' (task: {task}) does not fit --dataset '{cfg.dataset}' "
            f"(task: {data_task})"
        )
    return task


#: the longest ``--seq-len`` a language model is trained with unless its own context is
#: longer: above the model's context its position table is extended, and attention's time
#: and memory grow with the square of the length (100,000 tokens would run for hours)
MAX_SEQ_LEN = 4096


def check_seq_len(cfg: TrainConfig, spec: dict[str, Any]) -> int:
    """The context of the model to train (``spec``: its :func:`empirical.models.model_spec`),
    after refusing a ``--seq-len`` above :data:`MAX_SEQ_LEN` and the model's own context."""
    context = int(spec.get("max_position_embeddings", cfg.seq_len))
    cap = max(MAX_SEQ_LEN, context)
    if cfg.seq_len > cap:
        raise UserInputError(
            f"--seq-len {cfg.seq_len} is above the cap of {cap} tokens (model '{cfg.model}' "
            f"has a context of {context}; attention's cost grows with the square of the "
            "length): give a shorter --seq-len"
        )
    return context


def _build_datasets(cfg: TrainConfig, task: str) -> tuple[Any, Any]:
    """The training split and (with evaluation) the validation split."""
    kw: dict[str, Any] = {"tokenizer": cfg.tokenizer} if task == "lm" else {}
    if cfg.dataset == "tokens":
        kw.update(_token_file_options(cfg))
    splits = ("train", "val") if cfg.eval_interval > 0 else ("train",)
    try:
        if cfg.pretokenize:
            if cfg.dataset != "tinystories":
                raise UserInputError(
                    f"option 'pretokenize' applies to the 'tinystories' dataset, not "
                    f"'{cfg.dataset}'"
                )
            kw["pretokenize"] = True
        built = [
            data_mod.build_dataset(
                cfg.dataset, path=cfg.data_path, split=s, seq_len=cfg.seq_len, seed=cfg.seed, **kw
            )
            for s in splits
        ]
    except (UserInputError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        raise UserInputError(
            f"dataset '{cfg.dataset}' (--data-path {cfg.data_path}): {exc}"
        ) from None
    data_task = getattr(built[0], "task", task)
    if data_task != task:
        raise UserInputError(
            f"model '{cfg.model}' is a {task} model but dataset '{cfg.dataset}' is a "
            f"{data_task} dataset"
        )
    return built[0], built[1] if len(built) > 1 else None


def _token_file_options(cfg: TrainConfig) -> dict[str, Any]:
    """The ``tokens`` dataset's dtype, and the vocabulary its ids must fit: the
    tokenizer's with ``--tokenizer``, else the model's (:mod:`empirical.data.token_file`)."""
    out: dict[str, Any] = {"token_dtype": cfg.token_dtype}
    if cfg.tokenizer is None:
        out["vocab_size"] = models.model_spec(cfg.model)["vocab_size"]
    return out


def _load_coins(path: str | None) -> np.ndarray | None:
    """The recorded coins of ``--coins-file`` (shape and values checked here)."""
    if path is None:
        return None
    try:
        trace = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UserInputError(f"coins file '{path}' cannot be read: {exc}") from None
    recorded_coins(trace)
    return trace


@dataclass
class _ResumeChoice:
    directory: Path | None = None
    manifest: dict[str, Any] | None = None
    candidates: list[int] | None = None
    error: str | None = None
    changed: dict[str, tuple[Any, Any]] | None = None


def _newest_intact(cfg: TrainConfig, root: Path, rank: int, world_size: int) -> _ResumeChoice:
    """``--resume auto``: the newest checkpoint intact here; damaged newer ones are skipped
    with a warning."""
    meta = checkpoint_meta(cfg, world_size)

    def same_run(manifest: dict[str, Any], directory: Path) -> None:
        check_compatible(manifest, meta, directory, MATCH_DEFAULTS)

    good, bad = intact_checkpoints(root, rank, same_run)
    choice = _ResumeChoice(candidates=[step for step, _ in good])
    if good:
        choice.directory = good[0][1]
    for directory, why in bad:
        if choice.directory is None or directory.name > choice.directory.name:
            print(
                f"{PROG}: warning{rank_tag()}: skipping checkpoint '{directory}': {why}",
                file=sys.stderr,
            )
    return choice


def _find_resume(cfg: TrainConfig, rank: int, world_size: int) -> _ResumeChoice:
    """The checkpoint this rank would resume from, checked against this run."""
    root = cfg.checkpoint_path()
    resume = cfg.resume
    if resume is None and int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0:
        resume = "auto"  # a torchrun restart continues from the latest checkpoint
    choice = _ResumeChoice()
    try:
        if resume == "auto":
            choice = _newest_intact(cfg, root, rank, world_size)
        else:
            choice.directory = resolve_resume(resume, root)
        if choice.directory is not None:
            choice.manifest = read_manifest(choice.directory)
            choice.changed = check_resume(cfg, choice.directory, choice.manifest, world_size)
    except UserInputError as exc:
        if world_size == 1:
            raise
        # only this rank may see the problem (storage not shared): report it after the
        # process group exists, on every rank, instead of leaving the others waiting
        choice.error = str(exc)
    if resume is None and choice.error is None and not cfg.overwrite:
        latest = latest_complete(root)
        if latest is not None:
            raise UserInputError(
                f"checkpoint directory '{root}' already holds checkpoints (latest "
                f"'{latest.name}'): pass --resume auto to continue that run, "
                "--overwrite to start afresh, or choose another --output-dir/--checkpoint-dir"
            )
    return choice


def prepare(cfg: TrainConfig, rank: int | None = None, world_size: int | None = None) -> Prepared:
    """Every check that bad input can fail, without a process group (so that a bad option
    makes every rank exit 2 instead of leaving the others waiting in a collective).

    Names (model, dataset, algorithm), the data path, the algorithm's fields, the pull's
    stability (``alpha*eta/p >= 2`` is an error, ``> 1`` a warning; see
    :func:`empirical.algorithms.check_stability`), the device and the checkpoint to resume
    from (format, match with this run, files present with the recorded sizes).
    """
    r, ws, local = _world()
    rank = r if rank is None else rank
    world_size = ws if world_size is None else world_size
    task = check_names(cfg)
    alg = algorithm_config(cfg)
    check_stacked_algorithm(cfg, alg)
    stability = check_stability(alg, cfg.alpha, strict=True)
    overrides: dict[str, Any] = {}
    if task == "lm":
        context = check_seq_len(cfg, models.model_spec(cfg.model))
        if cfg.seq_len > context:
            overrides["max_position_embeddings"] = cfg.seq_len
    train_set, eval_set = _build_datasets(cfg, task)
    device = resolve_device(cfg, local, world_size)
    coin_trace = _load_coins(cfg.coins_file)  # before any collective
    found = _find_resume(cfg, rank, world_size)
    return Prepared(
        cfg=cfg,
        algorithm=alg,
        stability=stability,
        task=task,
        train_set=train_set,
        eval_set=eval_set,
        model_overrides=overrides,
        vocab_size=getattr(train_set, "vocab_size", None) if task == "lm" else None,
        num_classes=getattr(train_set, "num_classes", None) if task == "image" else None,
        rank=rank,
        world_size=world_size,
        local_rank=local,
        device=device,
        resume_dir=found.directory,
        manifest=found.manifest,
        changed=found.changed or {},
        resume_candidates=found.candidates,
        resume_error=found.error,
        coin_trace=coin_trace,
    )


#: the inner optimizers of :data:`empirical.config.OPTIMIZERS`, built from a configuration
_INNER_OPTIMIZERS: dict[str, Any] = {
    "sgd": lambda params, cfg: torch.optim.SGD(
        params, lr=cfg.alpha, weight_decay=cfg.weight_decay
    ),
    "sgd_momentum": lambda params, cfg: torch.optim.SGD(
        params, lr=cfg.alpha, momentum=cfg.momentum, weight_decay=cfg.weight_decay
    ),
    "adamw": lambda params, cfg: torch.optim.AdamW(
        params, lr=cfg.alpha, betas=(cfg.beta1, cfg.beta2), eps=1e-8,
        weight_decay=cfg.weight_decay,
    ),
}  # fmt: skip


def build_inner_optimizer(cfg: TrainConfig, params) -> torch.optim.Optimizer:
    """The inner ``torch.optim`` optimizer (learning rate ``alpha``; the algorithm applies
    the ``1/(1-p)`` scaling of PALSGD's gradient steps itself)."""
    build = _INNER_OPTIMIZERS.get(cfg.optimizer)
    if build is None:  # pragma: no cover (the configuration's choices)
        raise UserInputError(f"unknown inner optimizer '{cfg.optimizer}'")
    return build(list(params), cfg)
