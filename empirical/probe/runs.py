"""``palsgd train`` runs as the probe reads them: :func:`load_run`, the run's probe problem
and trajectory points, and the short reference run the probe trains itself."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from core import exitcodes
from core.errors import UserInputError
from core.files import read_mapping_file
from core.validation import check_int
from empirical import checkpoint as ck
from empirical import models
from empirical.config import config_from_dict, resolve_config
from empirical.data import build_dataset, dataset_shard
from empirical.metrics import read_jsonl
from empirical.probe.problem import ProbeProblem, get_flat, sample_loss_for_task
from empirical.train import EXIT_OK, algorithm_config, run_ranks


@dataclass
class RunInfo:
    """A ``palsgd train`` output directory: configuration, world size, checkpoints."""

    directory: Path
    config: Any  # empirical.config.TrainConfig
    world_size: int
    steps_done: int
    algorithm: dict[str, Any]
    checkpoints: list[tuple[int, Path]]
    summary: dict[str, Any] | None

    def best_eval_loss(self) -> dict[str, Any] | None:
        """Lowest ``eval_loss`` in ``metrics.jsonl`` (validation split, anchor), if any."""
        path = self.directory / "metrics.jsonl"
        if not path.is_file():
            return None
        evals = [r for r in read_jsonl(path, "eval") if r.get("eval_loss") is not None]
        if not evals:
            return None
        best = min(evals, key=lambda r: r["eval_loss"])
        return {"eval_loss": best["eval_loss"], "step": best["step"]}


def load_run(directory: str | Path) -> RunInfo:
    """Read a run directory written by ``palsgd train`` (``config.json``, ``summary.json``,
    checkpoints). Missing or malformed files raise :class:`UserInputError`."""
    d = Path(directory)
    if not d.is_dir():
        raise UserInputError(f"run directory '{d}' does not exist")
    if not (d / "config.json").is_file():
        raise UserInputError(
            f"run directory '{d}' has no config.json: not an output directory of palsgd train"
        )
    try:
        cfg = config_from_dict(read_mapping_file(d / "config.json", "run config"))
    except UserInputError as exc:
        raise UserInputError(f"run directory '{d}': config.json: {exc}") from None
    summary = (
        read_mapping_file(d / "summary.json", "run summary")
        if (d / "summary.json").is_file()
        else None
    )
    roots = [d / "checkpoints"]
    if cfg.checkpoint_dir:
        roots = [Path(cfg.checkpoint_dir), d / Path(cfg.checkpoint_dir).name, *roots]
    root = next((r for r in roots if r.is_dir()), None)
    ckpts = [(s, p) for s, p, done in ck.list_checkpoints(root)] if root else []
    ckpts = [(s, p) for s, p in ckpts if (p / ck.MANIFEST).is_file()]
    if summary is not None and "world_size" in summary:
        K = int(summary["world_size"])
    elif ckpts:
        K = int(ck.read_manifest(ckpts[-1][1])["world_size"])
    else:
        K = int(cfg.nproc)
    if summary is not None and isinstance(summary.get("algorithm"), dict):
        alg = dict(summary["algorithm"])
    else:
        alg = algorithm_config(cfg).to_dict()
    done = int(summary["step"]) if summary and "step" in summary else (ckpts[-1][0] if ckpts else 0)
    return RunInfo(d, cfg, K, done, alg, ckpts, summary)


def run_problem(info: RunInfo, device: str = "cpu") -> ProbeProblem:
    """The probe problem of a run: its model (initialised from its seed), training split and
    the K shards of epoch 0 (:func:`empirical.data.shard_indices`, as the trainer reads)."""
    cfg = info.config
    task = models.model_task(cfg.model)
    kw: dict[str, Any] = {"tokenizer": cfg.tokenizer} if task == "lm" else {}
    try:
        ds = build_dataset(
            cfg.dataset, path=cfg.data_path, split="train", seq_len=cfg.seq_len, seed=cfg.seed, **kw
        )
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        raise UserInputError(f"dataset '{cfg.dataset}': {exc}") from None
    overrides: dict[str, Any] = {}
    if task == "lm":
        context = models.model_spec(cfg.model).get("max_position_embeddings", cfg.seq_len)
        if cfg.seq_len > context:
            overrides["max_position_embeddings"] = cfg.seq_len
    model = models.build_model(
        cfg.model,
        vocab_size=getattr(ds, "vocab_size", None) if task == "lm" else None,
        num_classes=getattr(ds, "num_classes", None) if task == "image" else None,
        seed=cfg.seed,
        **overrides,
    )
    K = info.world_size
    shards = [
        np.asarray(dataset_shard(ds, 0, rank=k, world_size=K, seed=cfg.seed, iid=cfg.iid))
        for k in range(K)
    ]
    return ProbeProblem(model, ds, sample_loss_for_task(task), shards, device=device)


def run_points(
    info: RunInfo, problem: ProbeProblem, points: int
) -> list[tuple[int, str, torch.Tensor]]:
    """``(step, label, xbar)``: the initial model and up to ``points - 1`` checkpoints
    (evenly spread, the last always included); ``xbar`` averages the ranks' models."""
    points = check_int("points", points, 1)
    out = [(0, "init", get_flat(problem.model).clone())]
    ck_list = [(s, p) for s, p in info.checkpoints if s > 0]
    if points > 1 and ck_list:
        n = min(points - 1, len(ck_list))
        pick = sorted({round(j * (len(ck_list) - 1) / max(n - 1, 1)) for j in range(n)})
        if n == 1:
            pick = [len(ck_list) - 1]
        model = problem.model
        init_state = {k: v.clone() for k, v in model.state_dict().items()}
        for j in pick:
            step, path = ck_list[j]
            manifest = ck.read_manifest(path)
            acc = None
            K = int(manifest["world_size"])
            for r in range(K):
                state = ck.load_rank_state(path, manifest, r, map_location="cpu")
                model.load_state_dict(state["model"])
                x = get_flat(model).to(torch.float64)
                acc = x if acc is None else acc + x
                if r == 0:
                    rank0 = {k: v.clone() for k, v in model.state_dict().items()}
            model.load_state_dict(rank0)  # buffers: rank 0's (ranks agree after a sync)
            out.append((step, f"checkpoint {path.name} (mean of {K} ranks)", acc / K))
        model.load_state_dict(init_state)
    return out


