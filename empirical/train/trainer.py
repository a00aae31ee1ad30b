"""The training loop of one rank: :class:`Trainer` builds what the rank trains
(:func:`build_state`: model, inner optimizer, algorithm, batch stream, precision), owns its
three parts, each given the run's :class:`~empirical.train.state.RunState`:

* :class:`~empirical.train.checkpoints.Checkpoints`: resume and checkpoints;
* :class:`~empirical.train.monitor.Monitor`: finiteness, evaluation, times, train records;
* :class:`~empirical.train.records.Records`: config, events, metrics writer, summary, export;

and runs the steps (:meth:`Trainer.fit`)."""

from __future__ import annotations

import copy
import os
import time
from typing import Any, NamedTuple

import torch
import torch.distributed as dist

from core.errors import InputChanged
from empirical import data as data_mod
from empirical import models
from empirical.algorithms import build_algorithm
from empirical.algorithms.fsdp import SliceStream, shard_model, worker_mesh
from empirical.data import seed_of
from empirical.distributed import all_agree
from empirical.schedules import rate_at
from empirical.timing import DeviceClock
from empirical.train.checkpoints import Checkpoints
from empirical.train.monitor import Monitor
from empirical.train.outcomes import EXIT_OK, CheckpointFailed, Diverged, InjectedFailure
from empirical.train.prepare import Prepared, build_inner_optimizer
from empirical.train.records import Records
from empirical.train.stacked import build_stacked
from empirical.train.state import Counters, RunState

__all__ = ["Trainer", "Built", "build_state"]


def _per_rank_seed(seed: int, rank: int) -> int:
    """Seed of torch's default generator on ``rank`` (seeds are validated non-negative)."""
    return seed_of(seed, rank, 0x7A1)


class Built(NamedTuple):
    """What :func:`build_state` builds: the run's state at step 0, rank 0's evaluation copy
    of the model and its loader (``None`` elsewhere or without an evaluation split), and
    the export's template when the model is sharded (``None`` otherwise)."""

    state: RunState
    eval_model: torch.nn.Module | None
    eval_loader: Any
    plain_model: torch.nn.Module | None


def build_state(prep: Prepared) -> Built:
    """What this rank trains, at step 0: the model (sharded over its worker with
    ``--shards``), the inner optimizer, the algorithm, the batch stream and the fp16
    GradScaler, with the evaluation's and the export's copies of the model."""
    cfg = prep.cfg
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(prep.device)
    model = models.build_model(
        cfg.model,
        vocab_size=prep.vocab_size,
        num_classes=prep.num_classes,
        seed=cfg.seed,
        **prep.model_overrides,
    ).to(device)
    eval_model, eval_loader = None, None
    if rank == 0 and prep.eval_set is not None:
        eval_model = copy.deepcopy(model).eval()
        # the same batches at every evaluation: a fixed seeded sample of the split
        eval_loader = data_mod.make_loader(
            prep.eval_set,
            batch_size=cfg.batch_size,
            rank=0,
            world_size=1,
            seed=cfg.seed,
            shuffle=True,
            drop_last=False,
        )
    # sharded workers (--shards S): FSDP2 within each worker, the sync across workers
    mesh, plain_model = None, None
    if cfg.shards > 1:
        mesh = worker_mesh(cfg.shards, device.type)
        if rank == 0 and cfg.export_dir:
            plain_model = copy.deepcopy(model)  # the export's template
        shard_model(model, mesh)
    if cfg.compile:  # in place: the same parameters, the plain module's state-dict names
        models.compile_model(model)
    optimizer = build_inner_optimizer(cfg, model.parameters())
    if cfg.workers_per_process > 1:  # K workers in this process (docs/stacked_workers.md)
        algo, stream = build_stacked(
            cfg, prep.algorithm, model, optimizer, task=prep.task,
            train_set=prep.train_set, coin_source=prep.coin_trace, device=device,
        )  # fmt: skip
    else:
        algo, stream = _rank_algorithm(prep, model, optimizer, mesh, device)
    scaler = torch.amp.GradScaler(device.type) if cfg.precision == "fp16" else None
    state = RunState(
        prep=prep,
        rank=rank,
        world=world,
        device=device,
        model=model,
        optimizer=optimizer,
        algo=algo,
        stream=stream,
        scaler=scaler,
        mesh=mesh,
        counters=Counters.fresh(device),
        last_checkpoint=prep.resume_dir,
        changed=dict(prep.changed),
    )
    return Built(state, eval_model, eval_loader, plain_model)


