"""Test harness of every Python process started with this directory on ``PYTHONPATH``:
fakes CUDA when ``PALSGD_FAKE_GPUS`` is set (fake_cuda.py) and injects the faults named by
the environment (faults.py); does nothing otherwise."""

import os

if os.environ.get("PALSGD_FAKE_GPUS"):
    import fake_cuda

    fake_cuda.install_from_env()

if any(k.startswith("PALSGD_FAULT_") for k in os.environ):
    import faults

    faults.install_from_env()
