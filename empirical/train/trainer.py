"""The training loop of one rank: :class:`Trainer` builds the model, the inner optimizer,
the algorithm and the batch stream, and :meth:`Trainer.fit` runs the steps. Checkpoints,
monitoring and records are its parts in :mod:`~empirical.train.checkpoints`,
:mod:`~empirical.train.monitor` and :mod:`~empirical.train.records`."""

from __future__ import annotations

import copy
import math
import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from empirical import data as data_mod
from empirical import models
from empirical.algorithms import build_algorithm
from empirical.algorithms.fsdp import SliceStream, shard_model, worker_mesh
from empirical.data import seed_of
from empirical.schedules import rate_at
from empirical.timing import DeviceClock, Totals
from empirical.train.checkpoints import CheckpointSteps
from empirical.train.monitor import Monitoring
from empirical.train.outcomes import EXIT_OK, CheckpointFailed, Diverged, InjectedFailure
from empirical.train.prepare import Prepared, build_inner_optimizer
from empirical.train.records import RunRecords

__all__ = ["Trainer"]


def _per_rank_seed(seed: int, rank: int) -> int:
    """Seed of torch's default generator on ``rank`` (seeds are validated non-negative)."""
    return seed_of(seed, rank, 0x7A1)


class Trainer(CheckpointSteps, Monitoring, RunRecords):
    """The loop of one rank (construct through :func:`empirical.train.train`)."""

    def __init__(self, prep: Prepared, ctx: Any):
        self.prep, self.cfg, self.ctx = prep, prep.cfg, ctx
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.main = self.rank == 0
        self.device = torch.device(prep.device)
        self.dist, self.torch = dist, torch
        # library code (dropout) draws from torch's default generator: seed it per rank
        torch.manual_seed(_per_rank_seed(self.cfg.seed, self.rank))
        self._build()
        self._reset_counters()
        resume_dir, manifest = self._agree_on_resume()
        if resume_dir is not None:
            self._load(resume_dir, manifest)
        else:
            self._clear_checkpoints()
        self._apply_hyperparameters(int(self.algo.t))
        self._seen = {k: float(self.algo.stats[k]) for k in ("time_comm_s", "time_pull_s")}
        self.samples_per_seq = self.cfg.seq_len if prep.task == "lm" else 1

    # ------------------------------------------------------------------ construction
    def _build(self) -> None:
        """Model, evaluation copy (rank 0), inner optimizer, algorithm, batches, precision."""
        cfg, prep = self.cfg, self.prep
        model = models.build_model(
            cfg.model,
            vocab_size=prep.vocab_size,
            num_classes=prep.num_classes,
            seed=cfg.seed,
            **prep.model_overrides,
        )
        self.model = model.to(self.device)
        self.eval_model, self.eval_loader = None, None
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
        # sharded workers (--shards S): FSDP2 within each worker, the sync across workers
        self.wm, self.plain_model = None, None
        if cfg.shards > 1:
            self.wm = worker_mesh(cfg.shards, self.device.type)
            if self.main and cfg.export_dir:
                self.plain_model = copy.deepcopy(self.model)  # the export's template
            shard_model(self.model, self.wm)
        self.optimizer = build_inner_optimizer(cfg, self.model.parameters())
        self.algo = build_algorithm(
            prep.algorithm,
            self.model,
            self.optimizer,
            coin_source=prep.coin_trace,
            process_group=None if self.wm is None else self.wm.replicate_group,
        )
        wm = self.wm
        self.stream = data_mod.BatchStream(
            prep.train_set,
            cfg.batch_size * (1 if wm is None else wm.S),
            rank=self.rank if wm is None else wm.worker,
            world_size=self.world if wm is None else wm.K,
            seed=cfg.seed,
            iid=cfg.iid,
            num_workers=cfg.num_workers,
            pin_memory=cfg.pin_memory and self.device.type == "cuda",
        )
        if wm is not None:  # this rank's slice of its worker's batch
            self.stream = SliceStream(self.stream, wm.shard, wm.S)
        self.clock = DeviceClock(self.device)
        self.totals = Totals()
        self._build_precision()

    def _build_precision(self) -> None:
        """``autocast`` (bf16/fp16, fp32 master weights) and fp16's GradScaler."""
        self.scaler, self.autocast = None, None
        if self.cfg.precision == "fp32":
            return
        dtype = torch.bfloat16 if self.cfg.precision == "bf16" else torch.float16
        dev_type = self.device.type
        self.autocast = lambda: torch.autocast(device_type=dev_type, dtype=dtype)
        if self.cfg.precision == "fp16":
            self.scaler = torch.amp.GradScaler(dev_type)

    def _reset_counters(self) -> None:
        self.changed = dict(self.prep.changed)
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        self.loss_count = 0
        self._bad_pending = torch.full((), math.inf, dtype=torch.float64, device=self.device)
        self.tokens = 0
        self.last_loss: float | None = None
        self.last_eval: dict[str, Any] | None = None
        self.last_checkpoint: Path | None = self.prep.resume_dir
        self.metrics_position: dict[str, int] | None = None
        self.start_step = 0
        self.resumed_from: str | None = None

    def _loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        return models.compute_loss(model, batch, self.prep.task)

    # ------------------------------------------------------------------ hyperparameters
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
        cfg = self.cfg
        self.lr = rate_at(cfg.lr_schedule, cfg.alpha, t, cfg.T, cfg.lr_warmup, cfg.lr_min_ratio)
        for g in self.optimizer.param_groups:
            g["lr"] = self.lr
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

    # ------------------------------------------------------------------ the loop
    def _next_batch(self) -> Any:
        """The stream's next micro-batch. A DataLoader draws its base seed from torch's
        default generator whenever an iterator starts (every epoch, and once more after a
        resume); isolating that draw keeps the generator that dropout uses identical to an
        uninterrupted run's."""
        with torch.random.fork_rng(devices=[]):
            return self.stream.next()

    def _one_step(self) -> None:
        """One step through ``algo.train_step`` (micro-batches, pulls, discarded batches,
        interleaved outer steps, autocast and the GradScaler are the algorithm's)."""
        self._set_rates(int(self.algo.t))
        start = self.clock.mark()
        res = self.algo.train_step(
            self._next_batch,
            self._loss,
            micro_batches=self.cfg.A,
            scaler=self.scaler,
            autocast=self.autocast,
        )
        if int(self.algo.t) >= self.cfg.T:
            self.algo.finish()  # an overlapped sync's outer step still in flight lands
        self.clock.add("wall_s", start, self.clock.mark())
        if res.loss is not None:
            self._note_loss(res.loss, int(self.algo.t))

    def _run_steps(self) -> str:
        """Steps until ``T`` (or ``max_steps_this_run``: ``"stopped"``), with the records,
        evaluations and checkpoints due after each; returns the status."""
        cfg = self.cfg
        step, ran = self.start_step, 0
        while step < cfg.T:
            if cfg.max_steps_this_run is not None and ran >= cfg.max_steps_this_run:
                return "stopped"
            self._one_step()
            step, ran = int(self.algo.t), ran + 1
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
        return "finished"

    def fit(self) -> int:
        """Run until ``T`` steps (or ``max_steps_this_run``); return the exit code."""
        self._open_records()
        started = time.perf_counter()
        status, code, message = "finished", EXIT_OK, ""
        try:
            status = self._run_steps()
            if status == "stopped":
                event = {"event": "stopped", "step": int(self.algo.t)}
                self.writer.write("event", {**event, "reason": "max_steps_this_run"})
            elif self.cfg.export_dir:
                self._export()
        except CheckpointFailed as exc:
            status, code, message = self._checkpoint_failed(exc)
        except Diverged as exc:
            status, code, message = self._diverged(exc)
        finally:
            if self.bar is not None:
                self.bar.close()
        self._close_records(status, code, message, time.perf_counter() - started)
        return code

    def _first_attempt(self) -> bool:
        restarts = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        return self.resumed_from is None and restarts == 0
