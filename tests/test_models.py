"""Tests of empirical.models: architectures, parameter counts, init, losses, evaluation."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from core.errors import UserInputError
from core.validation import ParameterError
from empirical import models
from empirical.data import BatchStream, build_dataset, make_loader
from empirical.models import (
    MODEL_NAMES,
    ResNet,
    build_model,
    compute_loss,
    count_parameters,
    evaluate,
    gptneo_parameter_count,
    model_spec,
    model_task,
)

torch.set_num_threads(1)

CONTRACT_NAMES = (
    "gptneo-8m",
    "gptneo-125m",
    "gptneo-tiny",
    "resnet18-cifar",
    "resnet50-cifar",
    "resnet18-imagenet",
    "resnet50-imagenet",
    "resnet-tiny",
)


def test_registry_holds_the_contract_names():
    assert set(CONTRACT_NAMES) <= set(MODEL_NAMES)
    assert len(set(MODEL_NAMES)) == len(MODEL_NAMES)
    for name in MODEL_NAMES:
        assert model_task(name) == ("lm" if name.startswith("gptneo") else "image")


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(UserInputError) as e:
        build_model("resnet101")
    assert "resnet101" in str(e.value) and "gptneo-8m" in str(e.value)
    with pytest.raises(UserInputError):
        model_task("bert")


# ----------------------------------------------------------------------------- counts


def test_gptneo_8m_has_exactly_8054656_parameters():
    """The paper's 8M model (hidden 128, 8 heads, 8 layers, context 300, vocab 50257)."""
    model = build_model("gptneo-8m")
    distinct = {id(p): p for p in model.parameters()}
    assert sum(p.numel() for p in distinct.values()) == 8_054_656
    cfg = model.config
    assert (
        cfg.hidden_size,
        cfg.num_heads,
        cfg.num_layers,
        cfg.max_position_embeddings,
        cfg.vocab_size,
    ) == (128, 8, 8, 300, 50257)
    assert cfg.attention_layers == ["global", "local"] * 4
    # tied input/output embeddings: the head is the token embedding
    assert model.lm_head.weight is model.transformer.wte.weight
    # the authors' first parameter tensor (the one their pull updates) is the embedding
    assert next(iter(model.named_parameters()))[0] == "transformer.wte.weight"


def test_gptneo_125m_count_without_allocating():
    assert count_parameters("gptneo-125m") == 124_412_160


@pytest.mark.parametrize("name", ["gptneo-8m", "gptneo-125m", "gptneo-tiny"])
def test_gptneo_count_matches_closed_form(name):
    """The meta-device count of the HF module agrees with the per-layer formula."""
    assert count_parameters(name) == gptneo_parameter_count(**model_spec(name))


def test_closed_form_counts_each_term():
    # one layer, h = 2, V = 3, P = 5: V h + P h + (12 h^2 + 10 h) + 2 h
    assert gptneo_parameter_count(3, 5, 2, 1) == 6 + 10 + (48 + 20) + 4


@pytest.mark.parametrize(
    "name,expected", [("resnet18-imagenet", 11_689_512), ("resnet50-imagenet", 25_557_032)]
)
def test_resnet_imagenet_counts_match_the_known_numbers(name, expected):
    assert count_parameters(name) == expected
    # the original paper's stride placement changes no parameter
    assert count_parameters(name, stride_in_1x1=True) == expected


def test_resnet_counts_scale_with_classes_and_stem():
    # the fc layer of ResNet-18 has 512 inputs: 10 classes instead of 1000 removes 990 * 513;
    # the CIFAR stem (3x3x3x64) replaces the 7x7x3x64 one
    r18 = 11_689_512
    assert count_parameters("resnet18-imagenet", num_classes=10) == r18 - 990 * 513
    assert count_parameters("resnet18-cifar") == r18 - 990 * 513 - (49 - 9) * 3 * 64
    assert 1_000 < count_parameters("resnet-tiny") < 10_000


def _convs(model: nn.Module) -> list[nn.Conv2d]:
    return [m for m in model.modules() if isinstance(m, nn.Conv2d)]


