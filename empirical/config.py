"""Configuration of ``palsgd train``: one dataclass, presets, config files, CLI overrides.

Precedence (later wins): the preset (``tiny`` unless ``--preset`` names another), then
the ``--config`` file (YAML or JSON, a flat mapping), then command-line flags.

Every key may be given under the project's name or the authors'-code alias, through
:func:`theory.validation.canonicalize` (``lr`` -> ``alpha``, ``prob_no_grad`` -> ``p``,
``sync_interval`` -> ``H``, ``outer_lr`` -> ``gamma``, ``outer_momentum`` -> ``mu``,
``local_sgd_start_iter`` -> ``T0``, ``grad_accu_step`` -> ``A``, ``steps`` -> ``T``); the
same parameter under two names is an error. Numeric ranges are checked by
:func:`theory.validation.validate` for the theory's parameters and by the same
:class:`~theory.validation.ParameterError` for the trainer's own ones
(:data:`TRAINER_PARAMS`), so every bad value is reported the same way: name, value, range.

Algorithm fields left at ``None`` take :class:`empirical.algorithms.AlgorithmConfig`'s
defaults (or those of ``AlgorithmConfig.reference_faithful`` with
``reference_faithful=True``).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, get_type_hints

from empirical.schedules import SCHEDULES
from theory.validation import (
    ParameterError,
    ParamSpec,
    UserInputError,
    canonicalize,
    read_mapping_file,
    validate,
)

__all__ = [
    "TrainConfig",
    "PRESETS",
    "TRAINER_PARAMS",
    "THEORY_FIELDS",
    "ALGORITHM_FIELDS",
    "MATCH_FIELDS",
    "RUN_ONLY_FIELDS",
    "FIELD_ALIASES",
    "allowed_changes",
    "OPTIMIZERS",
    "load_config_file",
    "resolve_config",
    "validate_config",
    "config_to_dict",
    "config_from_dict",
]

#: inner optimizers the trainer builds (torch.optim): name -> description
OPTIMIZERS: dict[str, str] = {
    "sgd": "torch.optim.SGD, no momentum",
    "sgd_momentum": "torch.optim.SGD with heavy-ball momentum `momentum`",
    "adamw": "torch.optim.AdamW with betas (beta1, beta2), eps 1e-8",
}


@dataclass
class TrainConfig:
    """Everything one training run needs; the unit of a step is one optimizer step.

    Notation (the authors'): ``alpha`` inner learning rate, ``p`` pull probability, ``eta``
    pull rate (pull coefficient ``alpha*eta/p``), ``H`` local steps between syncs (pull
    steps count), ``T0`` DDP warm-up steps, ``gamma``/``mu`` outer learning rate and
    momentum, ``A`` micro-batches per step (gradient accumulation), ``T`` total steps.
    ``batch_size`` is the micro-batch size B per rank, so one gradient step of one rank
    sees ``A*B`` sequences (or images) and the global batch is ``K*A*B``.
    """

    # model and data
    model: str = "gptneo-tiny"
    dataset: str = "embedded-text"
    data_path: str | None = None
    tokenizer: str | None = None
    iid: bool = True
    seq_len: int = 64
    batch_size: int = 8
    A: int = 1
    T: int = 200
    # inner optimizer
    optimizer: str = "adamw"
    alpha: float = 3e-3
    weight_decay: float = 0.01
    momentum: float = 0.9
    beta1: float = 0.9
    beta2: float = 0.999
    # algorithm (None: AlgorithmConfig's default)
    algorithm: str = "palsgd"
    reference_faithful: bool = False
    H: int | None = 8
    p: float | None = 0.2
    eta: float | None = 1.0
    T0: int | None = 0
    outer: str | None = "nesterov"
    gamma: float | None = 0.7
    mu: float | None = 0.9
    coins: str | None = None
    clip_grad_norm: float | None = 1.0
    buffers: str | None = None
    pull_first_tensor_only: bool | None = None
    discard_batch_on_pull: bool | None = None
    outer_steps_per_sync: int | None = None
    sync_offset: int | None = None
    sync_schedule: str | None = None
    interleave_outer_steps: bool | None = None
    consensus_interval: int | None = None
    offload_outer_state: bool | None = None
    coins_file: str | None = None
    comm_delay_s: float | None = None
    comm_delay_per_byte_s: float | None = None
    # learning-rate schedules (inner: over steps 0..T; outer: over the steps after T0)
    lr_schedule: str = "constant"
    lr_warmup: int = 0
    lr_min_ratio: float = 0.0
    outer_lr_schedule: str = "constant"
    outer_lr_warmup: int = 0
    outer_lr_min_ratio: float = 0.0
    # precision and data loading
    precision: str = "fp32"
    num_workers: int = 0
    pin_memory: bool = False
    pretokenize: bool = False
    # evaluation (of the anchor, i.e. the global model)
    eval_interval: int = 50
    eval_batches: int = 4
    # checkpoints
    checkpoint_dir: str | None = None
    checkpoint_interval: int = 0
    keep_checkpoints: int = 3
    resume: str | None = None
    allow_changed: str | None = None
    overwrite: bool = False
    max_steps_this_run: int | None = None
    crash_at_step: int | None = None
    # run
    seed: int = 0
    device: str = "auto"
    backend: str = "auto"
    output_dir: str = "runs/train"
    run_name: str | None = None
    export_dir: str | None = None
    log_interval: int = 10
    tensorboard: bool = False
    wandb_project: str | None = None
    progress: bool = True
    nproc: int = 2
    max_restarts: int = 0

    def checkpoint_path(self) -> Path:
        """The checkpoint directory (``output_dir/checkpoints`` unless set)."""
        if self.checkpoint_dir:
            return Path(self.checkpoint_dir)
        return Path(self.output_dir) / "checkpoints"


#: fields checked by theory.validation.validate (project names)
THEORY_FIELDS = ("alpha", "p", "eta", "H", "T0", "gamma", "mu", "A", "T")

#: TrainConfig field -> AlgorithmConfig keyword
ALGORITHM_FIELDS: dict[str, str] = {
    "algorithm": "name",
    "H": "H",
    "p": "p",
    "eta": "eta",
    "T0": "T0",
    "outer": "outer",
    "gamma": "gamma",
    "mu": "mu",
    "coins": "coins",
    "seed": "seed",
    "clip_grad_norm": "clip_grad_norm",
    "buffers": "buffers",
    "pull_first_tensor_only": "pull_first_tensor_only",
    "discard_batch_on_pull": "discard_batch_on_pull",
    "outer_steps_per_sync": "outer_steps_per_sync",
    "sync_offset": "sync_offset",
    "sync_schedule": "sync_schedule",
    "interleave_outer_steps": "interleave_outer_steps",
    "consensus_interval": "consensus_interval",
    "offload_outer_state": "offload_outer_state",
    "comm_delay_s": "comm_delay_s",
    "comm_delay_per_byte_s": "comm_delay_per_byte_s",
}

#: fields a checkpoint must share with the run that resumes it (besides the world size)
MATCH_FIELDS = (
    "algorithm",
    "iid",
    "tokenizer",
    "reference_faithful",
    "model",
    "dataset",
    "seq_len",
    "batch_size",
    "A",
    "optimizer",
    "H",
    "p",
    "T0",
    "outer",
    "coins",
    "seed",
)

#: fields that may differ freely between a run and the checkpoint it resumes (they say how
#: this invocation runs and where it writes, not what is trained); every other field not
#: in MATCH_FIELDS is a hyperparameter that a resume refuses to change unless it is named
#: in ``allow_changed`` (then the new value is applied and the change recorded)
RUN_ONLY_FIELDS = (
    "T",
    "eval_interval",
    "eval_batches",
    "checkpoint_dir",
    "checkpoint_interval",
    "keep_checkpoints",
    "resume",
    "allow_changed",
    "overwrite",
    "max_steps_this_run",
    "crash_at_step",
    "device",
    "backend",
    "output_dir",
    "run_name",
    "export_dir",
    "log_interval",
    "tensorboard",
    "wandb_project",
    "progress",
    "nproc",
    "max_restarts",
    "num_workers",
    "pin_memory",
    "pretokenize",
    "data_path",
)

#: trainer-side synonyms (besides theory.validation.ALIASES) -> field
FIELD_ALIASES: dict[str, str] = {
    "B": "batch_size",
    "bs_per_gpu": "batch_size",
    "micro_batch_size": "batch_size",
    "K": "nproc",
    "nproc_per_node": "nproc",
    "wd": "weight_decay",
    "max_length": "seq_len",
    "inner_optimizer": "optimizer",
    "clip_gradnorm": "clip_grad_norm",
    "eval_every": "eval_interval",
    "checkpoint_every": "checkpoint_interval",
    "checkpoint_dirpath": "checkpoint_dir",
    "log_every": "log_interval",
    "out": "output_dir",
}

#: ranges of the trainer's own numeric parameters, reported like theory.validation's
TRAINER_PARAMS: dict[str, ParamSpec] = {
    s.name: s
    for s in [
        ParamSpec("batch_size", "micro-batch size B per rank", 1, math.inf, integer=True),
        ParamSpec("seq_len", "tokens per sequence", 2, math.inf, integer=True),
        ParamSpec("weight_decay", "inner weight decay", 0, math.inf),
        ParamSpec("momentum", "inner SGD momentum", 0, 1, high_open=True),
        ParamSpec("beta1", "AdamW beta1", 0, 1, high_open=True),
        ParamSpec("beta2", "AdamW beta2", 0, 1, high_open=True),
        ParamSpec("clip_grad_norm", "global gradient-norm clip (0: off)", 0, math.inf),
        ParamSpec(
            "outer_steps_per_sync", "outer-optimizer steps per sync", 1, math.inf, integer=True
        ),
        ParamSpec(
            "sync_offset", "step offset of the sync inside a round", 0, math.inf, integer=True
        ),
        ParamSpec(
            "comm_delay_s", "emulated latency added to every all-reduce", 0, math.inf, unit="s"
        ),
        ParamSpec(
            "comm_delay_per_byte_s",
            "emulated inverse bandwidth of every all-reduce",
            0,
            math.inf,
            unit="s/byte",
        ),
        ParamSpec(
            "eval_interval", "steps between evaluations (0: none)", 0, math.inf, integer=True
        ),
        ParamSpec("eval_batches", "batches per evaluation", 1, math.inf, integer=True),
        ParamSpec(
            "checkpoint_interval", "steps between checkpoints (0: none)", 0, math.inf, integer=True
        ),
        ParamSpec("keep_checkpoints", "checkpoints kept on disk", 1, math.inf, integer=True),
        ParamSpec(
            "max_steps_this_run",
            "steps this invocation runs before stopping",
            1,
            math.inf,
            integer=True,
        ),
        ParamSpec(
            "crash_at_step", "fault injection: fail after this step", 1, math.inf, integer=True
        ),
        ParamSpec("seed", "random seed", 0, 2**63 - 1, integer=True),
        ParamSpec(
            "consensus_interval",
            "syncs between consensus statistics (0: never)",
            0,
            math.inf,
            integer=True,
        ),
        ParamSpec("lr_warmup", "steps of linear learning-rate warm-up", 0, math.inf, integer=True),
        ParamSpec("lr_min_ratio", "final / peak inner learning rate (cosine)", 0, 1),
        ParamSpec(
            "outer_lr_warmup", "local steps of linear outer-lr warm-up", 0, math.inf, integer=True
        ),
        ParamSpec("outer_lr_min_ratio", "final / peak outer learning rate (cosine)", 0, 1),
        ParamSpec("num_workers", "DataLoader worker processes", 0, math.inf, integer=True),
        ParamSpec("log_interval", "steps between metrics records", 1, math.inf, integer=True),
        ParamSpec(
            "nproc", "processes (workers K) to launch on this node", 1, math.inf, integer=True
        ),
        ParamSpec("max_restarts", "torchrun restarts after a failure", 0, math.inf, integer=True),
    ]
}

_DEVICES = ("auto", "cpu", "cuda")
_BACKENDS = ("auto", "nccl", "gloo")
PRECISIONS = ("fp32", "bf16", "fp16")


def _preset(**kw: Any) -> dict[str, Any]:
    return kw


#: The authors' README command for GPT-Neo on TinyStories (gptneo_8m/README.md:49; the
#: 125M README is identical): micro-batch 32 x 16 accumulation, AdamW lr 0.01 wd 0.01,
#: clip 1.0, outer Nesterov 0.1/0.9, H = 32, T0 = 32, p = 0.2, eta = 1, context 300.
#: Shared by the presets below and by paper_figures' paper-scale plan.
README_8M_RUN: dict[str, Any] = dict(
    dataset="tinystories",
    seq_len=300,
    batch_size=32,
    A=16,
    T=20000,
    optimizer="adamw",
    alpha=0.01,
    weight_decay=0.01,
    beta1=0.9,
    beta2=0.999,
    clip_grad_norm=1.0,
    algorithm="palsgd",
    outer="nesterov",
    gamma=0.1,
    mu=0.9,
    H=32,
    T0=32,
    p=0.2,
    eta=1.0,
    eval_interval=500,
    eval_batches=50,
    checkpoint_interval=1000,
    log_interval=50,
)


#: named presets: field values applied on top of the dataclass defaults
PRESETS: dict[str, dict[str, Any]] = {
    # The default: a tiny GPT-Neo on the embedded text, PALSGD, well under a minute on CPU.
    "tiny": _preset(),
    # Same, as plain data-parallel SGD (DDP) for comparison.
    "tiny-ddp": _preset(
        algorithm="ddp", p=None, eta=None, H=None, T0=None, outer=None, gamma=None, mu=None
    ),
    # The authors' README command for GPT-Neo-8M on TinyStories (README_8M_RUN), run with
    # the algorithm as described. Needs --data-path (TinyStories text) and, for the paper's
    # scale, --nproc 4 on GPUs. With the default byte tokenizer the model has 1,654,656
    # parameters; --tokenizer DIR (a local copy of the GPT-2 BPE tokenizer the authors used)
    # gives the paper's 8,054,656.
    "gptneo-8m-readme": _preset(model="gptneo-8m", **README_8M_RUN, nproc=4),
    # The same run with every quirk of the authors' code switched on
    # (AlgorithmConfig.reference_faithful): first-tensor pull, shared coins, discarded
    # batches on pulls, A outer steps per sync, the authors' sync offset.
    "gptneo-8m-readme-faithful": _preset(
        model="gptneo-8m", **README_8M_RUN, reference_faithful=True, nproc=4
    ),
    # DiLoCo reference setting (Douillard et al. 2023): inner AdamW 4e-4, wd 0.1,
    # betas (0.9, 0.95); outer Nesterov 0.7/0.9; H = 500. On the tiny model by default.
    "diloco": _preset(
        algorithm="diloco",
        optimizer="adamw",
        alpha=4e-4,
        weight_decay=0.1,
        beta1=0.9,
        beta2=0.95,
        outer="nesterov",
        gamma=0.7,
        mu=0.9,
        H=500,
        p=None,
        eta=None,
        T0=0,
        clip_grad_norm=1.0,
        T=2000,
    ),
}

_FIELDS = {f.name: f for f in fields(TrainConfig)}
_HINTS = get_type_hints(TrainConfig)


def _canonical_key(key: str) -> str:
    """Field name for a config/CLI key (dashes allowed, aliases resolved)."""
    k = key.replace("-", "_")
    if k in _FIELDS:
        return k
    if k in FIELD_ALIASES:
        return FIELD_ALIASES[k]
    return k


def _canonical_mapping(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Rename aliases (theory.validation's and the trainer's) to field names."""
    renamed: dict[str, Any] = {}
    for key, val in values.items():
        k = key.replace("-", "_")
        if k in renamed:
            raise UserInputError(f"option '{k}' given twice in {source}")
        renamed[k] = val
    # theory aliases (lr, prob_no_grad, ...) and double-definition check
    out = canonicalize(renamed, allow_unknown=True)
    final: dict[str, Any] = {}
    for key, val in out.items():
        name = _canonical_key(key)
        if name not in _FIELDS:
            raise UserInputError(
                f"unknown training option '{key}' in {source}: known options are "
                f"{sorted(_FIELDS)} (and the authors' aliases lr, prob_no_grad, "
                f"sync_interval, outer_lr, outer_momentum, local_sgd_start_iter, "
                f"grad_accu_step, steps)"
            )
        if name in final:
            raise UserInputError(f"option '{name}' given twice in {source} (as '{key}' too)")
        final[name] = val
    return final


def _coerce(name: str, value: Any, source: str) -> Any:
    """Convert a config-file value to the field's type; bad types name the field."""
    hint = _HINTS[name]
    if value is None:
        if type(None) in getattr(hint, "__args__", ()):
            return None
        raise UserInputError(f"option '{name}' in {source} may not be null")
    base = [a for a in getattr(hint, "__args__", (hint,)) if a is not type(None)][0]
    try:
        if base is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
                return value.lower() in ("true", "1", "yes")
            raise ValueError
        if base is int:
            if isinstance(value, bool):
                raise ValueError
            as_float = float(value)
            if not as_float.is_integer():
                raise ParameterError(name, value, "a whole number")
            return int(as_float)
        if base is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if base is str:
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise ValueError
            return str(value)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, UserInputError):
            raise
        raise UserInputError(
            f"option '{name}' in {source} = {value!r} has the wrong type (expected {base.__name__})"
        ) from None
    return value  # pragma: no cover


