"""Fakes CUDA in every Python process started with this directory on ``PYTHONPATH`` and
``PALSGD_FAKE_GPUS`` set (see fake_cuda.py); does nothing otherwise."""

import os

if os.environ.get("PALSGD_FAKE_GPUS"):
    import fake_cuda

    fake_cuda.install_from_env()