#: trainer options of the default reference run: PALSGD inside the theory (see
#: :func:`train_reference_run`)
INSIDE_THEORY: dict[str, Any] = {
    "optimizer": "sgd",
    "alpha": 0.004,
    "weight_decay": 0.0,
    "outer": "average",
    "gamma": 1.0,
    "mu": 0.0,
    "clip_grad_norm": None,
    "algorithm": "palsgd",
    "H": 2,
    "p": 0.2,
    "eta": 1.0,
    "T0": 0,
}


def train_reference_run(
    out: Path,
    *,
    model: str | None = None,
    dataset: str | None = None,
    data_path: str | None = None,
    nproc: int = 2,
    steps: int = 48,
    points: int = 5,
    iid: bool | None = None,
    preset: str | None = None,
    config_file: str | None = None,
    seed: int = 0,
    progress: bool = True,
) -> Path:
    """Train the short run the probe replays; returns its output directory ``out``.

    Without ``preset``/``config_file`` the run is inside the theory: PALSGD with inner SGD
    (``alpha = 0.004``, no weight decay), outer averaging, independent coins, no clipping,
    ``H = 2``, ``p = 0.2``, ``eta = 1`` (pull coefficient 0.02). On the embedded default
    (tiny GPT-Neo, embedded text, K = 2, T = 48) the constants the probe measures put this
    run inside every condition of the PALSGD bound (C1-C4), so the report compares the
    measured rate with a bound that applies. Checkpoints every ``steps // (points - 1)``
    steps.
    """
    over: dict[str, Any] = dict(INSIDE_THEORY) if preset is None and config_file is None else {}
    for key, val in (
        ("model", model),
        ("dataset", dataset),
        ("data_path", data_path),
        ("iid", iid),
    ):
        if val is not None:
            over[key] = val
    interval = max(1, steps // max(points - 1, 1))
    over.update(
        T=steps,
        nproc=nproc,
        seed=seed,
        output_dir=str(out),
        overwrite=True,
        checkpoint_interval=interval,
        keep_checkpoints=steps // interval + 2,
        eval_interval=interval,
        progress=progress,
        checkpoint_dir=None,
    )
    cfg = resolve_config(preset=preset, file=config_file, overrides=over)
    code = run_ranks(cfg)
    if code == exitcodes.INTERRUPTED:
        raise KeyboardInterrupt
    if code != EXIT_OK:
        raise UserInputError(
            f"the reference run in '{out}' failed with exit code {code} (see its messages above)"
        )
    return out
