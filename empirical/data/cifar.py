"""``cifar10``: the CIFAR-10 python pickle batches, read through a restricted unpickler
(:mod:`empirical.data.safe_pickle`: containers, numbers and numpy arrays only), so that a
crafted batch or ``batches.meta`` is refused with exit code 2 before anything in it runs."""

from __future__ import annotations

import os
import pickle
import warnings
from collections.abc import Sequence

import numpy as np
import torch

from core.errors import UserInputError
from empirical.data.common import _TRAIN, _require_path
from empirical.data.images import TensorImageDataset
from empirical.data.safe_pickle import RefusedGlobal, load_data_pickle

CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)  # per-channel mean of the CIFAR-10 training images
CIFAR10_STD = (0.2470, 0.2435, 0.2616)  # per-channel std of the CIFAR-10 training images


def _refused(file: str, exc: RefusedGlobal) -> UserInputError:
    """The error for a CIFAR-10 file that asks to run or import something."""
    return UserInputError(
        f"'{file}' is not a CIFAR-10 python batch: {exc}; refused, nothing in it was run "
        "(a data file holds only dicts, lists, bytes, numbers and numpy arrays); check "
        "--data-path"
    )


def _read_cifar_batch(file: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(file, "rb") as fh:
            d = load_data_pickle(fh, encoding="bytes")
    except RefusedGlobal as exc:
        raise _refused(file, exc) from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
        raise UserInputError(
            f"'{file}' is not a CIFAR-10 python pickle batch ({exc}): expected "
            "a dict with b'data' (N, 3072) uint8 and b'labels'"
        ) from None
    if not isinstance(d, dict):
        raise UserInputError(
            f"'{file}': expected a dict with b'data' and b'labels', found {type(d).__name__}"
        )
    data = d.get(b"data", d.get("data"))
    labels = d.get(b"labels", d.get("labels"))
    if data is None or labels is None:
        raise UserInputError(
            f"'{file}': missing key b'data' or b'labels' (keys: {sorted(map(str, d))})"
        )
    data = np.asarray(data)
    try:
        labels = np.asarray(labels, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise UserInputError(f"'{file}': b'labels' must be integers in [0, 9]") from None
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise UserInputError(
            f"'{file}': b'data' must be uint8 of shape (N, 3072), got {data.dtype} {data.shape}"
        )
    if labels.shape != (data.shape[0],) or (labels.size and (labels.min() < 0 or labels.max() > 9)):
        raise UserInputError(f"'{file}': b'labels' must be {data.shape[0]} integers in [0, 9]")
    return data, labels


def load_cifar10(path: str, split: str) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """Read CIFAR-10 python batches from ``path`` (the ``cifar-10-batches-py`` folder or its
    parent): ``data_batch_1..5`` for train, ``test_batch`` for val.

    Returns uint8 images (N, 3, 32, 32), labels (N,) and the class names (from
    ``batches.meta`` if present).
    """
    root = path
    if not os.path.exists(os.path.join(root, "test_batch")) and not os.path.exists(
        os.path.join(root, "data_batch_1")
    ):
        sub = os.path.join(path, "cifar-10-batches-py")
        if os.path.isdir(sub):
            root = sub
    names = [f"data_batch_{i}" for i in range(1, 6)] if split == _TRAIN else ["test_batch"]
    files = [os.path.join(root, n) for n in names if os.path.isfile(os.path.join(root, n))]
    if not files:
        raise UserInputError(
            f"no CIFAR-10 {split} batch in '{path}': expected "
            f"{', '.join(names)} (python pickle format)"
        )
    if split == _TRAIN and len(files) < 5:
        warnings.warn(
            f"'{root}' holds only {len(files)} of the 5 CIFAR-10 training batches", stacklevel=3
        )
    parts = [_read_cifar_batch(f) for f in files]
    data = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    classes = [str(i) for i in range(10)]
    meta = os.path.join(root, "batches.meta")
    if os.path.isfile(meta):
        try:
            with open(meta, "rb") as fh:
                m = load_data_pickle(fh, encoding="bytes")
            names_ = m.get(b"label_names", m.get("label_names"))
            if names_ is not None and len(names_) == 10:
                classes = [n.decode() if isinstance(n, bytes) else str(n) for n in names_]
        except RefusedGlobal as exc:
            raise _refused(meta, exc) from None
        except (pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError):
            pass  # a corrupt meta file: the classes keep their numbers
    images = torch.from_numpy(data.reshape(-1, 3, 32, 32).copy())
    return images, torch.from_numpy(labels), classes


def _cifar10(
    path: str | None,
    split: str,
    seed: int,
    image_size: int | None,
    augment: bool | None = None,
    mean: Sequence[float] = CIFAR10_MEAN,
    std: Sequence[float] = CIFAR10_STD,
) -> TensorImageDataset:
    p = _require_path(
        path,
        "the CIFAR-10 python folder (cifar-10-batches-py with data_batch_1"
        "..5 and test_batch) or its parent",
    )
    images, labels, classes = load_cifar10(p, split)
    aug = (split == _TRAIN) if augment is None else bool(augment)
    return TensorImageDataset(
        images,
        labels,
        mean=mean,
        std=std,
        augment=aug,
        image_size=image_size,
        seed=seed,
        classes=classes,
    )
