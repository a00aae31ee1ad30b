"""The fields of ``palsgd train``'s configuration (:class:`TrainConfig`), each declared
once with its default and its :class:`~empirical.config.flags.Flag`: help, what ``None``
means, range, choices, rule on resume, the algorithm keyword it sets. The tables derived
from these declarations are in :mod:`empirical.config.tables`; the values of the choices
the configuration owns in :mod:`empirical.config.choices`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from empirical.config.choices import BACKENDS, OPTIMIZERS, PRECISIONS
from empirical.config.flags import (
    BELOW_ONE,
    COUNT,
    FREE,
    MATCH,
    NON_NEGATIVE,
    POSITIVE,
    UNIT_INTERVAL,
    Range,
    flag,
)
from empirical.schedules import SCHEDULES
from empirical.token_cache import TOKEN_DTYPES
from theory.algorithm import describe_choices, distributed_choices

__all__ = ["TrainConfig", "OPTIMIZERS", "PRECISIONS", "BACKENDS"]


@dataclass
class TrainConfig:
    """Everything one training run needs; the unit of a step is one optimizer step.

    Notation (the authors'): ``alpha`` inner learning rate, ``p`` pull probability, ``eta``
    pull rate (pull coefficient ``alpha*eta/p``), ``H`` local steps between syncs (pull
    steps count), ``T0`` DDP warm-up steps, ``gamma``/``mu`` outer learning rate and
    momentum, ``A`` micro-batches per step (gradient accumulation), ``T`` total steps.
    ``batch_size`` is the micro-batch size B per rank, so one gradient step of one rank
    sees ``A*B`` sequences (or images) and the global batch is ``K*A*B``.

    Each field is declared once, with its :class:`~empirical.config.flags.Flag`
    (:func:`~empirical.config.flags.flag`); a field without ``resume=`` is a
    hyperparameter (:data:`~empirical.config.flags.CHANGE`).
    """

    # model and data
    model: str = flag("gptneo-tiny", "model name", resume=MATCH)
    dataset: str = flag("embedded-text", "dataset name", resume=MATCH)
    data_path: str | None = flag(
        None,
        "file or directory of the dataset (needed by file-based datasets; 'tokens': a flat "
        "binary file of token ids, or a directory with train.bin and val.bin)",
        resume=FREE,
        none_means="none (the embedded datasets need none)",
    )
    tokenizer: str | None = flag(
        None,
        "language models: 'byte' (default) or a local Hugging Face tokenizer directory "
        "(nothing is downloaded)",
        resume=MATCH,
        none_means="byte",
    )
    token_dtype: str = flag(
        "auto",
        "dataset 'tokens': integer type of the ids in --data-path (uint16 | uint32 | int32 | "
        "int64; auto: a dtype named in the file name, else uint16 up to 65,536 ids of the "
        "vocabulary, uint32 above)",
        resume=MATCH,
        match_default="auto",
        choices=("auto", *TOKEN_DTYPES),
    )
    iid: bool = flag(
        True,
        "ranks read disjoint shards of one shuffled data set (--no-iid: each rank owns a "
        "fixed block of the data, heterogeneous workers)",
        resume=MATCH,
    )
    seq_len: int = flag(
        64,
        "tokens per sequence (language models)",
        resume=MATCH,
        range=Range(2, math.inf, integer=True),
    )
    batch_size: int = flag(8, "micro-batch size B per rank", resume=MATCH, range=POSITIVE)
    A: int = flag(
        1, "micro-batches per optimizer step (gradient accumulation)", resume=MATCH, theory=True
    )
    T: int = flag(200, "total optimizer steps (pull steps count)", resume=FREE, theory=True)
    # inner optimizer
    optimizer: str = flag(
        "adamw",
        "inner optimizer: " + "; ".join(f"{name}: {text}" for name, text in OPTIMIZERS.items()),
        resume=MATCH,
        choices=tuple(OPTIMIZERS),
    )
    alpha: float = flag(0.003, "inner learning rate alpha", theory=True)
    weight_decay: float = flag(0.01, "inner weight decay", range=NON_NEGATIVE)
    momentum: float = flag(0.9, "momentum of sgd_momentum", range=BELOW_ONE)
    beta1: float = flag(0.9, "AdamW beta1", range=BELOW_ONE)
    beta2: float = flag(0.999, "AdamW beta2", range=BELOW_ONE)
    # algorithm (None: AlgorithmConfig's default)
    algorithm: str = flag(
        "palsgd",
        "the distributed algorithm: " + describe_choices(distributed_choices()),
        resume=MATCH,
        algorithm="name",
        choices=distributed_choices(),
    )
    reference_faithful: bool = flag(
        False,
        "switch on every quirk of the authors' code (AlgorithmConfig.reference_faithful); "
        "individual switches below override",
        resume=MATCH,
    )
    H: int | None = flag(
        8, "local steps between syncs (pull steps count)", resume=MATCH, theory=True, algorithm="H"
    )
    p: float | None = flag(
        0.2, "probability of a pull step", resume=MATCH, theory=True, algorithm="p"
    )
    eta: float | None = flag(
        1.0, "pull (mixing) rate; pull coefficient alpha*eta/p", theory=True, algorithm="eta"
    )
    T0: int | None = flag(
        0, "DDP warm-up steps before local steps start", resume=MATCH, theory=True, algorithm="T0"
    )
    outer: str | None = flag("nesterov", "outer optimizer", resume=MATCH, algorithm="outer")
    gamma: float | None = flag(0.7, "outer learning rate", theory=True, algorithm="gamma")
    mu: float | None = flag(0.9, "outer momentum", theory=True, algorithm="mu")
    coins: str | None = flag(
        None,
        "pull coins: independent (one per worker) or shared (the authors' code)",
        resume=MATCH,
        none_means="independent",
        algorithm="coins",
    )
    clip_grad_norm: float | None = flag(
        1.0,
        "global gradient-norm clip before the inner step ('none': off)",
        none_means="off",
        range=NON_NEGATIVE,
        algorithm="clip_grad_norm",
    )
    buffers: str | None = flag(
        None,
        "buffer policy at syncs (BatchNorm statistics)",
        none_means="average",
        algorithm="buffers",
    )
    pull_first_tensor_only: bool | None = flag(
        None,
        "pull only the first parameter tensor (authors' code)",
        none_means="off (on with --reference-faithful)",
        algorithm="pull_first_tensor_only",
    )
    discard_batch_on_pull: bool | None = flag(
        None,
        "draw and drop A micro-batches on a pull step (authors' code)",
        none_means="off (on with --reference-faithful)",
        algorithm="discard_batch_on_pull",
    )
    outer_steps_per_sync: int | None = flag(
        None,
        "outer-optimizer steps per sync (authors' README: A)",
        none_means="1 (A with --reference-faithful)",
        range=POSITIVE,
        algorithm="outer_steps_per_sync",
    )
    sync_offset: int | None = flag(
        None,
        "sync when (t - T0 + 1 + offset) % H == 0 (derived with --sync-schedule global_step)",
        none_means="0 (derived with --sync-schedule global_step)",
        range=COUNT,
        algorithm="sync_offset",
    )
    sync_schedule: str | None = flag(
        None,
        "rounds (every round H steps) or global_step (the authors' absolute step counter; the"
        " offset follows from T0 and H)",
        none_means="rounds",
        algorithm="sync_schedule",
    )
    interleave_outer_steps: bool | None = flag(
        None,
        "take the outer_steps_per_sync - 1 zero-gradient outer steps one per micro-batch of "
        "the next step (authors' code)",
        none_means="off",
        algorithm="interleave_outer_steps",
    )
    consensus_interval: int | None = flag(
        None,
        "syncs between consensus statistics (0: never)",
        none_means="1",
        range=COUNT,
        algorithm="consensus_interval",
    )
    offload_outer_state: bool | None = flag(
        None,
        "keep the outer momentum in pinned CPU memory between syncs",
        none_means="off",
        algorithm="offload_outer_state",
    )
    coins_file: str | None = flag(
        None,
        ".npy file of recorded pull coins, shape (T,) or (T, K), replayed instead of the "
        "counter-based coins",
        none_means="none (counter-based coins)",
    )
    comm_delay_s: float | None = flag(
        None,
        "emulated slow link: seconds added to every all-reduce",
        none_means="0",
        range=Range(0, math.inf, unit="s"),
        algorithm="comm_delay_s",
    )
    comm_delay_per_byte_s: float | None = flag(
        None,
        "emulated slow link: seconds per payload byte added to every all-reduce",
        none_means="0",
        range=Range(0, math.inf, unit="s/byte"),
        algorithm="comm_delay_per_byte_s",
    )
    sync_delay: int | None = flag(
        None,
        "overlapped sync: the outer all-reduce runs while the workers compute and its outer "
        "step lands SYNC_DELAY local steps later (1..H-1; 0 or unset: blocking sync; "
        "docs/trainer.md)",
        resume=MATCH,
        match_default=None,
        range=COUNT,
        algorithm="sync_delay",
    )
    # learning-rate schedules (inner: over steps 0..T; outer: over the steps after T0)
    lr_schedule: str = flag(
        "constant",
        "inner learning-rate schedule: constant, or cosine (linear warm-up, cosine decay)",
        choices=SCHEDULES,
    )
    lr_warmup: int = flag(0, "steps of linear inner learning-rate warm-up", range=COUNT)
    lr_min_ratio: float = flag(
        0.0, "final inner learning rate / alpha of the cosine schedule", range=UNIT_INTERVAL
    )
    outer_lr_schedule: str = flag(
        "constant", "outer learning-rate schedule (over the steps after T0)", choices=SCHEDULES
    )
    outer_lr_warmup: int = flag(0, "local steps of linear outer learning-rate warm-up", range=COUNT)
    outer_lr_min_ratio: float = flag(
        0.0, "final outer learning rate / gamma of the cosine schedule", range=UNIT_INTERVAL
    )
    # precision and data loading
    precision: str = flag(
        "fp32", "autocast with fp32 master weights (fp16 with a GradScaler)", choices=PRECISIONS
    )
    num_workers: int = flag(0, "DataLoader worker processes per rank", resume=FREE, range=COUNT)
    pin_memory: bool = flag(
        False, "page-locked host batches (faster host-to-GPU copies)", resume=FREE
    )
    pretokenize: bool = flag(
        False, "tinystories: tokenise once into a memory-mapped cache next to the data", resume=FREE
    )
    compile: bool = flag(
        False,
        "torch.compile the model's forward in place (checkpoints keep the plain module's "
        "names); off by default on the CPU and on CUDA until measured faster on a GPU; "
        "not with --reference-faithful",
        resume=FREE,
    )
    # evaluation (of the anchor, i.e. the global model)
    eval_interval: int = flag(
        50, "steps between evaluations of the anchor (0: none)", resume=FREE, range=COUNT
    )
    eval_batches: int = flag(4, "batches per evaluation", resume=FREE, range=POSITIVE)
    # checkpoints
    checkpoint_dir: str | None = flag(
        None, "checkpoint directory", resume=FREE, none_means="OUTPUT_DIR/checkpoints"
    )
    checkpoint_interval: int = flag(
        0, "steps between checkpoints (0: none)", resume=FREE, range=COUNT
    )
    keep_checkpoints: int = flag(
        3, "checkpoints kept on disk (oldest deleted first)", resume=FREE, range=POSITIVE
    )
    resume: str | None = flag(
        None,
        "'auto' (latest complete checkpoint, if any) or a checkpoint path",
        resume=FREE,
        none_means="none (start afresh)",
    )
    allow_changed: str | None = flag(
        None,
        "comma-separated hyperparameters that may differ from the resumed checkpoint's "
        "(applied and recorded); any other change is refused",
        resume=FREE,
    )
    overwrite: bool = flag(
        False,
        "start afresh even if the output directory holds a run's records or the checkpoint "
        "directory holds checkpoints (they are replaced / deleted); without it such a "
        "directory is refused unless --resume is given",
        resume=FREE,
    )
    max_steps_this_run: int | None = flag(
        None,
        "stop after this many steps of this invocation, without a final checkpoint (as a "
        "crash would); resume with --resume auto",
        resume=FREE,
        none_means="none (run to T)",
        range=POSITIVE,
    )
    crash_at_step: int | None = flag(
        None,
        "fault injection for testing restarts: fail after this step unless the run was "
        "resumed or restarted by torchrun",
        resume=FREE,
        range=POSITIVE,
    )
    # run
    seed: int = flag(
        0,
        "seed of initialisation, data order and coins",
        resume=MATCH,
        range=Range(0, 2**63 - 1, integer=True),
        algorithm="seed",
    )
    device: str = flag(
        "auto", "auto, cpu, cuda or cuda:N (auto: cuda:LOCAL_RANK if available)", resume=FREE
    )
    backend: str = flag(
        "auto",
        "process-group backend (auto: nccl on CUDA, gloo on CPU)",
        resume=FREE,
        choices=BACKENDS,
    )
    output_dir: str = flag(
        "runs/train", "directory of metrics, config.json and summary.json", resume=FREE
    )
    run_name: str | None = flag(
        None,
        "name of the run in W&B/TensorBoard and summary.json: letters, digits and . _ - = + ,"
        " (not a path)",
        resume=FREE,
        none_means="from the algorithm and its hyperparameters",
    )
    export_dir: str | None = flag(
        None,
        "at the end, save the anchor (global model) there: save_pretrained for Hugging Face "
        "models, anchor.pt otherwise",
        resume=FREE,
    )
    log_interval: int = flag(10, "steps between train records", resume=FREE, range=POSITIVE)
    tensorboard: bool = flag(
        False, "also write TensorBoard scalars (needs the tensorboard package)", resume=FREE
    )
    wandb_project: str | None = flag(
        None,
        "also log to this Weights & Biases project (skipped with a warning when wandb is not "
        "installed)",
        resume=FREE,
    )
    progress: bool = flag(True, "progress bar on rank 0", resume=FREE)
    nproc: int = flag(
        2,
        "processes on this node (default 2: torchrun launches 2 ranks, gloo on the CPU; "
        "workers K = nproc / shards); 1 trains in this process (palsgd train only)",
        resume=FREE,
        range=POSITIVE,
    )
    shards: int = flag(
        1,
        "ranks per worker: each of the nproc/shards workers shards its model over SHARDS "
        "ranks with FSDP2 (fully_shard on a 2-D mesh; the sync runs across workers); "
        "batch-size stays per rank (docs/trainer.md)",
        resume=MATCH,
        match_default=1,
        range=POSITIVE,
    )
    workers_per_process: int = flag(
        1,
        "workers W run by each process (K = nproc x W), stacked on a worker axis, one vmapped "
        "step, the sync on the device (docs/stacked_workers.md); W > 1 for the algorithms with "
        "local steps only (not ddp, sgd), and not with --sync-delay, "
        "--interleave-outer-steps, --precision fp16, --shards > 1, --compile, "
        "--comm-delay-* with --nproc 1",
        resume=MATCH, match_default=1, range=Range(1, 1024, integer=True),
    )  # fmt: skip
    max_restarts: int = flag(
        0,
        "torchrun restarts after a failure (each resumes from the latest checkpoint)",
        resume=FREE,
        range=COUNT,
    )

    def checkpoint_path(self) -> Path:
        """The checkpoint directory (``output_dir/checkpoints`` unless set)."""
        if self.checkpoint_dir:
            return Path(self.checkpoint_dir)
        return Path(self.output_dir) / "checkpoints"
