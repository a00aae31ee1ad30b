"""``palsgd train``: distributed training with DDP, Local SGD, Post-Local SGD, DiLoCo, PALSGD.

Launch:

* ``palsgd train [options]``: ``--nproc N`` ranks on this node (default 2); with N > 1 it
  validates the options, writes the resolved configuration to
  ``OUTPUT_DIR/launch_config.json`` and runs ``python -m torch.distributed.run --standalone
  --nproc-per-node N -m empirical.train --config OUTPUT_DIR/launch_config.json``;
  ``--nproc 1`` trains in this process (world size 1).
* ``torchrun --nproc-per-node N -m empirical.train [options]`` (any torchrun setup,
  multi-node included): every rank reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
  ``MASTER_ADDR``/``MASTER_PORT``; NCCL when the device is CUDA, gloo on CPU.
* Without ``WORLD_SIZE`` in the environment the trainer runs as a single process (for
  debugging), through the same code path.

With no options it trains a tiny GPT-Neo on the embedded text with PALSGD on two CPU
ranks over gloo (preset ``tiny``, ``--nproc 2``; well under a minute). ``--preset`` picks another preset
(:data:`empirical.config.PRESETS`), ``--config FILE`` reads YAML/JSON, flags override both;
the authors' flag names (``--lr``, ``--prob_no_grad``, ``--sync_interval``, ``--outer_lr``,
``--local_sgd_start_iter``, ``--grad_accu_step``) are accepted as aliases.

Each step asks the algorithm for its action (Naganuma et al. 2025, Algorithm 1): a
gradient step runs ``A`` micro-batches of forward/backward with loss/A (the first ``A-1``
under ``algo.no_sync()``); a pull step runs no forward/backward (with
``discard_batch_on_pull``, as in the authors' code, its ``A`` micro-batches are drawn and
dropped). ``algo.step()`` then performs the inner step or the pull and, every ``H`` steps,
the sync. Outputs (rank 0) in ``--output-dir``: ``metrics.jsonl``, ``train.csv``,
``eval.csv`` (:mod:`empirical.metrics`), ``config.json``, ``summary.json``; checkpoints in
``--checkpoint-dir`` (:mod:`empirical.checkpoint`).

Evaluation is of the anchor, the global model at the last sync
(``algo.anchor_state_dict()`` loaded into a copy of the model), not of a rank's local model.

Devices: every rank binds ``cuda:LOCAL_RANK`` (``torch.cuda.set_device``) before its
process group exists and an NCCL group gets ``device_id`` (:func:`empirical.distributed.
bind_device`). ``--precision bf16|fp16`` runs the forward pass under ``torch.autocast`` with
fp32 parameters (master weights), fp32 anchor and outer state; fp16 adds a
``torch.amp.GradScaler`` passed to ``algo.step`` (unscale, clip, skip inf/NaN steps,
update). Step times are CUDA events read when metrics are written (no per-step
synchronisation).

Resume: ``--resume auto`` takes the newest checkpoint that is intact on every rank (an
older one when the newest is corrupt, with a warning); after the process group exists the
ranks agree on it (an all-gather) and stop with a clear error when they cannot. Every
hyperparameter is compared with the checkpoint's configuration: a changed one is refused
with its name unless ``--allow-changed NAME[,NAME...]`` is given, in which case the new
value is applied from the resumed step on and the change recorded (``metrics.jsonl``
resume event, ``summary.json`` ``changed_on_resume``).

Exit codes: 0 finished (or stopped by ``--max-steps-this-run``), 2 bad input
(:class:`~theory.validation.UserInputError`; raised before any collective, and for
checkpoint problems that only some ranks see, on every rank after the ranks compared
notes), 3 the loss or the parameters became NaN/inf (the last checkpoint written before is
intact), 4 out of resources (disk full while writing a checkpoint or metrics: the partial
checkpoint is removed and the last complete one stays usable; out of memory), 130
interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import errno
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from empirical.config import (
    ALGORITHM_FIELDS,
    OPTIMIZERS,
    PRESETS,
    TrainConfig,
    config_to_dict,
    resolve_config,
)
from empirical.export import export_anchor, run_name
from empirical.metrics import atomic_write_json, package_versions
from empirical.resume import check_resume, checkpoint_meta, common_resume_step
from theory import exitcodes
from theory.validation import ParameterError, UserInputError, check_output_dir

__all__ = [
    "add_arguments",
    "run",
    "main",
    "check_before_launch",
    "run_torchrun",
    "train",
    "prepare",
    "build_inner_optimizer",
    "Prepared",
    "EXIT_OK",
    "EXIT_USER_ERROR",
    "EXIT_DIVERGED",
    "EXIT_NO_RESOURCES",
    "export_anchor",
]

EXIT_OK = 0
EXIT_USER_ERROR = 2
EXIT_DIVERGED = 3
EXIT_NO_RESOURCES = exitcodes.OUT_OF_RESOURCES

_PROG = "palsgd train"

# ----------------------------------------------------------------------------- CLI

#: authors'-code flag names accepted on the command line, with the field they set
_CLI_ALIASES: dict[str, str] = {
    "lr": "alpha",
    "prob_no_grad": "p",
    "sync_interval": "H",
    "outer_lr": "gamma",
    "outer_momentum": "mu",
    "local_sgd_start_iter": "T0",
    "grad_accu_step": "A",
    "steps": "T",
    "bs_per_gpu": "batch_size",
    "clip_gradnorm": "clip_grad_norm",
    "wd": "weight_decay",
    "max_length": "seq_len",
}

_HELP: dict[str, str] = {
    "model": "model name (empirical.models.MODEL_NAMES)",
    "dataset": "dataset name (empirical.data.DATASET_NAMES)",
    "data_path": "file or directory of the dataset (needed by file-based datasets)",
    "tokenizer": "language models: 'byte' (default) or a local Hugging Face tokenizer "
    "directory (nothing is downloaded)",
    "iid": "ranks read disjoint shards of one shuffled data set (--no-iid: each rank owns "
    "a fixed block of the data, heterogeneous workers)",
    "seq_len": "tokens per sequence (language models)",
    "batch_size": "micro-batch size B per rank",
    "A": "micro-batches per optimizer step (gradient accumulation)",
    "T": "total optimizer steps (pull steps count)",
    "optimizer": f"inner optimizer: {', '.join(OPTIMIZERS)}",
    "alpha": "inner learning rate alpha",
    "weight_decay": "inner weight decay",
    "momentum": "momentum of sgd_momentum",
    "beta1": "AdamW beta1",
    "beta2": "AdamW beta2",
    "algorithm": "ddp | local_sgd | post_local_sgd | diloco | palsgd",
    "reference_faithful": "switch on every quirk of the authors' code (AlgorithmConfig."
    "reference_faithful); individual switches below override",
    "H": "local steps between syncs (pull steps count)",
    "p": "probability of a pull step",
    "eta": "pull (mixing) rate; pull coefficient alpha*eta/p",
    "T0": "DDP warm-up steps before local steps start",
    "outer": "outer optimizer: average | sgd | nesterov",
    "gamma": "outer learning rate",
    "mu": "outer momentum",
    "coins": "independent (one coin per worker) | shared (the authors' code)",
    "clip_grad_norm": "global gradient-norm clip before the inner step ('none': off)",
    "buffers": "buffer policy at syncs: average | anchor | local",
    "pull_first_tensor_only": "pull only the first parameter tensor (authors' code)",
    "discard_batch_on_pull": "draw and drop A micro-batches on a pull step (authors' code)",
    "outer_steps_per_sync": "outer-optimizer steps per sync (authors' README: A)",
    "sync_offset": "sync when (t - T0 + 1 + offset) %% H == 0 (derived with "
    "--sync-schedule global_step)",
    "sync_schedule": "rounds (every round H steps) | global_step (the authors' absolute "
    "step counter; the offset follows from T0 and H)",
    "interleave_outer_steps": "take the outer_steps_per_sync - 1 zero-gradient outer steps "
    "one per micro-batch of the next step (authors' code)",
    "consensus_interval": "syncs between consensus statistics (0: never)",
    "offload_outer_state": "keep the outer momentum in pinned CPU memory between syncs",
    "coins_file": ".npy file of recorded pull coins, shape (T,) or (T, K), replayed "
    "instead of the counter-based coins",
    "lr_schedule": "inner learning-rate schedule: constant | cosine (linear warm-up, cosine decay)",
    "lr_warmup": "steps of linear inner learning-rate warm-up",
    "lr_min_ratio": "final inner learning rate / alpha of the cosine schedule",
    "outer_lr_schedule": "outer learning-rate schedule (over the steps after T0): "
    "constant | cosine",
    "outer_lr_warmup": "local steps of linear outer learning-rate warm-up",
    "outer_lr_min_ratio": "final outer learning rate / gamma of the cosine schedule",
    "precision": "fp32 | bf16 | fp16 (autocast with fp32 master weights; fp16 with a GradScaler)",
    "num_workers": "DataLoader worker processes per rank",
    "pin_memory": "page-locked host batches (faster host-to-GPU copies)",
    "pretokenize": "tinystories: tokenise once into a memory-mapped cache next to the data",
    "allow_changed": "comma-separated hyperparameters that may differ from the resumed "
    "checkpoint's (applied and recorded); any other change is refused",
    "backend": "auto (nccl on CUDA, gloo on CPU) | nccl | gloo",
    "run_name": "name of the run in W&B/TensorBoard and summary.json (default: from the "
    "algorithm and its hyperparameters)",
    "export_dir": "at the end, save the anchor (global model) there: save_pretrained for "
    "Hugging Face models, anchor.pt otherwise",
    "wandb_project": "also log to this Weights & Biases project (skipped with a warning "
    "when wandb is not installed)",
    "comm_delay_s": "emulated slow link: seconds added to every all-reduce",
    "comm_delay_per_byte_s": "emulated slow link: seconds per payload byte added to every "
    "all-reduce",
    "eval_interval": "steps between evaluations of the anchor (0: none)",
    "eval_batches": "batches per evaluation",
    "checkpoint_dir": "checkpoint directory (default OUTPUT_DIR/checkpoints)",
    "checkpoint_interval": "steps between checkpoints (0: none)",
    "keep_checkpoints": "checkpoints kept on disk (oldest deleted first)",
    "resume": "'auto' (latest complete checkpoint, if any) or a checkpoint path",
    "overwrite": "start afresh even if the checkpoint directory holds checkpoints "
    "(they are deleted)",
    "max_steps_this_run": "stop after this many steps of this invocation, without a final "
    "checkpoint (as a crash would); resume with --resume auto",
    "crash_at_step": "fault injection for testing restarts: fail after this step unless "
    "the run was resumed or restarted by torchrun",
    "seed": "seed of initialisation, data order and coins",
    "device": "auto | cpu | cuda | cuda:N (auto: cuda:LOCAL_RANK if available)",
    "output_dir": "directory of metrics, config.json and summary.json",
    "log_interval": "steps between train records",
    "tensorboard": "also write TensorBoard scalars (needs the tensorboard package)",
    "progress": "progress bar on rank 0",
    "nproc": "processes (workers K) on this node (default 2: torchrun launches 2 ranks, "
    "gloo on the CPU); 1 trains in this process (palsgd train only)",
    "max_restarts": "torchrun restarts after a failure (each resumes from the latest checkpoint)",
}

_FIELD_TYPES = {f.name: f.type for f in fields(TrainConfig)}


def _optional(base: type):
    def parse(text: str):
        if text.lower() in ("none", "null"):
            return None
        return base(text)

    parse.__name__ = base.__name__
    return parse


def _arg_type(typ: str) -> Any:
    """argparse ``type`` for a TrainConfig field annotated ``typ`` (a string such as
    ``"int"`` or ``"float | None"``): int, float or str, accepting 'none'/'null' when the
    field is optional."""
    base = int if typ.startswith("int") else float if typ.startswith("float") else str
    return _optional(base) if "None" in typ else base


def _flag_names(name: str) -> list[str]:
    dashed = "--" + name.replace("_", "-")
    under = "--" + name
    return [dashed] if dashed == under else [dashed, under]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``palsgd train`` (every :class:`TrainConfig` field plus aliases)."""
    parser.add_argument(
        "--config",
        dest="cfg:config",
        default=argparse.SUPPRESS,
        metavar="FILE",
        help="YAML or JSON file of options (flags override)",
    )
    parser.add_argument(
        "--preset",
        dest="cfg:preset",
        default=argparse.SUPPRESS,
        choices=sorted(PRESETS),
        help="named preset (default: tiny)",
    )
    parser.add_argument(
        "--print-config",
        dest="cfg:print_config",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the resolved configuration as JSON and exit",
    )
    for f in fields(TrainConfig):
        typ = str(f.type)
        names = _flag_names(f.name)
        help_text = _HELP.get(f.name, "")
        kw: dict[str, Any] = {
            "dest": f"opt:{f.name}",
            "default": argparse.SUPPRESS,
            "help": help_text,
        }
        if "bool" in typ:
            kw["action"] = argparse.BooleanOptionalAction
            names = names[:1]
        else:
            kw["type"] = _arg_type(typ)
            kw["metavar"] = f.name.upper() if len(f.name) > 2 else f.name
        parser.add_argument(*names, **kw)
    for alias, target in _CLI_ALIASES.items():
        parser.add_argument(
            *_flag_names(alias),
            dest=f"opt:{alias}",
            type=_arg_type(str(_FIELD_TYPES[target])),
            default=argparse.SUPPRESS,
            metavar=target.upper() if len(target) > 2 else target,
            help=f"alias of --{target.replace('_', '-')} (authors' code)",
        )


