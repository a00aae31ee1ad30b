"""``palsgd figures``: regenerate every figure of the paper (and the toolkit's checks) at once.

``palsgd figures [--scale quick|paper] [--only NAME ...] [--out DIR] [--nproc N] [--seed S]
[--dry-run] [--data NAME=PATH ...] [--runs-dir DIR] [--no-train] [--verify-report DIR]
[--profile NAME] [--gpus G] [--max-parallel-runs N] [--smoke-runs N]``

1. Plan the training runs the selected figures need (:func:`paper_figures.runs.plan_runs`)
   and, at paper scale, where they train (:mod:`paper_figures.runs.placement`: ``--gpus``,
   ``--max-parallel-runs``); ``--dry-run`` prints the plan (paper scale: each run's GPUs
   and estimated duration, the total wall time) and what the machine lacks, and stops.
   ``--smoke-runs N`` trains the first N runs shrunk to a few steps on the same GPUs
   (into ``OUT/smoke-runs``) and stops.
2. Train the runs that are not cached in ``--runs-dir`` (default ``OUT/runs``): quick, all
   in one ``torchrun`` launch of ``--nproc`` gloo processes on the CPU; paper, one launch
   of ``--nproc`` processes per run on its GPU set, runs side by side on spare GPUs
   (docs/paper_figures_gpus.md).
3. Calibrate the cost model (cached in ``OUT/calibration.json``): quick scale, the gloo
   all-reduce with the emulated slow link (:func:`empirical.cost.measure_allreduce` +
   :func:`~empirical.cost.calibrate_link`) and each task's gradient and pull step
   (:func:`~empirical.cost.measure_compute`, run in ``--nproc`` concurrent processes as
   the training ranks run); paper scale, the GPU's steps and the link of ``--profile``.
4. Draw each figure (:mod:`paper_figures.figures`) into ``OUT`` with its data (CSV/JSON),
   and write ``OUT/manifest.json``: command line, versions, seed, hardware, scale, plan,
   runs (cached or trained, durations), calibration, and per figure its files and duration.

Exit codes (:mod:`core.exitcodes`): 0 every figure drawn, 4 some figure or run failed
(listed; the others are drawn), 2 bad input (unknown figure or scale, missing run or report
directory, a paper-scale run on a machine without the GPUs or data it needs).

Files:

* ``options.py``: the options (:data:`~paper_figures.cli.options.OPTIONS`,
  :class:`~core.options.Option` records declared by :func:`add_arguments`) and their checks.
* ``calibration.py``: :func:`calibrate`, the cost model of this machine.
* ``plan_view.py``: the GPUs of a paper-scale invocation and the printed plan.
* ``draw.py``: one command per figure, its inputs taken from the plan, runs and options.
* ``manifest.py``: ``OUT/manifest.json``.
* ``command.py``: :func:`run`, the command end to end (and ``--dry-run``).
"""

from paper_figures.cli.calibration import calibrate
from paper_figures.cli.command import run
from paper_figures.cli.options import DEFAULT_OUT, OPTIONS, add_arguments

__all__ = ["OPTIONS", "add_arguments", "run", "calibrate", "DEFAULT_OUT"]
