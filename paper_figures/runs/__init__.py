"""The training runs behind the figures: the plan per scale, a cache, and one launcher.

A figure needs runs of :mod:`empirical.train`; this package decides which (:func:`plan_runs`),
keeps each in its own directory under ``RUNS_DIR`` (default ``OUT/runs``) and runs the
missing ones (:func:`execute`).

* Scales. ``quick``: a tiny GPT-Neo (``gptneo-tiny``, byte vocabulary) on the embedded
  text and a tiny CIFAR-style ResNet (``resnet-tiny``) on the embedded images, ``K = 2``
  gloo processes on the CPU, an emulated slow link (every all-reduce of ``n`` bytes is
  followed by ``latency + n / bandwidth`` seconds of delay, :data:`QUICK_LINK`; see
  :mod:`empirical.algorithms.slowlink`) so that communication costs something on one
  machine. ``paper``: the paper's model sizes and the authors' settings
  (docs/reference-implementation.md §7): GPT-Neo-8M and
  GPT-Neo-125M on TinyStories, ResNet-50 on ImageNet-1K and ResNet-18 on CIFAR-10, ``K``
  processes per run on the GPUs there are (:mod:`paper_figures.runs.placement`: a GPU per
  rank over NCCL, or ranks sharing GPUs over gloo; runs side by side on spare GPUs), no
  injected delay. Both scales use the same training code.
* Cache. A run's directory is ``RUNS_DIR/<task>-<variant>-<key>``, where ``key`` hashes the
  complete resolved :class:`~empirical.config.TrainConfig` (output directory, progress and
  launcher fields excluded), the worker count and the device kind. A run is reused when its
  ``figrun.json`` carries the same key and it finished (or diverged: a finding, kept).
* Launch on GPUs (paper scale): one ``torchrun`` launch per run with
  ``CUDA_VISIBLE_DEVICES`` naming its GPU set, the longest runs (by the cost model's
  estimate, :mod:`paper_figures.runs.estimate`) first, at most one run per GPU set at a
  time; a failed run does not stop the others (:mod:`paper_figures.runs.parallel`).
* Launch on the CPU (quick scale). The missing runs of one invocation go into one plan file; ``nproc > 1`` starts
  ``python -m torch.distributed.run --standalone --nproc-per-node N -m paper_figures.runs
  --plan FILE`` once, and every rank trains the runs one after another in the same process
  group (:func:`empirical.train.train` joins an existing group), so process start-up and
  ``import torch`` are paid once. ``nproc = 1`` trains in this process with world size 1
  (``K = 1``: no communication; Local SGD, DiLoCo and PALSGD then differ from plain SGD only
  by their outer step and pulls, so ``--nproc 1`` does not reproduce the paper's comparison).

Files:

* ``specs.py``: scales, figures, the compared methods and their algorithm names,
  :class:`TaskSpec`, :class:`RunSpec`, :class:`Plan`.
* ``tasks.py``: the task settings of each scale (:func:`tasks_for`).
* ``plan.py``: the runs of a set of figures (:func:`plan_runs`: methods, sweeps, ablation)
  and what the paper scale needs on this machine (:func:`check_paper_requirements`).
* ``cache.py``: a run's resolved config, cache key, directory and status record.
* ``device.py``: torch imported when asked: the device kind and the GPU count.
* ``launch.py``: :func:`execute` (one launch for the missing runs, or one per run on
  GPUs) and the rank entry.
* ``placement.py``: :class:`Placement`, :func:`place`: K workers on G GPUs.
* ``estimate.py``: a run's duration from the cost model, the schedule of a plan.
* ``parallel.py``: runs side by side on GPU sets, one launch each.
* ``smoke.py``: ``--smoke-runs``: the plan's first runs shrunk to a few steps.
* ``load.py``: :class:`RunData` and :func:`load_run`, a run directory as the figures read it.
* ``__main__.py``: ``python -m paper_figures.runs --plan FILE`` (one rank, under torchrun).
"""

from paper_figures.runs import specs
from paper_figures.runs.cache import STATUS_FILE, cached, resolve_spec, run_directory, run_key
from paper_figures.runs.device import current_device_kind, torch_module
from paper_figures.runs.launch import RunResult, execute
from paper_figures.runs.load import RunData, load_run
from paper_figures.runs.placement import Placement, place
from paper_figures.runs.plan import (
    ABLATION_SWITCHES,
    REPEATED_OUTER_STEPS,
    SWEEP_TASK,
    SWEEP_VALUES,
    check_paper_requirements,
    method_overrides,
    plan_runs,
)
from paper_figures.runs.specs import (  # noqa: F401 (in specs.__all__)
    ALGORITHM_LABELS,
    ALGORITHMS,
    DATA_NAMES,
    FIGURES,
    QUICK_LINK,
    QUICK_OUTER,
    SCALES,
    Plan,
    RunSpec,
    TaskSpec,
    check_scale,
    distributed_name,
    figure_method,
)
from paper_figures.runs.tasks import tasks_for

__all__ = [
    *specs.__all__,
    "SWEEP_TASK",
    "SWEEP_VALUES",
    "REPEATED_OUTER_STEPS",
    "ABLATION_SWITCHES",
    "STATUS_FILE",
    "RunData",
    "RunResult",
    "Placement",
    "place",
    "tasks_for",
    "plan_runs",
    "resolve_spec",
    "current_device_kind",
    "torch_module",
    "run_key",
    "run_directory",
    "cached",
    "execute",
    "load_run",
    "check_paper_requirements",
    "method_overrides",
]