def _as_typed(exc: ParameterError, overrides: dict[str, Any]) -> UserInputError:
    """``exc`` with the flag the user typed (an alias such as ``--steps``) named."""
    typed = [k for k in overrides if k != exc.name and _CLI_ALIASES.get(k) == exc.name]
    if not typed:
        return exc
    return UserInputError(f"{exc} (given as --{typed[0]})")


#: fields that only PALSGD reads: a preset's values are dropped (with a note) when the
#: user chooses another algorithm and does not set them
_PALSGD_ONLY = ("p", "eta")


def _user_keys(args: argparse.Namespace) -> set[str]:
    """Project names of the options the user set (flags and the --config file)."""
    from theory.validation import canonicalize

    ns = vars(args)
    keys = [k[4:] for k in ns if k.startswith("opt:")]
    if ns.get("cfg:config"):
        from empirical.config import load_config_file

        keys += [str(k) for k in load_config_file(ns["cfg:config"])]
    keys = [_CLI_ALIASES.get(k, k) for k in keys]
    return set(canonicalize(dict.fromkeys(keys), allow_unknown=True))


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """Resolve preset < --config file < flags into a validated :class:`TrainConfig`.

    Choosing an algorithm other than PALSGD (``--algorithm diloco``) drops the pull
    settings ``p`` and ``eta`` that the preset (not the user) set, with a note on stderr;
    a ``p > 0`` the user set is refused by the algorithm's validation, naming ``p``.
    """
    ns = vars(args)
    overrides = {k[4:]: v for k, v in ns.items() if k.startswith("opt:")}
    preset, file = ns.get("cfg:preset"), ns.get("cfg:config")
    try:
        cfg = resolve_config(preset=preset, file=file, overrides=overrides)
    except ParameterError as exc:
        raise _as_typed(exc, overrides) from None
    if cfg.algorithm == "palsgd":
        return cfg
    user = _user_keys(args)
    dropped = {
        k: getattr(cfg, k)
        for k in _PALSGD_ONLY
        if k not in user and getattr(cfg, k) not in (None, 0, 0.0)
    }
    if not dropped:
        return cfg
    shown = ", ".join(f"{k} = {v:g}" for k, v in dropped.items())
    print(
        f"{_PROG}: note: --algorithm {cfg.algorithm} has no pull steps; the preset's "
        f"{shown} {'is' if len(dropped) == 1 else 'are'} not used",
        file=sys.stderr,
    )
    overrides.update(dict.fromkeys(dropped))
    return resolve_config(preset=preset, file=file, overrides=overrides)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``palsgd train`` (see the module docstring for exit codes)."""
    cfg = config_from_args(args)
    if vars(args).get("cfg:print_config"):
        import json

        print(json.dumps(config_to_dict(cfg), indent=2))
        return EXIT_OK
    check_output_dir(cfg.output_dir, "--output-dir")
    if cfg.checkpoint_dir:
        check_output_dir(cfg.checkpoint_dir, "--checkpoint-dir")
    try:
        if cfg.nproc > 1 and "WORLD_SIZE" not in os.environ:
            return launch_torchrun(cfg)
        return train(cfg)
    except MemoryError:
        print(f"{_PROG}: error{_rank_tag()}: out of memory", file=sys.stderr)
        return EXIT_NO_RESOURCES
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        print(
            f"{_PROG}: error{_rank_tag()}: no space left on the device while writing "
            f"'{exc.filename or 'an output file'}'",
            file=sys.stderr,
        )
        return EXIT_NO_RESOURCES


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m empirical.train`` (the torchrun entry): parse, train, map errors to codes."""
    parser = argparse.ArgumentParser(
        prog="python -m empirical.train", description="PALSGD trainer (one rank of a torchrun job)"
    )
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return run(args)
    except UserInputError as exc:
        print(f"{_PROG}: error{_rank_tag()}: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print(f"{_PROG}: interrupted{_rank_tag()}", file=sys.stderr)
        return 130


def _rank_tag() -> str:
    ws = os.environ.get("WORLD_SIZE")
    return f" (rank {os.environ.get('RANK', '?')})" if ws and ws != "1" else ""


# ----------------------------------------------------------------------------- launch

#: the task of each dataset name (as :func:`empirical.data.build_dataset` builds them),
#: for the model/dataset check before ranks launch (the datasets themselves are built by
#: each rank)
_DATASET_TASKS = {
    "embedded-text": "lm",
    "tinystories": "lm",
    "embedded-images": "image",
    "cifar10": "image",
    "imagefolder": "image",
}


def check_before_launch(cfg: TrainConfig) -> None:
    """The checks of :func:`prepare` that need no data, run once before torchrun starts
    ``cfg.nproc`` ranks, so that bad input exits with 2 and one line naming the option
    instead of failing inside every rank: model and dataset names and their tasks, the
    algorithm's fields (coins, outer optimizer, ``p`` for a non-PALSGD algorithm, ...),
    the pull's stability and the device. Raises :class:`UserInputError`.
    """
    from empirical import data as data_mod
    from empirical import models
    from empirical.algorithms import check_stability

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
    alg = algorithm_config(cfg)
    check_stability(alg, cfg.alpha, strict=True)
    _resolve_device(cfg, 0)


def launch_torchrun(cfg: TrainConfig) -> int:
    """Run ``cfg.nproc`` ranks on this node through ``torch.distributed.run``.

    The resolved configuration is passed as a JSON file, so every rank sees exactly the
    options validated here. Returns the launcher's exit code, except that a run whose ranks
    stopped on a non-finite loss returns :data:`EXIT_DIVERGED` (torchrun itself reports
    any failing child as 1), an interrupted launch 130, and any other failure
    :data:`theory.exitcodes.FAILED`.
    """
    check_before_launch(cfg)
    out = check_output_dir(cfg.output_dir, "--output-dir")
    run_id = uuid.uuid4().hex
    cfg_path = atomic_write_json(out / "launch_config.json", config_to_dict(cfg))
    cmd = [
        sys.executable,
        "-c",
        "import sys; from empirical.train import run_torchrun; sys.exit(run_torchrun(sys.argv[1:]))",
        "--standalone",
        f"--nproc-per-node={cfg.nproc}",
        f"--max-restarts={cfg.max_restarts}",
        "-m",
        "empirical.train",
        "--config",
        str(cfg_path),
    ]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PALSGD_RUN_ID"] = run_id
    code = subprocess.run(cmd, env=env, check=False).returncode
    if code != 0:
        summary = out / "summary.json"
        with contextlib.suppress(OSError, ValueError):
            import json

            data = json.loads(summary.read_text())
            if data.get("run_id") == run_id and data.get("status") == "diverged":
                return EXIT_DIVERGED
        if code in (exitcodes.INTERRUPTED, -2):
            return exitcodes.INTERRUPTED
        if code == EXIT_USER_ERROR:
            print(
                f"{_PROG}: the ranks refused the input (see their messages above)", file=sys.stderr
            )
            return EXIT_USER_ERROR
        print(
            f"{_PROG}: the torchrun launch of {cfg.nproc} ranks failed with exit code {code} "
            "(see the ranks' messages above)",
            file=sys.stderr,
        )
        return exitcodes.FAILED
    return code


def run_torchrun(argv: Sequence[str]) -> int:
    """``torch.distributed.run`` with ``argv``, in this process; returns an exit code.

    torchrun ends a failed launch with a traceback of its own ``ChildFailedError``; here a
    failed launch prints one line per failed rank instead and returns 2 when every failed
    rank refused its input (exit code 2), 3 when a rank diverged, 130 when interrupted and
    :data:`theory.exitcodes.FAILED` otherwise (a rank killed or crashed).
    """
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    try:
        torchrun_main(list(argv))
    except ChildFailedError as exc:
        codes = set()
        for rank, failure in sorted(exc.failures.items()):
            code = failure.exitcode
            codes.add(code)
            how = f"killed by {failure.signal_name()}" if code < 0 else f"exit code {code}"
            print(f"{_PROG}: rank {rank} failed ({how})", file=sys.stderr)
        own = codes - {-signal.SIGTERM}  # the launcher stops the other ranks with SIGTERM
        if own == {EXIT_USER_ERROR}:
            return EXIT_USER_ERROR
        if EXIT_DIVERGED in own:
            return EXIT_DIVERGED
        return exitcodes.FAILED
    except (KeyboardInterrupt, SignalException) as exc:
        sig = getattr(exc, "sigval", signal.SIGINT)
        print(f"{_PROG}: launch interrupted ({signal.Signals(sig).name})", file=sys.stderr)
        return exitcodes.INTERRUPTED if sig == signal.SIGINT else exitcodes.FAILED
    return EXIT_OK


# ----------------------------------------------------------------------------- preparation


@dataclass
class Prepared:
    """What :func:`prepare` found: everything that can fail on bad input, before any
    process group exists."""

    cfg: TrainConfig
    algorithm: Any  # empirical.algorithms.AlgorithmConfig
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
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), local
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")), local


