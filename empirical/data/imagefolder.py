"""``imagefolder``: ImageNet-style ``root/{train,val}/<class>/<image>`` read with PIL."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError
from torch.utils.data import Dataset

from core.errors import UserInputError
from core.validation import check_int
from empirical.data.common import _TRAIN, rng_of
from empirical.data.images import _normalise

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp")


def random_resized_crop_box(
    width: int,
    height: int,
    rng: np.random.Generator,
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
) -> tuple[int, int, int, int]:
    """Box (left, top, right, bottom) of the Inception-style random crop (Szegedy et al.
    2015): area fraction uniform in ``scale``, aspect ratio log-uniform in ``ratio``; up to
    10 tries, then the largest centred crop with a clamped aspect ratio."""
    area = width * height
    lo, hi = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(10):
        target = area * rng.uniform(scale[0], scale[1])
        ar = math.exp(rng.uniform(lo, hi))
        w = int(round(math.sqrt(target * ar)))
        h = int(round(math.sqrt(target / ar)))
        if 0 < w <= width and 0 < h <= height:
            top = int(rng.integers(0, height - h + 1))
            left = int(rng.integers(0, width - w + 1))
            return left, top, left + w, top + h
    in_ratio = width / height
    if in_ratio < ratio[0]:
        w, h = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        w, h = int(round(height * ratio[1])), height
    else:
        w, h = width, height
    left, top = (width - w) // 2, (height - h) // 2
    return left, top, left + w, top + h


class ImageFolderDataset(Dataset):
    """ImageNet-style folder ``root/<split>/<class>/<image>`` read with PIL.

    Classes are the sorted sub-directory names of ``root/train`` (or of ``root/<split>`` if
    there is no train folder), so train and val labels agree. Train items (``augment``):
    random resized crop to ``image_size`` (scale 0.08-1, ratio 3/4-4/3) + horizontal flip;
    val items: resize the shorter side to ``resize_size`` (default ``image_size * 256/224``)
    and centre-crop ``image_size``. Normalised with the ImageNet mean/std.
    """

    task = "image"

    def __init__(
        self,
        root: str,
        split: str,
        *,
        image_size: int = 224,
        augment: bool | None = None,
        seed: int = 0,
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3 / 4, 4 / 3),
        resize_size: int | None = None,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
    ):
        folder_name = (
            "train"
            if split == _TRAIN
            else next(
                (
                    n
                    for n in ("val", "validation", "valid", "test")
                    if os.path.isdir(os.path.join(root, n))
                ),
                "val",
            )
        )
        folder = os.path.join(root, folder_name)
        if not os.path.isdir(folder):
            raise UserInputError(
                f"'{folder}' is not a directory: expected "
                f"{root}/{{train,val}}/<class>/<image files>"
            )
        class_root = (
            os.path.join(root, "train") if os.path.isdir(os.path.join(root, "train")) else folder
        )
        self.classes = sorted(
            d for d in os.listdir(class_root) if os.path.isdir(os.path.join(class_root, d))
        )
        if not self.classes:
            raise UserInputError(
                f"no class sub-directories in '{class_root}': expected <class>/<image files>"
            )
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        files, labels = [], []
        for c in sorted(os.listdir(folder)):
            d = os.path.join(folder, c)
            if not os.path.isdir(d):
                continue
            if c not in self.class_to_idx:
                raise UserInputError(f"class '{c}' of '{folder}' is not a class of '{class_root}'")
            for dirpath, _, names in sorted(os.walk(d)):
                for f in sorted(names):
                    if f.lower().endswith(_IMAGE_SUFFIXES):
                        files.append(os.path.join(dirpath, f))
                        labels.append(self.class_to_idx[c])
        if not files:
            raise UserInputError(f"no image files ({', '.join(_IMAGE_SUFFIXES)}) under '{folder}'")
        self.files = files
        self.labels = torch.tensor(labels, dtype=torch.long)
        self.num_classes = len(self.classes)
        self.image_size = check_int("image_size", image_size, low=1)
        self.resize_size = (
            check_int("resize_size", resize_size, low=self.image_size)
            if resize_size is not None
            else int(round(self.image_size * 256 / 224))
        )
        self.augment = (split == _TRAIN) if augment is None else bool(augment)
        self.seed = seed
        self.scale, self.ratio = tuple(scale), tuple(ratio)
        self.mean, self.std = tuple(mean), tuple(std)

    def __len__(self) -> int:
        return len(self.files)

    def _open(self, file: str) -> Image.Image:
        try:
            with Image.open(file) as im:
                return im.convert("RGB")
        except (UnidentifiedImageError, OSError) as exc:
            raise UserInputError(f"cannot read image '{file}': {exc}") from None

    def sample(self, i: int, epoch: int = 0, salt: int = 0) -> tuple[torch.Tensor, int]:
        img = self._open(self.files[i])
        s = self.image_size
        if self.augment:
            rng = rng_of(self.seed, salt, epoch, i)
            box = random_resized_crop_box(img.width, img.height, rng, self.scale, self.ratio)
            img = img.resize((s, s), Image.BILINEAR, box=box)
            if rng.random() < 0.5:
                img = img.transpose(Image.FLIP_LEFT_RIGHT)
        else:
            w, h = img.size
            r = self.resize_size
            nw, nh = (r, max(1, int(r * h / w))) if w <= h else (max(1, int(r * w / h)), r)
            img = img.resize((nw, nh), Image.BILINEAR)
            left, top = int(round((nw - s) / 2)), int(round((nh - s) / 2))
            img = img.crop((left, top, left + s, top + s))
        x = torch.from_numpy(np.asarray(img, dtype=np.uint8).copy()).permute(2, 0, 1)
        return _normalise(x, self.mean, self.std), int(self.labels[i])

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.sample(i)
