"""Calibrated cost model of DDP, Local SGD / DiLoCo and PALSGD: compute and communication time.

Wall-clock of a run (docs/reference-implementation.md §8)::

    time = grad_steps * C_g + pull_steps * C_p + syncs * C_sync + waits + communication

with ``C_g`` the compute of a gradient step (``A`` micro-batches of forward/backward and
the inner optimizer step), ``C_p`` the compute of a pull step (an O(d) update), ``C_sync``
the local work of a sync (flat copy, outer step), ``waits`` the time a worker waits at a
sync for the worker with the most gradient steps in the round (PALSGD with independent
coins), and communication from an alpha-beta model of all-reduce (Hockney 1994). Units:
seconds, bytes, bytes per second, FLOP, FLOP/s.

Files:

* ``profile_types.py``: the link, compute and cluster records (shared by ``profiles.py``,
  ``comm.py`` and ``link_calibration.py``; imports none of them).
* ``profiles.py``: link, compute, GPU and cluster profiles; the named clusters
  (:data:`CLUSTER_PROFILES`, every number cited or marked as an assumption); profile files.
* ``comm.py``: the all-reduce formulas (ring, tree, Rabenseifner) and DDP's bucketed,
  overlapped gradient all-reduce.
* ``trace.py``: step traces (exact from the trainer's coins and sync rule, expected, or read
  from a run) and the expected sync wait of independent coins.
* ``wallclock.py``: the model of a trace's wall-clock by component
  (:func:`time_breakdown`, :func:`modelled_time`) and the attribution of a saving
  (:func:`attribute_gain`).
* ``paper.py``: the paper's three settings and :func:`paper_scale_prediction`.
* ``link_calibration.py``: timed gloo all-reduces on this machine and the least-squares fit
  of latency and bandwidth (:func:`measure_allreduce`, :func:`calibrate_link`).
* ``compute_timing.py``: the measured compute of a gradient step, a pull step and a sync
  (:func:`profile_compute`, :func:`measure_compute`).
* ``check.py``: the end-to-end check against runs on an emulated slow link
  (:func:`emulated_link_check`).
* ``cli.py``: ``palsgd cost``; ``options.py``: its options, declared once as data
  (:mod:`core.options`).
* ``checks.py``: the worker count; every other input is checked by the base layer's
  :func:`core.validation.check_number` and :func:`core.validation.check_choice`.

The names of ``link_calibration``, ``compute_timing`` and ``check`` need torch (seconds to
import); this package imports those modules when one of their names is first used.
"""

from __future__ import annotations

import importlib
from typing import Any

from empirical.cost import profiles
from empirical.cost.cli import add_arguments, run
from empirical.cost.comm import (
    DDP_BUCKET_CAP_BYTES,
    DDP_FIRST_BUCKET_BYTES,
    allreduce_time,
    ddp_bucket_sizes,
    ddp_exposed_comm,
)
from empirical.cost.paper import (
    PAPER_REPORTED,
    SETTINGS,
    gpu_compute_profile,
    paper_scale_prediction,
)
from empirical.cost.profiles import (  # noqa: F401 (in profiles.__all__)
    ALLREDUCE_ALGORITHMS,
    CLUSTER_PROFILES,
    GPUS,
    LOCAL_PROFILE,
    ClusterProfile,
    ComputeProfile,
    GPUSpec,
    LinkProfile,
    cluster_from_dict,
    cluster_profile,
    link_from_dict,
    load_profiles,
)
from empirical.cost.trace import expected_max_binomial, load_trace, step_trace
from empirical.cost.wallclock import attribute_gain, modelled_time, time_breakdown

_LAZY: dict[str, str] = {
    "calibrate_link": "link_calibration",
    "time_allreduce": "link_calibration",
    "measure_allreduce": "link_calibration",
    "calibrate_local_profile": "link_calibration",
    "profile_compute": "compute_timing",
    "measure_compute": "compute_timing",
    "CHECK_CONFIGS": "check",
    "emulated_link_check": "check",
}

__all__ = [
    *profiles.__all__,
    "SETTINGS",
    "PAPER_REPORTED",
    "DDP_FIRST_BUCKET_BYTES",
    "DDP_BUCKET_CAP_BYTES",
    "allreduce_time",
    "ddp_bucket_sizes",
    "ddp_exposed_comm",
    "expected_max_binomial",
    "step_trace",
    "load_trace",
    "time_breakdown",
    "modelled_time",
    "attribute_gain",
    "gpu_compute_profile",
    "paper_scale_prediction",
    "add_arguments",
    "run",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    """A name of the torch-based modules, imported on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # stays lazy (PEP 562): these modules import torch, which the cost model's CLI and the
    # prediction functions do not need
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