def load_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """Read a flat YAML or JSON mapping of training options (keys: fields or aliases)."""
    return read_mapping_file(path, "config file")


def resolve_config(
    preset: str | None = None,
    file: str | os.PathLike | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> TrainConfig:
    """Build a :class:`TrainConfig` from preset < file < overrides, then validate it."""
    name = preset or "tiny"
    if name not in PRESETS:
        raise UserInputError(f"unknown preset '{name}': known presets are {sorted(PRESETS)}")
    values: dict[str, Any] = {}
    layers: list[tuple[str, Mapping[str, Any]]] = [(f"preset '{name}'", PRESETS[name])]
    if file is not None:
        layers.append((f"config file '{file}'", load_config_file(file)))
    if overrides:
        layers.append(("command line", overrides))
    for source, layer in layers:
        for key, val in _canonical_mapping(layer, source).items():
            values[key] = _coerce(key, val, source)
    cfg = TrainConfig(**values)
    validate_config(cfg)
    return cfg


def _check_trainer_param(name: str, value: Any) -> None:
    spec = TRAINER_PARAMS[name]
    v = float(value)
    bad = not math.isfinite(v) or v < spec.low or v > spec.high
    bad |= (spec.low_open and v == spec.low) or (spec.high_open and v == spec.high)
    if spec.integer and math.isfinite(v) and not v.is_integer():
        raise ParameterError(name, value, spec.allowed, "must be a whole number")
    if bad:
        raise ParameterError(name, value, spec.allowed)


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
            _check_trainer_param(name, val)
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
    choices = {
        "backend": _BACKENDS,
        "precision": PRECISIONS,
        "lr_schedule": SCHEDULES,
        "outer_lr_schedule": SCHEDULES,
    }
    for name, allowed in choices.items():
        if getattr(cfg, name) not in allowed:
            raise UserInputError(
                f"option '{name}' = {getattr(cfg, name)!r} is not one of {', '.join(allowed)}"
            )
    if cfg.backend == "nccl" and dev == "cpu":
        raise UserInputError("backend 'nccl' needs CUDA devices, but device 'cpu' was given")
    if cfg.lr_warmup > cfg.T:
        raise ParameterError("lr_warmup", cfg.lr_warmup, f"[0, T = {cfg.T}]")
    if cfg.coins_file is not None and not Path(cfg.coins_file).is_file():
        raise UserInputError(f"coins file '{cfg.coins_file}' (option coins_file) does not exist")
    allowed_changes(cfg)
    if cfg.data_path is not None and not Path(cfg.data_path).exists():
        raise UserInputError(f"data path '{cfg.data_path}' (option data_path) does not exist")
    if cfg.max_steps_this_run is not None and cfg.checkpoint_interval == 0:
        raise UserInputError(
            "max_steps_this_run stops the run early to be resumed later; it needs "
            "checkpoint_interval > 0 so that there is a checkpoint to resume from"
        )
    return cfg


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


def config_to_dict(cfg: TrainConfig) -> dict[str, Any]:
    """A JSON-serialisable dict of every field."""
    return dataclasses.asdict(cfg)


def config_from_dict(values: Mapping[str, Any]) -> TrainConfig:
    """Inverse of :func:`config_to_dict` (keys checked, values coerced, then validated)."""
    out = {}
    for key, val in _canonical_mapping(values, "saved configuration").items():
        out[key] = _coerce(key, val, "saved configuration")
    return validate_config(TrainConfig(**out))
