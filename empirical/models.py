"""Models of the paper's experiments, their losses and evaluation.

* GPT-Neo causal language models built from a :class:`transformers.GPTNeoConfig` (random
  initialisation, no weights are downloaded): the paper's 8M model (hidden 128, 8 heads,
  8 layers, context 300; 8,054,656 parameters) and 125M model (hidden 768, 12 heads,
  12 layers, context 1024 as in the authors' ``gptneo_125m.yaml``; 124,412,160 parameters),
  plus a tiny one for tests. Layers alternate global / local attention (window 256), which is
  what the authors' configs produce (reference-implementation.md, section 7).
* ResNets (He, Zhang, Ren, Sun, "Deep Residual Learning for Image Recognition", CVPR 2016),
  written here in plain torch: BasicBlock (two 3x3 convolutions) for ResNet-18/34, Bottleneck
  (1x1, 3x3, 1x1 with expansion 4) for ResNet-50, projection shortcuts (the paper's option B:
  1x1 convolution + BatchNorm) where the shape changes. Two stems:

  - ``imagenet``: 7x7 convolution stride 2 + 3x3 max-pool stride 2 (paper, Table 1);
  - ``cifar``: 3x3 convolution stride 1, no max-pool (keeps 32x32 resolution for stage 1).

  Bottleneck blocks put the stride on the 3x3 convolution ("ResNet v1.5", the variant the
  authors' torchvision models use); ``stride_in_1x1=True`` gives the original paper's
  placement. Both have the same parameter count (ResNet-50, 1000 classes: 25,557,032;
  ResNet-18: 11,689,512).

Every model is built deterministically from ``seed`` inside :func:`torch.random.fork_rng`,
so the caller's global RNG state is neither used nor changed.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from theory.validation import ParameterError, UserInputError

__all__ = [
    "MODEL_NAMES",
    "ResNet",
    "BasicBlock",
    "Bottleneck",
    "build_model",
    "model_task",
    "model_spec",
    "count_parameters",
    "gptneo_parameter_count",
    "compute_loss",
    "evaluate",
]

IGNORE_INDEX = -100

# ----------------------------------------------------------------------------- registry

_GPTNEO: dict[str, dict[str, Any]] = {
    # gptneo_8m.yaml of the authors' code (reference-implementation.md section 7)
    "gptneo-8m": dict(
        vocab_size=50257, max_position_embeddings=300, hidden_size=128, num_heads=8, num_layers=8
    ),
    # gptneo_125m.yaml: context 1024 (the released GPT-Neo-125M has 2048)
    "gptneo-125m": dict(
        vocab_size=50257, max_position_embeddings=1024, hidden_size=768, num_heads=12, num_layers=12
    ),
    # for tests: byte-level vocabulary (empirical.tokenizer.ByteTokenizer, 257 ids)
    "gptneo-tiny": dict(
        vocab_size=257, max_position_embeddings=64, hidden_size=32, num_heads=4, num_layers=2
    ),
}

_RESNET: dict[str, dict[str, Any]] = {
    "resnet18-cifar": dict(block="basic", layers=(2, 2, 2, 2), stem="cifar", num_classes=10),
    "resnet34-cifar": dict(block="basic", layers=(3, 4, 6, 3), stem="cifar", num_classes=10),
    "resnet50-cifar": dict(block="bottleneck", layers=(3, 4, 6, 3), stem="cifar", num_classes=10),
    "resnet18-imagenet": dict(
        block="basic", layers=(2, 2, 2, 2), stem="imagenet", num_classes=1000
    ),
    "resnet34-imagenet": dict(
        block="basic", layers=(3, 4, 6, 3), stem="imagenet", num_classes=1000
    ),
    "resnet50-imagenet": dict(
        block="bottleneck", layers=(3, 4, 6, 3), stem="imagenet", num_classes=1000
    ),
    # for tests: two stages of one BasicBlock, widths 8 and 16 (about 5k parameters)
    "resnet-tiny": dict(block="basic", layers=(1, 1), widths=(8, 16), stem="cifar", num_classes=10),
}

MODEL_NAMES: tuple[str, ...] = (
    "gptneo-8m",
    "gptneo-125m",
    "gptneo-tiny",
    "resnet18-cifar",
    "resnet34-cifar",
    "resnet50-cifar",
    "resnet18-imagenet",
    "resnet34-imagenet",
    "resnet50-imagenet",
    "resnet-tiny",
)


def _check_name(name: str) -> str:
    if name not in MODEL_NAMES:
        raise UserInputError(f"unknown model '{name}': known models are {', '.join(MODEL_NAMES)}")
    return name


def model_task(name: str) -> str:
    """``"lm"`` for the GPT-Neo models, ``"image"`` for the ResNets."""
    return "lm" if _check_name(name) in _GPTNEO else "image"


def model_spec(name: str) -> dict[str, Any]:
    """A copy of the registry entry (architecture hyperparameters) of a model name."""
    _check_name(name)
    return dict(_GPTNEO.get(name) or _RESNET[name])


# ----------------------------------------------------------------------------- ResNet


def _conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)


def _conv1x1(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with an identity or projection shortcut (He et al. 2016, Fig. 2)."""

    expansion = 1

    def __init__(self, cin: int, width: int, stride: int = 1, stride_in_1x1: bool = False):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = _conv3x3(cin, width, stride)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = _conv3x3(width, cout)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = _projection(cin, cout, stride)

    def last_bn(self) -> nn.BatchNorm2d:
        return self.bn2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        skip = x if self.shortcut is None else self.shortcut(x)
        return F.relu(out + skip)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3, 1x1 expand (x4) conv-BN layers plus shortcut (He et al. 2016, Fig. 5)."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1, stride_in_1x1: bool = False):
        super().__init__()
        cout = width * self.expansion
        s1, s3 = (stride, 1) if stride_in_1x1 else (1, stride)
        self.conv1 = _conv1x1(cin, width, s1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = _conv3x3(width, width, s3)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = _conv1x1(width, cout)
        self.bn3 = nn.BatchNorm2d(cout)
        self.shortcut = _projection(cin, cout, stride)

    def last_bn(self) -> nn.BatchNorm2d:
        return self.bn3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        skip = x if self.shortcut is None else self.shortcut(x)
        return F.relu(out + skip)


def _projection(cin: int, cout: int, stride: int) -> nn.Module | None:
    """Option B shortcut of He et al. 2016: projection only where the shape changes."""
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(_conv1x1(cin, cout, stride), nn.BatchNorm2d(cout))


class ResNet(nn.Module):
    """Residual network (He et al. 2016) for images of shape ``(N, in_channels, H, W)``.

    Args:
        block: ``"basic"`` or ``"bottleneck"`` (or the classes).
        layers: number of blocks per stage (ResNet-18: 2,2,2,2; 34 and 50: 3,4,6,3).
        num_classes: output logits.
        widths: base widths of the stages (default 64, 128, 256, 512); every stage after the
            first halves the spatial resolution with a stride-2 first block.
        stem: ``"imagenet"`` (7x7/2 conv + 3x3/2 max-pool) or ``"cifar"`` (3x3/1 conv).
        zero_init_residual: start every residual branch's last BN scale at 0 (Goyal et al.
            2017); off by default as in He et al. 2016.
        stride_in_1x1: Bottleneck stride on the first 1x1 conv (original paper) instead of
            the 3x3 conv (v1.5, the default).

    Initialisation: He-normal (fan-out, ReLU gain) for convolutions (He et al. 2015,
    "Delving deep into rectifiers"), BN scale 1 / shift 0, the final linear layer with
    PyTorch's default uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    """

    def __init__(
        self,
        block: str | type[nn.Module] = "basic",
        layers: Iterable[int] = (2, 2, 2, 2),
        num_classes: int = 1000,
        *,
        widths: Iterable[int] = (64, 128, 256, 512),
        stem: str = "imagenet",
        in_channels: int = 3,
        zero_init_residual: bool = False,
        stride_in_1x1: bool = False,
    ):
        super().__init__()
        blocks = {"basic": BasicBlock, "bottleneck": Bottleneck}
        if isinstance(block, str):
            if block not in blocks:
                raise UserInputError(f"unknown ResNet block '{block}': use 'basic' or 'bottleneck'")
            block = blocks[block]
        layers, widths = tuple(int(n) for n in layers), tuple(int(w) for w in widths)
        if len(layers) != len(widths) or not layers or min(layers) < 1 or min(widths) < 1:
            raise UserInputError(
                f"ResNet layers {layers} and widths {widths} must be non-empty, positive and of "
                "equal length"
            )
        if stem not in ("imagenet", "cifar"):
            raise UserInputError(f"unknown ResNet stem '{stem}': use 'imagenet' or 'cifar'")
        self.stem_kind = stem
        c0 = widths[0]
        if stem == "imagenet":
            self.stem = nn.Sequential(
                nn.Conv2d(in_channels, c0, kernel_size=7, stride=2, padding=3, bias=False),
                nn.BatchNorm2d(c0),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
            )
        else:
            self.stem = nn.Sequential(
                _conv3x3(in_channels, c0), nn.BatchNorm2d(c0), nn.ReLU(inplace=True)
            )
        stages = []
        cin = c0
        for i, (n, w) in enumerate(zip(layers, widths, strict=True)):
            stage = []
            for j in range(n):
                stride = 2 if (i > 0 and j == 0) else 1
                stage.append(block(cin, w, stride, stride_in_1x1))
                cin = w * block.expansion
            stages.append(nn.Sequential(*stage))
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, num_classes)
        self.num_features = cin
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock | Bottleneck):
                    nn.init.zeros_(m.last_bn().weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


# ----------------------------------------------------------------------------- GPT-Neo


def _attention_types(num_layers: int) -> list:
    """Alternating global/local attention in GPTNeoConfig's run-length format."""
    types: list = [[["global", "local"], num_layers // 2]] if num_layers >= 2 else []
    if num_layers % 2:
        types.append([["global"], 1])
    return types


def _gptneo_config(spec: Mapping[str, Any]):
    from transformers import GPTNeoConfig

    cfg = dict(spec)
    n_layers = int(cfg["num_layers"])
    cfg.setdefault("attention_types", _attention_types(n_layers))
    vocab = int(cfg["vocab_size"])
    # GPT-2 BPE's <|endoftext|> is 50256; smaller vocabularies use their last id (the byte
    # tokenizer's EOS is 256 = vocab_size - 1).
    eos = 50256 if vocab > 50256 else vocab - 1
    cfg.setdefault("bos_token_id", eos)
    cfg.setdefault("eos_token_id", eos)
    try:
        return GPTNeoConfig(**cfg)
    except (TypeError, ValueError) as exc:
        raise UserInputError(f"invalid GPT-Neo configuration {cfg}: {exc}") from None


def gptneo_parameter_count(
    vocab_size: int,
    max_position_embeddings: int,
    hidden_size: int,
    num_layers: int,
    intermediate_size: int | None = None,
    **_: Any,
) -> int:
    """Closed-form parameter count of GPTNeoForCausalLM (tied input/output embeddings).

    With V vocabulary, P positions, h hidden, m = intermediate size (default 4h), L layers:
    ``V h + P h + L (4 h^2 + h + 2 h m + m + h + 4 h) + 2 h``: per layer q, k, v without bias
    and the output projection with bias (4h^2 + h), the MLP (h m + m + m h + h) and two
    LayerNorms (4h); the final LayerNorm (2h). For m = 4h a layer has 12 h^2 + 10 h.
    """
    h, m = int(hidden_size), int(intermediate_size or 4 * hidden_size)
    per_layer = 4 * h * h + h + 2 * h * m + m + h + 4 * h
    return int(vocab_size * h + max_position_embeddings * h + num_layers * per_layer + 2 * h)


# ----------------------------------------------------------------------------- build


def _positive_int(name: str, value: Any) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value != int(value)
        or value < 1
    ):
        raise ParameterError(name, value, "integer in [1, inf)")
    return int(value)


def _construct(
    name: str, vocab_size: int | None, num_classes: int | None, overrides: Mapping[str, Any]
) -> nn.Module:
    if name in _GPTNEO:
        if num_classes is not None:
            raise UserInputError(f"num_classes does not apply to the language model '{name}'")
        spec = dict(_GPTNEO[name])
        spec.update(overrides)
        if vocab_size is not None:
            spec["vocab_size"] = _positive_int("vocab_size", vocab_size)
        for key in (
            "vocab_size",
            "hidden_size",
            "num_heads",
            "num_layers",
            "max_position_embeddings",
        ):
            _positive_int(key, spec[key])
        if spec["hidden_size"] % spec["num_heads"]:
            raise ParameterError(
                "num_heads", spec["num_heads"], f"a divisor of hidden_size = {spec['hidden_size']}"
            )
        from transformers import GPTNeoForCausalLM

        return GPTNeoForCausalLM(_gptneo_config(spec))
    if vocab_size is not None:
        raise UserInputError(f"vocab_size does not apply to the image model '{name}'")
    spec = dict(_RESNET[name])
    spec.update(overrides)
    if num_classes is not None:
        spec["num_classes"] = _positive_int("num_classes", num_classes)
    known = {
        "block",
        "layers",
        "num_classes",
        "widths",
        "stem",
        "in_channels",
        "zero_init_residual",
        "stride_in_1x1",
    }
    unknown = sorted(set(spec) - known)
    if unknown:
        raise UserInputError(
            f"unknown option(s) {unknown} for model '{name}': allowed are {sorted(known)}"
        )
    return ResNet(**spec)


def build_model(
    name: str,
    *,
    vocab_size: int | None = None,
    num_classes: int | None = None,
    seed: int = 0,
    **overrides: Any,
) -> nn.Module:
    """Build a freshly initialised model, deterministically from ``seed``.

    Args:
        name: one of :data:`MODEL_NAMES`.
        vocab_size: embedding size of a GPT-Neo model (default: the registry's, 50257 for
            the paper's models, 257 for ``gptneo-tiny``). Use the tokenizer's ``vocab_size``.
        num_classes: logits of a ResNet (default 10 for ``*-cifar``/``resnet-tiny``, 1000 for
            ``*-imagenet``).
        seed: initialisation seed. Initialisation runs on the CPU under
            :func:`torch.random.fork_rng`, so equal seeds give bitwise-equal weights on every
            machine and process, and the caller's global RNG state is untouched.
        overrides: architecture options: ``GPTNeoConfig`` fields for GPT-Neo (e.g.
            ``num_layers=4``, ``max_position_embeddings=512``, ``window_size=128``);
            ``widths``, ``layers``, ``stem``, ``zero_init_residual``, ``stride_in_1x1``,
            ``in_channels`` for ResNets.

    Returns:
        The module in training mode, on the CPU, float32.
    """
    _check_name(name)
    try:
        seed = operator.index(seed)
    except TypeError:
        raise ParameterError("seed", seed, "an integer") from None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with torch.device("cpu"):
            model = _construct(name, vocab_size, num_classes, overrides)
    return model.train()


def count_parameters(
    name: str, *, vocab_size: int | None = None, num_classes: int | None = None, **overrides: Any
) -> int:
    """Number of distinct parameters of a model, built on the meta device (no memory used).

    Tied tensors (GPT-Neo's input embedding and output head) count once.
    """
    _check_name(name)
    with torch.device("meta"):
        model = _construct(name, vocab_size, num_classes, overrides)
    return sum(p.numel() for p in model.parameters())


# ----------------------------------------------------------------------------- loss / eval


def _device_of(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _to(x: Any, device: torch.device) -> Any:
    return x.to(device, non_blocking=True) if torch.is_tensor(x) else x


def _lm_terms(
    model: nn.Module, batch: Mapping[str, Any]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Summed next-token cross entropy, number of target tokens, number of correct argmaxes."""
    if not isinstance(batch, Mapping) or "input_ids" not in batch:
        raise UserInputError(
            "a language-model batch must be a mapping with 'input_ids' (and optional 'labels', "
            f"'attention_mask'); got {type(batch).__name__}"
        )
    dev = _device_of(model)
    ids = _to(batch["input_ids"], dev)
    mask = _to(batch.get("attention_mask"), dev)
    labels = batch.get("labels")
    if labels is None:
        labels = ids if mask is None else ids.masked_fill(mask == 0, IGNORE_INDEX)
    labels = _to(labels, dev)
    out = model(input_ids=ids, attention_mask=mask)
    logits = out.logits if hasattr(out, "logits") else out
    # Causal LM: position t predicts token t+1 (labels are aligned with input_ids, as in HF).
    logits = logits[:, :-1, :].float()
    targets = labels[:, 1:]
    total = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)),
        targets.reshape(-1),
        ignore_index=IGNORE_INDEX,
        reduction="sum",
    )
    valid = targets != IGNORE_INDEX
    correct = ((logits.argmax(-1) == targets) & valid).sum()
    return total, valid.sum(), correct


def _image_terms(model: nn.Module, batch: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if isinstance(batch, Mapping):
        x = batch.get("pixel_values", batch.get("image"))
        y = batch.get("labels", batch.get("label"))
    elif isinstance(batch, list | tuple) and len(batch) == 2:
        x, y = batch
    else:
        x = y = None
    if x is None or y is None:
        raise UserInputError(
            "an image batch must be a pair (images, labels) or a mapping with 'pixel_values' "
            f"/'image' and 'labels'/'label'; got {type(batch).__name__}"
        )
    dev = _device_of(model)
    x, y = _to(x, dev), _to(y, dev)
    logits = model(x).float()
    total = F.cross_entropy(logits, y, reduction="sum")
    return total, torch.tensor(y.numel(), device=dev), (logits.argmax(-1) == y).sum()


def _terms(model: nn.Module, batch: Any, task: str):
    if task == "lm":
        return _lm_terms(model, batch)
    if task == "image":
        return _image_terms(model, batch)
    raise UserInputError(f"unknown task '{task}': use 'lm' or 'image'")


def compute_loss(
    model: nn.Module, batch: Any, task: str, *, reduction: str = "mean"
) -> torch.Tensor:
    """Training loss of one batch (moved to the model's device).

    * ``task="lm"``: ``batch`` maps ``input_ids`` (N, T), optional ``labels`` (N, T) aligned
      with the inputs (Hugging Face convention; the shift happens here) and optional
      ``attention_mask``. Without ``labels``, targets are the inputs with masked positions
      ignored. Loss: cross entropy of position t's logits against label t+1, averaged over
      targets that are not -100 (the same value as ``GPTNeoForCausalLM(..., labels=...)``).
    * ``task="image"``: ``batch`` is ``(x, y)``; loss: cross entropy averaged over the batch.

    ``reduction="sum"`` returns the summed loss instead (for exact token-weighted gradient
    accumulation); a batch without any target gives 0 (mean) rather than NaN.
    """
    total, count, _ = _terms(model, batch, task)
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise UserInputError(f"unknown reduction '{reduction}': use 'mean' or 'sum'")
    return total / count.clamp_min(1)


@torch.no_grad()
def evaluate(
    model: nn.Module, loader: Iterable[Any], task: str, max_batches: int | None = None
) -> dict[str, float]:
    """Average loss over a loader (token-weighted for LM, sample-weighted for images).

    Returns ``{"loss", "loss_sum", "count", "batches"}`` plus ``"perplexity"`` = exp(loss)
    and ``"token_accuracy"`` for ``lm``, or ``"accuracy"`` (top-1) for ``image``. ``loss_sum``
    and ``count`` let a distributed caller all-reduce before dividing. The model is put in
    eval mode and its previous mode restored.
    """
    if max_batches is not None:
        max_batches = _positive_int("max_batches", max_batches)
    was_training = model.training
    model.eval()
    loss_sum, count, correct, batches = 0.0, 0, 0, 0
    try:
        for batch in itertools.islice(loader, max_batches):
            total, n, c = _terms(model, batch, task)
            loss_sum += float(total)
            count += int(n)
            correct += int(c)
            batches += 1
    finally:
        model.train(was_training)
    loss = loss_sum / count if count else float("nan")
    out = {"loss": loss, "loss_sum": loss_sum, "count": count, "batches": batches}
    if task == "lm":
        out["perplexity"] = (math.exp(loss) if loss < 700 else math.inf) if count else math.nan
        out["token_accuracy"] = correct / count if count else float("nan")
    else:
        out["accuracy"] = correct / count if count else float("nan")
    return out