def algorithm_config(cfg: TrainConfig):
    """The :class:`empirical.algorithms.AlgorithmConfig` of a training configuration."""
    from empirical.algorithms import AlgorithmConfig

    kw = {ALGORITHM_FIELDS[k]: getattr(cfg, k) for k in ALGORITHM_FIELDS}
    kw = {k: v for k, v in kw.items() if v is not None}
    if kw.get("clip_grad_norm") == 0:
        kw["clip_grad_norm"] = None
    if cfg.reference_faithful:
        if cfg.algorithm == "palsgd" and "outer_steps_per_sync" not in kw:
            kw["A"] = cfg.A
        return AlgorithmConfig.reference_faithful(**kw)
    return AlgorithmConfig(**kw)


def _backend(cfg: TrainConfig, device: str) -> str:
    """The process-group backend: ``cfg.backend`` or, for ``auto``, NCCL on CUDA."""
    if cfg.backend != "auto":
        return cfg.backend
    return "nccl" if device.startswith("cuda") else "gloo"


def _resolve_device(cfg: TrainConfig, local_rank: int, world_size: int = 1) -> str:
    """This rank's device (bound with ``torch.cuda.set_device``; see
    :func:`empirical.distributed.bind_device` for the rules and their errors)."""
    import torch

    from empirical.distributed import bind_device

    device = cfg.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    backend = cfg.backend if cfg.backend != "auto" else ("nccl" if device != "cpu" else "gloo")
    return str(bind_device(device, backend, local_rank, world_size))