def _rank_algorithm(
    prep: Prepared, model: torch.nn.Module, optimizer: Any, mesh: Any, device: torch.device
) -> tuple[Any, Any]:
    """This rank's algorithm and batch stream (a sharded worker's slice of it)."""
    cfg = prep.cfg
    algo = build_algorithm(
        prep.algorithm,
        model,
        optimizer,
        coin_source=prep.coin_trace,
        process_group=None if mesh is None else mesh.replicate_group,
    )
    stream: Any = data_mod.BatchStream(
        prep.train_set,
        cfg.batch_size * (1 if mesh is None else mesh.S),
        rank=dist.get_rank() if mesh is None else mesh.worker,
        world_size=dist.get_world_size() if mesh is None else mesh.K,
        seed=cfg.seed,
        iid=cfg.iid,
        num_workers=cfg.num_workers,
        pin_memory=cfg.pin_memory and device.type == "cuda",
    )
    if mesh is not None:  # this rank's slice of its worker's batch
        stream = SliceStream(stream, mesh.shard, mesh.S)
    return algo, stream


class Trainer:
    """The loop of one rank (construct through :func:`empirical.train.train`; ``ctx``: the
    process group's :class:`~empirical.distributed.DistContext`)."""

    def __init__(self, prep: Prepared, ctx: Any):
        self.ctx, self.cfg = ctx, prep.cfg
        # library code (dropout) draws from torch's default generator: seed it per rank
        torch.manual_seed(_per_rank_seed(self.cfg.seed, dist.get_rank()))
        built = build_state(prep)
        st = self.state = built.state
        self.algo, self.device = st.algo, st.device
        self.clock = DeviceClock(st.device)
        self.autocast = self._autocast()
        self.records = Records(st, built.plain_model)
        self.checkpoints = Checkpoints(st, self.records)
        self.checkpoints.resume()
        self.monitor = Monitor(st, self.records, self.clock, built.eval_model, built.eval_loader)
        self._apply_hyperparameters(int(self.algo.t))
        self.input_agreed = self.ended_alone = False

    def _autocast(self) -> Any:
        """``autocast`` of the forward pass (bf16/fp16, fp32 master weights), or ``None``."""
        if self.cfg.precision == "fp32":
            return None
        dtype = torch.bfloat16 if self.cfg.precision == "bf16" else torch.float16
        dev_type = self.device.type
        return lambda: torch.autocast(device_type=dev_type, dtype=dtype)

    def _loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        return models.compute_loss(model, batch, self.state.prep.task)

    # ------------------------------------------------------------------ hyperparameters
    def _apply_hyperparameters(self, t: int) -> None:
        """Set the inner and outer optimizers' hyperparameters from this run's configuration
        (and the schedules at step ``t``): after a resume the loaded optimizer states would
        otherwise keep the checkpoint's values."""
        cfg = self.cfg
        for g in self.state.optimizer.param_groups:
            g["weight_decay"] = cfg.weight_decay
            if cfg.optimizer == "sgd_momentum":
                g["momentum"] = cfg.momentum
            if cfg.optimizer == "adamw":
                g["betas"] = (cfg.beta1, cfg.beta2)
        if self.algo.outer is not None:
            self.algo.outer.set_hyperparameters(mu=float(self.state.prep.algorithm.mu))
        self._set_rates(t)

    def _set_rates(self, t: int) -> None:
        """The scheduled inner learning rate of step ``t`` (and the outer one)."""
        cfg, st = self.cfg, self.state
        st.lr = rate_at(cfg.lr_schedule, cfg.alpha, t, cfg.T, cfg.lr_warmup, cfg.lr_min_ratio)
        for g in st.optimizer.param_groups:
            g["lr"] = st.lr
        outer = self.algo.outer
        if outer is not None:
            T0 = int(st.prep.algorithm.warmup_steps)
            gamma = rate_at(
                cfg.outer_lr_schedule,
                float(st.prep.algorithm.gamma),
                t - T0,
                cfg.T - T0,
                cfg.outer_lr_warmup,
                cfg.outer_lr_min_ratio,
            )
            outer.set_hyperparameters(gamma=gamma)

    # ------------------------------------------------------------------ the loop
    def _next_batch(self, *worker: int) -> Any:
        """The stream's next micro-batch (``worker``: with stacked workers, whose). A DataLoader draws its base seed from torch's
        default generator whenever an iterator starts (every epoch, and once more after a
        resume); isolating that draw keeps the generator that dropout uses identical to an
        uninterrupted run's."""
        with torch.random.fork_rng(devices=[]):
            return self.state.stream.next(*worker)

    def _one_step(self) -> None:
        """One step through ``algo.train_step`` (micro-batches, pulls, discarded batches,
        interleaved outer steps, autocast and the GradScaler are the algorithm's)."""
        algo = self.algo
        self._set_rates(int(algo.t))
        start = self.clock.mark()
        res = algo.train_step(
            self._next_batch,
            self._loss,
            micro_batches=self.cfg.A,
            scaler=self.state.scaler,
            autocast=self.autocast,
        )
        if int(algo.t) >= self.cfg.T:
            algo.finish()  # an overlapped sync's outer step still in flight lands
        self.clock.add("wall_s", start, self.clock.mark())
        if res.loss is not None:  # stacked workers: the sum of `count` workers' losses
            self.monitor.note_loss(res.loss, int(algo.t), getattr(res, "count", 1))

    def _run_steps(self) -> str:
        """Steps until ``T`` (or ``max_steps_this_run``: ``"stopped"``), with the records,
        evaluations and checkpoints due after each; returns the status."""
        cfg, monitor = self.cfg, self.monitor
        step, ran = self.state.start_step, 0
        while step < cfg.T:
            if cfg.max_steps_this_run is not None and ran >= cfg.max_steps_this_run:
                return "stopped"
            self._one_step()
            step, ran = int(self.algo.t), ran + 1
            self.records.advance()
            last = step >= cfg.T
            if step % cfg.log_interval == 0 or last:
                monitor.check_finite(step, params=False)
                monitor.log(step)
            if cfg.eval_interval > 0 and (step % cfg.eval_interval == 0 or last):
                self._check_inputs()
                monitor.evaluate(step)
            if cfg.checkpoint_interval > 0 and (step % cfg.checkpoint_interval == 0 or last):
                self._check_inputs()  # no checkpoint after data that changed
                monitor.check_finite(step, params=True)  # no checkpoint holds a diverged state
                monitor.resolve_times()  # the time totals the checkpoint holds
                self.checkpoints.save(step)
            if step == cfg.crash_at_step and self._first_attempt():
                raise InjectedFailure(f"crash_at_step: injected failure after step {step}")
        return "finished"

    def _check_inputs(self) -> None:
        """Collective (before an evaluation and a checkpoint): the data files are the ones
        checked at the start (a token file's size), agreed over the ranks; raises
        :class:`~core.errors.InputChanged` on every rank otherwise."""
        sets = [s for s in (self.state.prep.train_set, self.state.prep.eval_set) if s is not None]
        sets = [s for s in sets if hasattr(s, "changed")]
        if not sets:
            return
        why = next((w for w in (s.changed() for s in sets) if w), None)
        if not all_agree(why is None, self.device):
            self.input_agreed = True
            raise InputChanged(why or "a data file changed under the run on another rank")

    def fit(self) -> int:
        """Run until ``T`` steps (or ``max_steps_this_run``); return the exit code.
        ``ended_alone`` is True afterwards when this rank stopped without its peers (an
        input file found changed by this rank's own read)."""
        self.records.open()
        started = time.perf_counter()
        status, code, message = "finished", EXIT_OK, ""
        try:
            if not self.state.resumed_from and self.cfg.eval_interval > 0:
                self._check_inputs()
                self.monitor.evaluate(0)
            status = self._run_steps()
            if status == "stopped":
                self.records.stopped()
            elif self.cfg.export_dir:
                anchor, _ = self.monitor.global_state(device="cpu")  # through host memory
                self.records.export(anchor)
        except CheckpointFailed as exc:
            status, code, message = self.records.checkpoint_failed(exc)
        except Diverged as exc:
            status, code, message = self.records.diverged(exc)
        except InputChanged as exc:
            self.ended_alone = not self.input_agreed and self.state.world > 1
            status, code, message = self.records.input_changed(exc, self.input_agreed)
        finally:
            self.records.close_bar()
        stats = dict(self.algo.stats)  # the summary's, before the last times are folded
        if self.state.main:
            self.monitor.resolve_times()
        self.records.close(status, code, message, time.perf_counter() - started, stats)
        return code

    def _first_attempt(self) -> bool:
        restarts = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        return self.state.resumed_from is None and restarts == 0