def test_resnet_depths_follow_he_et_al():
    with torch.device("meta"):
        r18 = ResNet("basic", (2, 2, 2, 2))
        r50 = ResNet("bottleneck", (3, 4, 6, 3))
    # weighted layers: convs + fc = 18 and 50, plus 3 (or 4) projection shortcuts
    assert len(_convs(r18)) + 1 == 18 + 3
    assert len(_convs(r50)) + 1 == 50 + 4
    first = _convs(r50)[0]
    assert first.kernel_size == (7, 7) and first.stride == (2, 2)
    # v1.5: stride-2 on the 3x3 conv of a downsampling bottleneck
    block = r50.stages[1][0]
    assert block.conv1.stride == (1, 1) and block.conv2.stride == (2, 2)
    with torch.device("meta"):
        v1 = ResNet("bottleneck", (3, 4, 6, 3), stride_in_1x1=True)
    assert v1.stages[1][0].conv1.stride == (2, 2) and v1.stages[1][0].conv2.stride == (1, 1)


# ----------------------------------------------------------------------------- forward


def test_forward_shapes_and_stems():
    x = torch.randn(2, 3, 32, 32)
    cifar = build_model("resnet18-cifar")
    imnet = build_model("resnet18-imagenet", num_classes=7)
    assert cifar(x).shape == (2, 10)
    assert imnet(x).shape == (2, 7)
    # the CIFAR stem keeps 32x32 for stage 1; the ImageNet stem divides by 4
    assert cifar.stem(x).shape[-1] == 32
    assert imnet.stem(x).shape[-1] == 8
    r50 = build_model("resnet50-cifar", num_classes=3)
    assert r50(x[:1]).shape == (1, 3)
    lm = build_model("gptneo-tiny", vocab_size=300)
    out = lm(input_ids=torch.randint(0, 300, (3, 17)))
    assert out.logits.shape == (3, 17, 300)


def test_gptneo_overrides_and_odd_layer_count():
    m = build_model("gptneo-tiny", num_layers=3, max_position_embeddings=32)
    assert m.config.attention_layers == ["global", "local", "global"]
    assert m.transformer.wpe.weight.shape[0] == 32
    with pytest.raises(ParameterError, match="num_heads"):
        build_model("gptneo-tiny", num_heads=5)
    with pytest.raises(UserInputError, match="vocab_size"):
        build_model("resnet-tiny", vocab_size=10)
    with pytest.raises(UserInputError, match="num_classes"):
        build_model("gptneo-tiny", num_classes=10)
    with pytest.raises(UserInputError, match="depth"):
        build_model("resnet-tiny", depth=3)
    with pytest.raises(ParameterError, match="num_classes"):
        build_model("resnet-tiny", num_classes=0)


# ----------------------------------------------------------------------------- init


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@pytest.mark.parametrize("name", ["gptneo-tiny", "resnet-tiny"])
def test_init_is_deterministic_and_leaves_global_rng_alone(name):
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a = build_model(name, seed=5)
    assert torch.equal(torch.get_rng_state(), before)  # nothing consumed or changed
    torch.manual_seed(999)  # a different global state must not matter
    b = build_model(name, seed=5)
    c = build_model(name, seed=6)
    assert torch.equal(_flat(a), _flat(b))
    assert not torch.equal(_flat(a), _flat(c))


def test_resnet_init_statistics():
    """He-normal fan-out init: conv weight std ~ sqrt(2 / (k*k*c_out))."""
    m = build_model("resnet18-imagenet", seed=0)
    w = m.stages[3][0].conv2.weight  # 512 x 512 x 3 x 3
    expected = math.sqrt(2.0 / (9 * 512))
    assert abs(w.std().item() / expected - 1) < 0.02
    bn = m.stages[0][0].bn2
    assert torch.all(bn.weight == 1) and torch.all(bn.bias == 0)
    z = build_model("resnet-tiny", zero_init_residual=True)
    assert torch.all(z.stages[0][0].bn2.weight == 0)


# ----------------------------------------------------------------------------- loss


def test_lm_loss_equals_hf_loss_and_ignores_masked_positions():
    torch.manual_seed(0)
    m = build_model("gptneo-tiny").eval()
    ids = torch.randint(0, 257, (3, 20))
    labels = ids.clone()
    labels[:, 15:] = -100
    mask = torch.ones_like(ids)
    mask[:, 15:] = 0
    hf = m(input_ids=ids, attention_mask=mask, labels=labels).loss
    ours = compute_loss(m, {"input_ids": ids, "labels": labels, "attention_mask": mask}, "lm")
    torch.testing.assert_close(ours, hf)
    # no labels: the masked positions are ignored, exactly as with explicit -100 labels
    implicit = compute_loss(m, {"input_ids": ids, "attention_mask": mask}, "lm")
    torch.testing.assert_close(implicit, ours)
    # and differ from the loss over all positions
    full = compute_loss(m, {"input_ids": ids}, "lm")
    assert not torch.allclose(full, ours)
    # sum reduction: mean times the number of targets (positions 1..14 of 3 rows)
    total = compute_loss(m, {"input_ids": ids, "labels": labels}, "lm", reduction="sum")
    torch.testing.assert_close(
        total / (3 * 14), compute_loss(m, {"input_ids": ids, "labels": labels}, "lm")
    )