def prepare(cfg: TrainConfig, rank: int | None = None, world_size: int | None = None) -> Prepared:
    """Every check that bad input can fail, without a process group (so that a bad option
    makes every rank exit 2 instead of leaving the others waiting in a collective).

    Names (model, dataset, algorithm), the data path, the algorithm's fields, the pull's
    stability (``alpha*eta/p >= 2`` is an error, ``> 1`` a warning; see
    :func:`empirical.algorithms.check_stability`), the device and the checkpoint to resume
    from (format, match with this run, files present with the recorded sizes).
    """
    from empirical import data as data_mod
    from empirical import models
    from empirical.algorithms import check_stability
    from empirical.checkpoint import (
        check_compatible,
        intact_checkpoints,
        latest_complete,
        read_manifest,
        resolve_resume,
    )

    r, ws, local = _world()
    rank = r if rank is None else rank
    world_size = ws if world_size is None else world_size
    task = models.model_task(cfg.model)
    if cfg.dataset not in data_mod.DATASET_NAMES:
        raise UserInputError(
            f"unknown dataset '{cfg.dataset}': known datasets are "
            f"{', '.join(data_mod.DATASET_NAMES)}"
        )
    alg = algorithm_config(cfg)
    stability = check_stability(alg, cfg.alpha, strict=True)
    overrides: dict[str, Any] = {}
    if task == "lm":
        context = models.model_spec(cfg.model).get("max_position_embeddings", cfg.seq_len)
        if cfg.seq_len > context:
            overrides["max_position_embeddings"] = cfg.seq_len
    try:
        kw: dict[str, Any] = {"tokenizer": cfg.tokenizer} if task == "lm" else {}
        if cfg.pretokenize:
            if cfg.dataset != "tinystories":
                raise UserInputError(
                    f"option 'pretokenize' applies to the 'tinystories' dataset, not "
                    f"'{cfg.dataset}'"
                )
            kw["pretokenize"] = True
        train_set = data_mod.build_dataset(
            cfg.dataset, path=cfg.data_path, split="train", seq_len=cfg.seq_len, seed=cfg.seed, **kw
        )
        eval_set = None
        if cfg.eval_interval > 0:
            eval_set = data_mod.build_dataset(
                cfg.dataset,
                path=cfg.data_path,
                split="val",
                seq_len=cfg.seq_len,
                seed=cfg.seed,
                **kw,
            )
    except (UserInputError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        raise UserInputError(
            f"dataset '{cfg.dataset}' (--data-path {cfg.data_path}): {exc}"
        ) from None
    data_task = getattr(train_set, "task", task)
    if data_task != task:
        raise UserInputError(
            f"model '{cfg.model}' is a {task} model but dataset '{cfg.dataset}' is a "
            f"{data_task} dataset"
        )
    vocab = getattr(train_set, "vocab_size", None) if task == "lm" else None
    classes = getattr(train_set, "num_classes", None) if task == "image" else None
    device = _resolve_device(cfg, local, world_size)
    coin_trace = None
    if cfg.coins_file is not None:
        import numpy as np

        from empirical.algorithms import recorded_coins

        try:
            coin_trace = np.load(cfg.coins_file, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise UserInputError(f"coins file '{cfg.coins_file}' cannot be read: {exc}") from None
        recorded_coins(coin_trace)  # shape and values checked here, before any collective

    root = cfg.checkpoint_path()
    resume = cfg.resume
    if resume is None and int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0:
        resume = "auto"  # a torchrun restart continues from the latest checkpoint
    resume_dir, manifest, candidates, error = None, None, None, None
    changed: dict[str, tuple[Any, Any]] = {}
    try:
        if resume == "auto":
            meta = checkpoint_meta(cfg, world_size)

            def same_run(manifest: dict[str, Any], directory: Path) -> None:
                check_compatible(manifest, meta, directory)

            good, bad = intact_checkpoints(root, rank, same_run)
            candidates = [step for step, _ in good]
            if good:
                resume_dir = good[0][1]
            for directory, why in bad:
                if resume_dir is None or directory.name > resume_dir.name:
                    print(
                        f"{_PROG}: warning{_rank_tag()}: skipping checkpoint '{directory}': {why}",
                        file=sys.stderr,
                    )
        else:
            resume_dir = resolve_resume(resume, root)
        if resume_dir is not None:
            manifest = read_manifest(resume_dir)
            changed = check_resume(cfg, resume_dir, manifest, world_size)
    except UserInputError as exc:
        if world_size == 1:
            raise
        # only this rank may see the problem (storage not shared): report it after the
        # process group exists, on every rank, instead of leaving the others waiting
        error = str(exc)
    if resume is None and error is None and not cfg.overwrite and latest_complete(root) is not None:
        raise UserInputError(
            f"checkpoint directory '{root}' already holds checkpoints (latest "
            f"'{latest_complete(root).name}'): pass --resume auto to continue that run, "
            "--overwrite to start afresh, or choose another --output-dir/--checkpoint-dir"
        )
    return Prepared(
        cfg,
        alg,
        stability,
        task,
        train_set,
        eval_set,
        overrides,
        vocab,
        classes,
        rank,
        world_size,
        local,
        device,
        resume_dir,
        manifest,
        changed,
        candidates,
        error,
        coin_trace,
    )


def build_inner_optimizer(cfg: TrainConfig, params):
    """The inner ``torch.optim`` optimizer (learning rate ``alpha``; the algorithm applies
    the ``1/(1-p)`` scaling of PALSGD's gradient steps itself)."""
    import torch

    params = list(params)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.alpha, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "sgd_momentum":
        return torch.optim.SGD(
            params, lr=cfg.alpha, momentum=cfg.momentum, weight_decay=cfg.weight_decay
        )
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(
            params,
            lr=cfg.alpha,
            betas=(cfg.beta1, cfg.beta2),
            eps=1e-8,
            weight_decay=cfg.weight_decay,
        )
    raise UserInputError(f"unknown inner optimizer '{cfg.optimizer}'")  # pragma: no cover


# ----------------------------------------------------------------------------- training


class InjectedFailure(RuntimeError):
    """Raised by ``crash_at_step`` (fault injection for restart tests)."""


class _CheckpointFailed(Exception):
    """A checkpoint could not be written (disk full, permissions); raised on every rank."""

    def __init__(self, step: int, why: str, last: Path | None):
        super().__init__(step, why)
        self.step, self.why, self.last = step, why, last


class _Diverged(Exception):
    def __init__(self, step: int, where: str):
        super().__init__(step, where)
        self.step, self.where = step, where


def train(cfg: TrainConfig) -> int:
    """Train one rank (joining or creating the process group); returns the exit code."""
    prep = prepare(cfg)
    from empirical.distributed import cleanup, init_distributed

    backend = _backend(cfg, prep.device)
    own_group = _init_group_after_restart(backend, prep.device)
    ctx = init_distributed(backend, device=prep.device)
    try:
        return _Trainer(prep, ctx).fit()
    except RuntimeError as exc:
        if ctx.world_size == 1 or not _from_collective(exc):
            raise
        print(
            f"{_PROG}: error{_rank_tag()}: a peer rank died or the collective failed "
            f"({_first_words(exc)})",
            file=sys.stderr,
        )
        return exitcodes.FAILED
    finally:
        cleanup(ctx)
        if own_group:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()


def _from_collective(exc: BaseException) -> bool:
    """Whether ``exc`` came out of a ``torch.distributed`` call (a collective whose peer
    died or whose connection broke), judged by the frame that raised it."""
    import torch.distributed as dist

    if isinstance(exc, dist.DistError):
        return True
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    package = os.path.dirname(dist.__file__)
    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(package + os.sep)


def _first_words(exc: BaseException, limit: int = 160) -> str:
    """The first sentence of ``exc`` without a ``[source.cc:line]`` prefix, at most
    ``limit`` characters."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    text = re.sub(r"^\[[^\]]*\]\s*", "", text).split(". ")[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _init_group_after_restart(backend: str, device: str = "cpu") -> bool:
    """Create the process group of a *restarted* torchrun attempt on a fresh key space.

    torchrun's workers share the agent's TCPStore across restarts
    (``TORCHELASTIC_USE_AGENT_STORE=True``); the keys the previous attempt's ranks wrote
    there (gloo's peer addresses, for one) are still present, and a restarted rank that
    reads them tries to connect to a dead process ("Gloo connectFullMesh failed ...
    Connection refused"). Prefixing the store with the attempt number gives every attempt
    its own keys. Returns True if a group was created here (first attempts, runs without
    torchrun and already-initialised groups are left to :func:`init_distributed`).
    """
    import datetime

    import torch.distributed as dist

    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    env = os.environ
    if (
        restart == 0
        or dist.is_initialized()
        or env.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
        or not all(k in env for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))
    ):
        return False
    timeout = datetime.timedelta(seconds=1800)
    world = int(env["WORLD_SIZE"])
    store = dist.TCPStore(
        env["MASTER_ADDR"], int(env["MASTER_PORT"]), world, is_master=False, timeout=timeout
    )
    store = dist.PrefixStore(f"palsgd/attempt_{restart}", store)
    import torch

    from empirical.distributed import _init_kwargs

    kw = _init_kwargs(backend, torch.device(device))  # the device is bound by prepare()
    dist.init_process_group(
        backend, store=store, rank=int(env["RANK"]), world_size=world, timeout=timeout, **kw
    )
    return True


def _per_rank_seed(seed: int, rank: int) -> int:
    """Seed of torch's default generator on ``rank`` (seeds are validated non-negative)."""
    from empirical.data import _seed_of

    return _seed_of(seed, rank, 0x7A1)


def _stats_dict(stats: Any) -> dict[str, Any]:
    """A copy of the algorithm's statistics (a dict, see empirical.algorithms.base)."""
    return dict(stats)


class _Trainer:
    """The loop of one rank (construct through :func:`train`)."""

    def __init__(self, prep: Prepared, ctx: Any):
        import torch
        import torch.distributed as dist

        from empirical import data as data_mod
        from empirical import models
        from empirical.algorithms import build_algorithm
        from empirical.timing import DeviceClock, Totals

        self.prep, self.cfg, self.ctx = prep, prep.cfg, ctx
        cfg = self.cfg
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.main = self.rank == 0
        self.device = torch.device(prep.device)
        self.dist = dist
        self.torch = torch
        self.models = models
        # library code (dropout) draws from torch's default generator: seed it per rank
        torch.manual_seed(_per_rank_seed(cfg.seed, self.rank))

        model = models.build_model(
            cfg.model,
            vocab_size=prep.vocab_size,
            num_classes=prep.num_classes,
            seed=cfg.seed,
            **prep.model_overrides,
        )
        self.model = model.to(self.device)
        self.eval_model = None
        self.eval_loader = None
        if self.main and prep.eval_set is not None:
            self.eval_model = copy.deepcopy(self.model).eval()
            # the same batches at every evaluation: a fixed seeded sample of the split
            self.eval_loader = data_mod.make_loader(
                prep.eval_set,
                batch_size=cfg.batch_size,
                rank=0,
                world_size=1,
                seed=cfg.seed,
                shuffle=True,
                drop_last=False,
            )
        self.optimizer = build_inner_optimizer(cfg, self.model.parameters())
        self.algo = build_algorithm(
            prep.algorithm, self.model, self.optimizer, coin_source=prep.coin_trace
        )
        self.stream = data_mod.BatchStream(
            prep.train_set,
            cfg.batch_size,
            rank=self.rank,
            world_size=self.world,
            seed=cfg.seed,
            iid=cfg.iid,
            num_workers=cfg.num_workers,
            pin_memory=cfg.pin_memory and self.device.type == "cuda",
        )
        self.clock = DeviceClock(self.device)
        self.totals = Totals()
        self.scaler = None
        self.autocast = None
        if cfg.precision != "fp32":
            dtype = torch.bfloat16 if cfg.precision == "bf16" else torch.float16
            dev_type = self.device.type
            self.autocast = lambda: torch.autocast(device_type=dev_type, dtype=dtype)
            if cfg.precision == "fp16":
                self.scaler = torch.amp.GradScaler(dev_type)
        self.loss_fn = lambda model, batch: models.compute_loss(model, batch, prep.task)
        self.changed = dict(prep.changed)
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        self.loss_count = 0
        self._bad_pending = torch.full((), math.inf, dtype=torch.float64, device=self.device)
        self.tokens = 0
        self.last_loss: float | None = None
        self.last_eval: dict[str, Any] | None = None
        self.last_checkpoint: Path | None = prep.resume_dir
        self.metrics_position: dict[str, int] | None = None
        self.start_step = 0
        self.resumed_from: str | None = None
        resume_dir, manifest = self._agree_on_resume()
        if resume_dir is not None:
            self._load(resume_dir, manifest)
        else:
            self._clear_checkpoints()
        self._apply_hyperparameters(int(self.algo.t))
        self._seen = {k: float(self.algo.stats[k]) for k in ("time_comm_s", "time_pull_s")}
        self.samples_per_seq = cfg.seq_len if prep.task == "lm" else 1

    # ------------------------------------------------------------------ collectives
    def _agree(self, ok: bool) -> bool:
        flag = self.torch.tensor([0.0 if ok else 1.0], device=self.device)
        self.dist.all_reduce(flag)
        return float(flag.item()) == 0.0

    def _barrier(self) -> None:
        if self.world > 1:
            self.dist.barrier()

    def _agree_on_resume(self) -> tuple[Path | None, dict[str, Any] | None]:
        """Collective: every rank reports what it would resume from; return the common
        choice, or raise the same UserInputError on every rank.

        With ``--resume auto`` the ranks take the newest step intact on all of them (an
        older one than some rank's newest when a file is corrupt or missing there); with an
        explicit checkpoint every rank must see the same step.
        """
        from empirical.checkpoint import read_manifest, step_dir

        prep = self.prep
        mine = {
            "rank": self.rank,
            "step": None if prep.manifest is None else int(prep.manifest["step"]),
            "candidates": prep.resume_candidates,
            "error": prep.resume_error,
        }
        notes: list[Any] = [None] * self.world
        self.dist.all_gather_object(notes, mine)
        errors = [n for n in notes if n["error"]]
        if errors:
            first = errors[0]
            raise UserInputError(
                f"rank {first['rank']} cannot resume: {first['error']}"
                + (f" ({len(errors)} ranks report problems)" if len(errors) > 1 else "")
            )
        if prep.resume_candidates is not None:  # --resume auto
            step = common_resume_step(notes)
            if step is None:
                return None, None
            directory = step_dir(self.cfg.checkpoint_path(), step)
            if mine["step"] != step:
                if self.main:
                    print(
                        f"{_PROG}: warning: resuming from step {step}, the newest checkpoint "
                        "intact on every rank",
                        file=sys.stderr,
                    )
                manifest = read_manifest(directory)
                self.changed = check_resume(self.cfg, directory, manifest, self.world)
                return directory, manifest
            return prep.resume_dir, prep.manifest
        steps = {n["rank"]: n["step"] for n in notes}
        if len(set(steps.values())) > 1:
            raise UserInputError(
                f"the ranks see different checkpoints to resume from (step by rank: {steps}); "
                "the checkpoint directory must be shared storage visible to every rank"
            )
        return prep.resume_dir, prep.manifest

    def _apply_hyperparameters(self, t: int) -> None:
        """Set the inner and outer optimizers' hyperparameters from this run's configuration
        (and the schedules at step ``t``): after a resume the loaded optimizer states would
        otherwise keep the checkpoint's values."""
        cfg = self.cfg
        for g in self.optimizer.param_groups:
            g["weight_decay"] = cfg.weight_decay
            if cfg.optimizer == "sgd_momentum":
                g["momentum"] = cfg.momentum
            if cfg.optimizer == "adamw":
                g["betas"] = (cfg.beta1, cfg.beta2)
        outer = getattr(self.algo, "outer", None)
        if outer is not None:
            outer.set_hyperparameters(mu=float(self.prep.algorithm.mu))
        self._set_rates(t)

    def _set_rates(self, t: int) -> None:
        """The scheduled inner learning rate of step ``t`` (and the outer one)."""
        from empirical.schedules import rate_at

        cfg = self.cfg
        lr = rate_at(cfg.lr_schedule, cfg.alpha, t, cfg.T, cfg.lr_warmup, cfg.lr_min_ratio)
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        self.lr = lr
        outer = getattr(self.algo, "outer", None)
        if outer is not None:
            T0 = int(self.prep.algorithm.warmup_steps)
            gamma = rate_at(
                cfg.outer_lr_schedule,
                float(self.prep.algorithm.gamma),
                t - T0,
                cfg.T - T0,
                cfg.outer_lr_warmup,
                cfg.outer_lr_min_ratio,
            )
            outer.set_hyperparameters(gamma=gamma)

    # ------------------------------------------------------------------ resume / checkpoint
    def _load(self, directory: Path, manifest: dict[str, Any]) -> None:
        from empirical.checkpoint import load_rank_state, remove_after, restore_rng

        error: UserInputError | None = None
        state: dict[str, Any] = {}
        try:
            state = load_rank_state(directory, manifest, self.rank, map_location=self.device)
        except UserInputError as exc:
            error = exc
        if not self._agree(error is None):
            raise error or UserInputError(
                f"checkpoint '{directory}': another rank could not load its file"
            )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.algo.load_state_dict(state["algorithm"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.stream.load_state_dict(state["data"])
        tr = state["trainer"]
        self.totals.load_state_dict(tr["totals"])
        self.loss_sum = tr["loss_sum"].to(self.device)
        self.loss_count = int(tr["loss_count"])
        self.tokens = int(tr["tokens"])
        self.last_loss = tr.get("last_loss")
        self.last_eval = tr.get("last_eval")
        self.metrics_position = tr.get("metrics_position")
        restore_rng(state["rng"])
        self.start_step = int(manifest["step"])
        if int(self.algo.t) != self.start_step:
            raise UserInputError(
                f"checkpoint '{directory}' is inconsistent: manifest step {self.start_step}, "
                f"algorithm counter {self.algo.t}"
            )
        self.resumed_from = str(directory)
        if self.main:
            removed = remove_after(self.cfg.checkpoint_path(), self.start_step)
            for path in removed:
                print(
                    f"{_PROG}: removed checkpoint '{path}' (after the resumed step)",
                    file=sys.stderr,
                )
        self._barrier()

    def _clear_checkpoints(self) -> None:
        """A fresh run owns its checkpoint directory: delete what an earlier run left there
        (only partial checkpoints, unless ``overwrite`` allowed complete ones; see
        :func:`prepare`)."""
        from empirical.checkpoint import remove_after

        if self.main:
            for path in remove_after(self.cfg.checkpoint_path(), -1):
                print(f"{_PROG}: removed old checkpoint '{path}'", file=sys.stderr)
        self._barrier()

    def _save(self, step: int) -> Path:
        from empirical.checkpoint import (
            capture_rng,
            prune,
            save_rank_state,
            step_dir,
            write_manifest,
        )

        cfg = self.cfg
        self._resolve_times()
        state = {
            "format": 1,
            "rank": self.rank,
            "step": step,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "algorithm": self.algo.state_dict(),
            "data": self.stream.state_dict(),
            "rng": capture_rng(),
            "scaler": None if self.scaler is None else self.scaler.state_dict(),
            "trainer": {
                "totals": self.totals.state_dict(),
                "loss_sum": self.loss_sum.detach().cpu(),
                "loss_count": self.loss_count,
                "tokens": self.tokens,
                "last_loss": self.last_loss,
                "last_eval": self.last_eval,
                "metrics_position": self.writer.position() if self.main else None,
            },
        }
        root = cfg.checkpoint_path()
        directory = step_dir(root, step)
        info: dict[str, Any]
        try:
            info = save_rank_state(root, step, self.rank, state)
        except OSError as exc:
            info = {"rank": self.rank, "error": f"{exc.strerror or exc} (rank {self.rank})"}
            info["errno"] = exc.errno
        infos: list[Any] = [None] * self.world
        self.dist.all_gather_object(infos, info)
        failed = [i for i in infos if "error" in i]
        if not failed and self.main:
            try:
                meta = checkpoint_meta(cfg, self.world)
                meta["T"] = cfg.T
                meta["config"] = config_to_dict(cfg)
                write_manifest(root, step, meta, infos)
            except OSError as exc:
                failed = [{"rank": 0, "error": str(exc.strerror or exc), "errno": exc.errno}]
        if not self._agree(not failed):
            # no rank's partial files may stay: they would keep the disk full
            self._barrier()
            if self.main:
                shutil.rmtree(directory, ignore_errors=True)
            self._barrier()
            why = failed[0]["error"] if failed else "another rank failed to write its file"
            raise _CheckpointFailed(step, why, self.last_checkpoint)
        if self.main:
            prune(root, cfg.keep_checkpoints)
        self._barrier()
        self.last_checkpoint = directory
        return directory

    # ------------------------------------------------------------------ monitoring
    def _check_finite(self, step: int, params: bool) -> None:
        """Collective: raise _Diverged (on every rank) if any rank saw a non-finite loss
        or, with ``params``, holds non-finite parameters. Runs before every train record and
        every checkpoint, so no checkpoint ever holds a diverged state."""
        torch = self.torch
        bad = torch.stack(
            [
                self._bad_pending.clone(),
                torch.tensor(math.inf, dtype=torch.float64, device=self.device),
            ]
        )
        if params and not all(bool(torch.isfinite(p).all()) for p in self.model.parameters()):
            bad[1] = float(step)
        self.dist.all_reduce(bad, op=self.dist.ReduceOp.MIN)
        loss_step, param_step = float(bad[0].item()), float(bad[1].item())
        if math.isfinite(loss_step):
            raise _Diverged(int(loss_step), "loss")
        if math.isfinite(param_step):
            raise _Diverged(int(param_step), "parameters")

    # ------------------------------------------------------------------ evaluation
    def _global_state(self) -> tuple[dict[str, Any], str]:
        """Collective: the state of the global model to evaluate, and what it is.

        With an anchor (PALSGD, DiLoCo, outer SGD; DDP, where ranks agree) that is the
        anchor. Local SGD with plain averaging keeps no anchor copy, so between syncs the
        global model is the workers' average, formed here with one all-reduce that is not
        counted in the training statistics.
        """
        algo = self.algo
        state = algo.anchor_state_dict()
        anchorless = (
            hasattr(algo, "z") and algo.z is None and bool(getattr(algo, "local_started", False))
        )
        if not anchorless or self.world == 1:
            return state, "anchor"
        for val in state.values():
            if val.is_floating_point():
                self.dist.all_reduce(val)
                val.div_(self.world)
        return state, "average"

    def _evaluate(self, step: int) -> None:
        state, evaluated = self._global_state()
        if self.eval_model is not None:
            self.eval_model.load_state_dict(state)
            with self.torch.random.fork_rng(devices=[]):
                res = self.models.evaluate(
                    self.eval_model,
                    self.eval_loader,
                    self.prep.task,
                    max_batches=self.cfg.eval_batches,
                )
            rec: dict[str, Any] = {"step": step}
            for key, val in res.items():
                if key in ("loss_sum", "count", "batches"):
                    continue
                rec[f"eval_{key}"] = val
            rec["evaluated"] = evaluated
            rec["eval_samples"] = res.get("count")
            rec["wall_s"] = self.totals.wall_s
            self.last_eval = self.writer.write("eval", rec)
        self._barrier()

    # ------------------------------------------------------------------ logging
    def _resolve_times(self) -> None:
        """Fold the step times recorded since the last call into ``totals`` (one wait for
        the GPU's CUDA events; nothing to wait for on the CPU)."""
        self.algo.resolve_timings()
        self.clock.resolve()
        wall = float(self.clock.stats.pop("wall_s", 0.0))
        comm = float(self.algo.stats["time_comm_s"]) - self._seen["time_comm_s"]
        pull = float(self.algo.stats["time_pull_s"]) - self._seen["time_pull_s"]
        self._seen = {k: float(self.algo.stats[k]) for k in ("time_comm_s", "time_pull_s")}
        self.totals.wall_s += wall
        self.totals.comm_s += comm
        self.totals.pull_s += pull
        self.totals.compute_s += max(wall - comm - pull, 0.0)

    def _log(self, step: int) -> None:
        torch = self.torch
        self._resolve_times()
        window = torch.stack(
            [
                self.loss_sum.to(torch.float64),
                torch.tensor(float(self.loss_count), dtype=torch.float64, device=self.device),
            ]
        )
        self.dist.all_reduce(window)
        total, count = float(window[0].item()), int(window[1].item())
        self.loss_sum.zero_()
        self.loss_count = 0
        loss = total / count if count else None
        if loss is not None:
            self.last_loss = loss
        cfg = self.cfg
        self.tokens += count * cfg.A * cfg.batch_size * self.samples_per_seq
        s = _stats_dict(self.algo.stats)
        rec = {
            "step": step,
            "loss": loss,
            "grad_steps": s.get("grad_steps"),
            "pull_steps": s.get("pull_steps"),
            "syncs": s.get("syncs"),
            "allreduce_calls": s.get("allreduce_calls"),
            "bytes_communicated": s.get("bytes_communicated"),
            "time_compute_s": self.totals.compute_s,
            "time_comm_s": self.totals.comm_s,
            "time_pull_s": self.totals.pull_s,
            "wall_s": self.totals.wall_s,
            "consensus": s.get("last_consensus"),
            "lr": self.lr,
            "tokens": self.tokens,
        }
        self.writer.write("train", rec)
        if self.bar is not None and loss is not None:
            self.bar.set_postfix(loss=f"{loss:.4f}", syncs=s.get("syncs"))

    # ------------------------------------------------------------------ the loop
    def _next_batch(self) -> Any:
        """The stream's next micro-batch. A DataLoader draws its base seed from torch's
        default generator whenever an iterator starts (every epoch, and once more after a
        resume); isolating that draw keeps the generator that dropout uses identical to an
        uninterrupted run's."""
        with self.torch.random.fork_rng(devices=[]):
            return self.stream.next()

    def _one_step(self) -> Any:
        """One local step through ``algo.train_step`` (micro-batches, pulls, discarded
        batches, interleaved outer steps, autocast and the GradScaler are the algorithm's)."""
        torch = self.torch
        algo = self.algo
        self._set_rates(int(algo.t))
        start = self.clock.mark()
        res = algo.train_step(
            self._next_batch,
            self.loss_fn,
            micro_batches=self.cfg.A,
            scaler=self.scaler,
            autocast=self.autocast,
        )
        self.clock.add("wall_s", start, self.clock.mark())
        step = int(algo.t)
        if res.loss is not None:
            acc = res.loss
            self.loss_sum += acc
            self.loss_count += 1
            bad = ~torch.isfinite(acc)
            self._bad_pending = torch.where(
                bad & ~torch.isfinite(self._bad_pending),
                torch.tensor(float(step), dtype=torch.float64, device=self.device),
                self._bad_pending,
            )
        return res.info

    def fit(self) -> int:
        """Run until ``T`` steps (or ``max_steps_this_run``); return the exit code."""
        from tqdm.auto import tqdm

        from empirical.metrics import MetricsWriter

        cfg = self.cfg
        out = Path(cfg.output_dir)
        self.run_id = os.environ.get("PALSGD_RUN_ID")
        if self.main:
            out.mkdir(parents=True, exist_ok=True)
            atomic_write_json(out / "config.json", config_to_dict(cfg))
            if self.prep.stability.status != "ok":
                print(f"{_PROG}: warning: {self.prep.stability.message}", file=sys.stderr)
        self.run_name = cfg.run_name or run_name(cfg, self.world)
        self.writer = MetricsWriter(
            out,
            enabled=self.main,
            tensorboard=cfg.tensorboard,
            resume_position=self.metrics_position,
            start_step=self.start_step + 1 if self.resumed_from else 0,
            wandb_project=cfg.wandb_project,
            run_name=self.run_name,
            run_config=config_to_dict(cfg),
        )
        self.bar = None
        if self.main and cfg.progress:
            self.bar = tqdm(
                total=cfg.T, initial=self.start_step, desc="train", unit="step", dynamic_ncols=True
            )
        started = time.perf_counter()
        if self.resumed_from:
            event = {"event": "resume", "step": self.start_step, "checkpoint": self.resumed_from}
            if self.changed:
                event["changed"] = {
                    k: {"checkpoint": o, "now": n} for k, (o, n) in self.changed.items()
                }
                if self.main:
                    text = ", ".join(f"{k} {o!r} -> {n!r}" for k, (o, n) in self.changed.items())
                    print(
                        f"{_PROG}: resumed at step {self.start_step} with changed "
                        f"hyperparameters (--allow-changed): {text}",
                        file=sys.stderr,
                    )
            self.writer.write("event", event)
        else:
            self.writer.write("event", {"event": "start", "step": 0, "world_size": self.world})
            if cfg.eval_interval > 0:
                self._evaluate(0)
        status, code, message = "finished", EXIT_OK, ""
        ran = 0
        try:
            step = self.start_step
            while step < cfg.T:
                if cfg.max_steps_this_run is not None and ran >= cfg.max_steps_this_run:
                    status = "stopped"
                    break
                self._one_step()
                step = int(self.algo.t)
                ran += 1
                if self.bar is not None:
                    self.bar.update(1)
                last = step >= cfg.T
                if step % cfg.log_interval == 0 or last:
                    self._check_finite(step, params=False)
                    self._log(step)
                if cfg.eval_interval > 0 and (step % cfg.eval_interval == 0 or last):
                    self._evaluate(step)
                if cfg.checkpoint_interval > 0 and (step % cfg.checkpoint_interval == 0 or last):
                    self._check_finite(step, params=True)
                    self._save(step)
                if step == cfg.crash_at_step and self._first_attempt():
                    raise InjectedFailure(f"crash_at_step: injected failure after step {step}")
            if status == "stopped":
                self.writer.write(
                    "event", {"event": "stopped", "step": step, "reason": "max_steps_this_run"}
                )
            elif cfg.export_dir:
                self._export()
        except _CheckpointFailed as exc:
            status, code = "no_space" if "space" in exc.why.lower() else "failed", EXIT_NO_RESOURCES
            last_ckpt = str(exc.last) if exc.last else "none"
            message = (
                f"the checkpoint of step {exc.step} could not be written ({exc.why}); its "
                f"partial files were removed; last complete checkpoint: {last_ckpt} (free "
                "space and continue with --resume auto)"
            )
            with contextlib.suppress(OSError):
                self.writer.write("event", {"event": "checkpoint_failed", "step": exc.step})
            if self.main:
                print(f"{_PROG}: error: {message}", file=sys.stderr)
        except _Diverged as exc:
            status, code = "diverged", EXIT_DIVERGED
            last_ckpt = str(self.last_checkpoint) if self.last_checkpoint else "none"
            found = (
                "first such step over all ranks"
                if exc.where == "loss"
                else "found by the check before writing the checkpoint"
            )
            message = (
                f"training diverged: non-finite {exc.where} at step {exc.step} ({found}; "
                f"stopped at step {int(self.algo.t)}); last good checkpoint: {last_ckpt}"
            )
            self.writer.write("event", {"event": "diverged", "step": exc.step, "message": message})
            if self.main:
                print(f"{_PROG}: error: {message}", file=sys.stderr)
        finally:
            if self.bar is not None:
                self.bar.close()
        if self.main:
            try:
                self._summary(status, message, time.perf_counter() - started)
            except OSError as exc:
                if code == EXIT_OK:
                    raise
                print(f"{_PROG}: warning: summary.json not written: {exc}", file=sys.stderr)
            if status not in ("diverged", "no_space", "failed"):
                loss = "n/a" if self.last_loss is None else f"{self.last_loss:.4f}"
                ev = (self.last_eval or {}).get("eval_loss")
                ev_text = "" if ev is None else f", anchor eval loss {ev:.4f}"
                print(
                    f"{_PROG}: {status} at step {int(self.algo.t)}/{cfg.T}: train loss "
                    f"{loss}{ev_text}; metrics in {out}"
                )
        self.writer.close()
        return code

    def _first_attempt(self) -> bool:
        restarts = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        return self.resumed_from is None and restarts == 0

    def _summary(self, status: str, message: str, elapsed: float) -> None:
        torch = self.torch
        s = _stats_dict(self.algo.stats)
        self._resolve_times()
        summary = {
            "status": status,
            "message": message,
            "run_id": self.run_id,
            "run_name": self.run_name,
            "changed_on_resume": {
                k: {"checkpoint": o, "now": n} for k, (o, n) in self.changed.items()
            },
            "export_dir": self.cfg.export_dir if status == "finished" else None,
            "step": int(self.algo.t),
            "T": self.cfg.T,
            "world_size": self.world,
            "backend": str(self.dist.get_backend()),
            "resumed_from": self.resumed_from,
            "last_checkpoint": str(self.last_checkpoint) if self.last_checkpoint else None,
            "config": config_to_dict(self.cfg),
            "algorithm": self.prep.algorithm.to_dict(),
            "pull_coefficient": self.prep.stability.coefficient,
            "totals": {
                **{k: v for k, v in s.items() if isinstance(v, int | float | None)},
                "time_compute_s": self.totals.compute_s,
                "time_comm_s": self.totals.comm_s,
                "time_pull_s": self.totals.pull_s,
                "wall_s": self.totals.wall_s,
                "elapsed_s_this_run": elapsed,
                "tokens": self.tokens,
                "parameters": sum(p.numel() for p in self.model.parameters()),
            },
            "final": {"train_loss": self.last_loss, "eval": self.last_eval},
            "versions": package_versions(("torch", "transformers", "numpy", "palsgd-toolkit")),
            "hardware": {
                "platform": platform.platform(),
                "processor": platform.processor(),
                "cpu_count": os.cpu_count(),
                "device": str(self.device),
                "cuda": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
                if torch.cuda.is_available()
                else [],
                "torch_threads": torch.get_num_threads(),
            },
        }
        atomic_write_json(Path(self.cfg.output_dir) / "summary.json", summary)

    def _export(self) -> None:
        """Collective: write the anchor (the global model) to ``export_dir`` on rank 0."""
        state, _ = self._global_state()
        if self.main:
            path = export_anchor(self.model, state, self.cfg.export_dir, self.cfg.model)
            print(f"{_PROG}: exported the anchor to {path}", file=sys.stderr)
        self._barrier()


def _entry() -> None:  # pragma: no cover - exercised through torchrun in the tests
    from torch.distributed.elastic.multiprocessing.errors import record

    sys.exit(record(main)())


if __name__ == "__main__":  # pragma: no cover
    _entry()
