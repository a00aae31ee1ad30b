"""``palsgd train``: distributed training with DDP, Local SGD, Post-Local SGD, DiLoCo, PALSGD.

Files:

* ``options.py``: the flags (:data:`~empirical.train.options.OPTIONS`, one
  :class:`~core.options.Option` per :class:`~empirical.config.TrainConfig` field, the
  authors' names as aliases) and their resolution into a configuration;
* ``cli.py``: the entry points ``palsgd train`` (:func:`run`) and ``python -m
  empirical.train`` (:func:`main`, each torchrun rank; ``__main__.py``);
* ``launch.py``: the checks before ranks launch, the torchrun launch of ``--nproc`` and the
  in-process run of one rank; ``lifeline.py``: signals forwarded to torchrun's agent, and
  the agent and the ranks ending with their parent (parent-death signals);
* ``prepare.py``: every check bad input can fail, per rank, before a process group exists;
* ``session.py``: one rank's session (:func:`train`: group, trainer, a peer's death);
* ``trainer.py``: the loop of one rank (:class:`~empirical.train.trainer.Trainer`: it
  builds what the rank trains and runs the steps), which owns three parts, each a class
  given the run's :class:`~empirical.train.state.RunState` (``state.py``: who runs, what it
  trains, the counters a checkpoint carries, where it resumed):
  :class:`~empirical.train.checkpoints.Checkpoints` (``checkpoints.py``: resume and
  checkpoints), :class:`~empirical.train.monitor.Monitor` (``monitor.py``: finiteness,
  evaluation, times, train records) and :class:`~empirical.train.records.Records`
  (``records.py``: config, events, metrics writer, summary, export);
* ``outcomes.py``: exit codes and the exceptions a run stops with.

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
(:data:`empirical.config.TRAIN_PRESETS`), ``--config FILE`` reads YAML/JSON, flags override both;
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

Devices: every rank decides its device once from ``LOCAL_RANK`` and binds
``cuda:LOCAL_RANK`` (``torch.cuda.set_device``) before its process group exists; the bound
device goes to the group as it is and an NCCL group gets it as ``device_id``
(:func:`empirical.distributed.bind_device`, ``init_distributed(bound=...)``). ``--precision bf16|fp16`` runs the forward pass under ``torch.autocast`` with
fp32 parameters (master weights), fp32 anchor and outer state; fp16 adds a
``torch.amp.GradScaler`` passed to ``algo.step`` (unscale, clip, skip inf/NaN steps,
update). A step never waits for the GPU: step times are CUDA events, the loss and the
consensus statistic stay on the device, all read when metrics are written (docs/trainer.md).

Resume: ``--resume auto`` takes the newest checkpoint that is intact on every rank (an
older one when the newest is corrupt, with a warning); after the process group exists the
ranks agree on it (an all-gather) and stop with a clear error when they cannot. Every
hyperparameter is compared with the checkpoint's configuration: a changed one is refused
with its name unless ``--allow-changed NAME[,NAME...]`` is given, in which case the new
value is applied from the resumed step on and the change recorded (``metrics.jsonl``
resume event, ``summary.json`` ``changed_on_resume``).

Exit codes: 0 finished (or stopped by ``--max-steps-this-run``), 2 bad input
(:class:`~core.errors.UserInputError`; raised before any collective, and for
checkpoint problems that only some ranks see, on every rank after the ranks compared
notes), 3 the loss or the parameters became NaN/inf (the last checkpoint written before is
intact), 4 a launched rank failed (killed, crashed, or its peer died: the survivors end with
one line each) or the launch was stopped by SIGTERM/SIGHUP, 71 out of resources (disk full
while writing a checkpoint or metrics, with one rank or several: the partial checkpoint is
removed and the last complete one stays usable; out of memory), 130 interrupted.
"""

from __future__ import annotations

from core.lazy import lazy_exports

# lazy (core.lazy): `palsgd train --help` builds its parser from empirical.train.options
# without importing torch, which the modules below need
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "empirical.export": ("export_anchor",),
        "empirical.train.cli": ("main", "run"),
        "empirical.train.launch": (
            "check_before_launch",
            "launch_torchrun",
            "run_ranks",
            "run_torchrun",
        ),
        "empirical.train.options": ("OPTIONS", "add_arguments", "config_from_args"),
        "empirical.train.outcomes": (
            "EXIT_DIVERGED",
            "EXIT_NO_RESOURCES",
            "EXIT_OK",
            "EXIT_USER_ERROR",
            "InjectedFailure",
        ),
        "empirical.train.prepare": (
            "Prepared",
            "algorithm_config",
            "build_inner_optimizer",
            "prepare",
        ),
        "empirical.train.session": ("train",),
    },
)

__all__ = [
    "OPTIONS",
    "add_arguments",
    "config_from_args",
    "run",
    "main",
    "check_before_launch",
    "launch_torchrun",
    "run_ranks",
    "run_torchrun",
    "train",
    "prepare",
    "algorithm_config",
    "build_inner_optimizer",
    "Prepared",
    "InjectedFailure",
    "EXIT_OK",
    "EXIT_USER_ERROR",
    "EXIT_DIVERGED",
    "EXIT_NO_RESOURCES",
    "export_anchor",
]