def test_image_loss_and_batch_formats():
    m = build_model("resnet-tiny").eval()
    x, y = torch.randn(4, 3, 16, 16), torch.tensor([0, 3, 9, 1])
    expected = F.cross_entropy(m(x), y)
    torch.testing.assert_close(compute_loss(m, (x, y), "image"), expected)
    torch.testing.assert_close(compute_loss(m, {"pixel_values": x, "labels": y}, "image"), expected)
    with pytest.raises(UserInputError, match="image batch"):
        compute_loss(m, x, "image")
    with pytest.raises(UserInputError, match="input_ids"):
        compute_loss(m, (x, y), "lm")
    with pytest.raises(UserInputError, match="task"):
        compute_loss(m, (x, y), "audio")


def _train(model, stream, task, steps, opt):
    losses = []
    for _ in range(steps):
        loss = compute_loss(model, next(stream), task)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_tiny_lm_learns_embedded_text():
    ds = build_dataset("embedded-text", seq_len=32)
    m = build_model("gptneo-tiny", vocab_size=ds.vocab_size, seed=0)
    losses = _train(
        m, BatchStream(ds, 16, 0, 1, seed=0), "lm", 25, torch.optim.AdamW(m.parameters(), lr=3e-3)
    )
    # from about ln(257) = 5.55 (uniform prediction); English bytes are far more predictable
    assert abs(losses[0] - math.log(257)) < 0.3
    assert sum(losses[-5:]) / 5 < losses[0] - 1.0


def test_tiny_resnet_learns_embedded_images():
    ds = build_dataset("embedded-images", n=1024, seed=0)
    m = build_model("resnet-tiny", num_classes=ds.num_classes, seed=0)
    losses = _train(
        m,
        BatchStream(ds, 64, 0, 1, seed=0),
        "image",
        40,
        torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
    )
    assert sum(losses[:3]) / 3 > 2.0  # about ln(10) at the start
    assert sum(losses[-5:]) / 5 < sum(losses[:3]) / 3 - 0.3


# ----------------------------------------------------------------------------- evaluate


def test_evaluate_lm_weights_tokens_and_restores_mode():
    ds = build_dataset("embedded-text", split="val", seq_len=16)
    m = build_model("gptneo-tiny", seed=1)
    loader = make_loader(ds, batch_size=8, rank=0, world_size=1, seed=0, shuffle=False)
    res = evaluate(m, loader, "lm", max_batches=3)
    assert m.training  # mode restored
    assert res["batches"] == 3 and res["count"] == 3 * 8 * 15
    # every chunk has the same number of targets, so the token mean is the batch mean
    m.eval()
    with torch.no_grad():
        per_batch = [
            compute_loss(m, b, "lm").item() for b, _ in zip(loader, range(3), strict=False)
        ]
    assert res["loss"] == pytest.approx(sum(per_batch) / 3, rel=1e-5)
    assert res["perplexity"] == pytest.approx(math.exp(res["loss"]))
    assert 0 <= res["token_accuracy"] <= 1


def test_evaluate_image_accuracy_counts_correct_predictions():
    class Fixed(nn.Module):
        """Predicts class 0 always (logit 1 for class 0, 0 otherwise)."""

        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(()))

        def forward(self, x):
            out = torch.zeros(x.shape[0], 3)
            out[:, 0] = 1.0
            return out + 0 * self.w

    y = torch.tensor([0, 1, 0, 2, 0, 0])
    loader = [(torch.zeros(3, 1), y[:3]), (torch.zeros(3, 1), y[3:])]
    res = evaluate(Fixed(), loader, "image")
    assert res["accuracy"] == pytest.approx(4 / 6)
    ce_right = -math.log(math.e / (math.e + 2))
    ce_wrong = -math.log(1 / (math.e + 2))
    assert res["loss"] == pytest.approx((4 * ce_right + 2 * ce_wrong) / 6, rel=1e-6)
    assert res["count"] == 6
    with pytest.raises(ParameterError, match="max_batches"):
        evaluate(Fixed(), loader, "image", max_batches=0)


def test_module_exports():
    for name in models.__all__:
        assert hasattr(models, name)
