"""The fields of ``palsgd train``'s configuration (:class:`TrainConfig`) and their groups:
the theory's parameters, the algorithm's, those a resume must match, those that may change
freely, and the trainer's synonyms."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

__all__ = [
    "TrainConfig",
    "OPTIMIZERS",
    "THEORY_FIELDS",
    "ALGORITHM_FIELDS",
    "MATCH_FIELDS",
    "MATCH_DEFAULTS",
    "RUN_ONLY_FIELDS",
    "FIELD_ALIASES",
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
    token_dtype: str = "auto"
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
    sync_delay: int | None = None
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
    shards: int = 1
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
    "sync_delay": "sync_delay",
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
    "token_dtype",
    "sync_delay",
    "shards",
)

#: fields of MATCH_FIELDS added after checkpoints were first written, with the value a
#: manifest that lacks them was written with
MATCH_DEFAULTS: dict[str, object] = {"token_dtype": "auto", "sync_delay": None, "shards": 1}

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


_FIELDS = {f.name: f for f in fields(TrainConfig)}


def _canonical_key(key: str) -> str:
    """Field name for a config/CLI key (dashes allowed, aliases resolved)."""
    k = key.replace("-", "_")
    if k in _FIELDS:
        return k
    if k in FIELD_ALIASES:
        return FIELD_ALIASES[k]
    return k
