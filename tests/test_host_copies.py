"""No tensor made on, or copied to, the device from host data inside a training step, shown
on the CPU.

The fake-GPU counter (tests/harness/fake_cuda.py) tracks which tensors are on the faked GPU
and lists every tensor made on, or copied to, it from host data (``SyncCounter.copies``);
the blocking ones are synchronisations (``SyncCounter.calls``). Its controls: the call of
transformers 5.17's ``eager_mask`` (``torch.tensor(0.0, device=mask.device)``, a blocking
host-to-device copy in every GPT-Neo forward on the H200 of issue 32) and the other forms
(``.to``/``.cuda``/``copy_``/``as_tensor``/``new_tensor`` of host data) must be caught.

The project's GPT-Neo (its own causal and padding mask, no KV cache, the host-free
self-attention) copies nothing but the batch, equals transformers' own classes in its
logits and gradients, and the trainer's steps copy nothing but their batches
(asynchronously: ``non_blocking=True``).
"""

from __future__ import annotations

import copy

import pytest
import torch
from harness.steps import STEP_RUNS, checked_steps

from empirical.distributed import spawn_workers


def _controls(rank: int, world: int) -> dict[str, tuple[int, int]]:
    """Each control's ``(syncs, copies)`` under the fake GPU."""
    from harness import fake_cuda
    from transformers.masking_utils import sdpa_mask

    fake_cuda.install(1)
    dev = torch.device("cuda")
    on_gpu = torch.zeros(3, device=dev)

    def host() -> torch.Tensor:  # a new host tensor in each case (a copy marks its source)
        return torch.ones(3)

    mask = sdpa_mask(
        batch_size=2, q_length=5, kv_length=5, allow_is_causal_skip=False, device=on_gpu.device
    )
    cases = {
        # transformers 5.17 eager_mask: the 0.0 of the additive mask made from host data
        "eager_mask": lambda: torch.where(
            mask,
            torch.tensor(0.0, device=mask.device, dtype=torch.float32),
            torch.finfo(torch.float32).min,
        ),
        "tensor(device=cuda)": lambda: torch.tensor([1.0, 2.0], device=dev),
        "as_tensor(host tensor)": lambda: torch.as_tensor(host(), device=on_gpu.device),
        "to(cuda) of a host tensor": lambda: host().to(dev),
        "cuda() of a host tensor": lambda: host().cuda(),
        "copy_ of a host tensor": lambda: on_gpu.copy_(host()),
        "new_tensor": lambda: on_gpu.new_tensor([1.0, 2.0, 3.0]),
        "to(cuda, non_blocking) of a host tensor": lambda: host().to(dev, non_blocking=True),
        # nothing from the host: fills, device-to-device, host-only
        "zeros(device=t.device)": lambda: torch.zeros((), device=on_gpu.device),
        "where with a Python scalar": lambda: torch.where(mask, 0.0, -1.0),
        "to(cuda) of a GPU tensor": lambda: (on_gpu * 2).to(dev),
        "tensor on the host": lambda: torch.tensor([1.0, 2.0], device="cpu") + host().sum(),
        "empty list": lambda: torch.tensor([], device=on_gpu.device),
    }
    out = {}
    for name, fn in cases.items():
        with fake_cuda.SyncCounter() as c:
            fn()
        out[name] = (c.count, len(c.copies))
    out["mask on the GPU"] = (int(fake_cuda.on_device(mask)), 0)
    return out


def test_the_counter_sees_every_host_to_device_copy():
    (res,) = spawn_workers(_controls, 1, timeout_s=120)
    assert res["mask on the GPU"] == (1, 0)
    assert res["eager_mask"] == (1, 1), res  # the call of issue 32 is caught
    for name in (
        "tensor(device=cuda)",
        "as_tensor(host tensor)",
        "to(cuda) of a host tensor",
        "cuda() of a host tensor",
        "copy_ of a host tensor",
        "new_tensor",
    ):
        assert res[name] == (1, 1), (name, res[name])
    # an asynchronous copy of a host tensor is a copy, not a sync
    assert res["to(cuda, non_blocking) of a host tensor"] == (0, 1)
    for name in (
        "zeros(device=t.device)",
        "where with a Python scalar",
        "to(cuda) of a GPU tensor",
        "tensor on the host",
        "empty list",
    ):
        assert res[name] == (0, 0), (name, res[name])


def _transformers_model(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of a project GPT-Neo with transformers' own classes and its KV cache on."""
    from transformers.models.gpt_neo.modeling_gpt_neo import GPTNeoModel, GPTNeoSelfAttention

    theirs = copy.deepcopy(model)
    for module in theirs.modules():
        for base in (GPTNeoSelfAttention, GPTNeoModel):
            if isinstance(module, base):
                module.__class__ = base
    theirs.config.use_cache = True
    return theirs


def _masks() -> dict[str, torch.Tensor | None]:
    full = torch.ones(2, 24, dtype=torch.long)
    left, right = full.clone(), full.clone()
    left[1, :7] = 0
    right[0, 19:] = 0
    return {"none": None, "all ones": full, "left padding": left, "right padding": right}


def _forwards(rank: int, world: int) -> dict:
    """Logits, gradients and host copies of the project's GPT-Neo and of transformers' own
    classes, for each mask."""
    from harness import fake_cuda

    from empirical.models import build_model, compute_loss

    fake_cuda.install(1)
    ours = build_model("gptneo-tiny", vocab_size=64).eval()  # no dropout: the same draws
    theirs = _transformers_model(ours).to("cuda")
    ours = ours.to("cuda")
    ids = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(1))
    out: dict = {"use_cache": ours.config.use_cache, "layers": len(ours.transformer.h)}
    for name, mask in _masks().items():
        for who, model in {"ours": ours, "theirs": theirs}.items():
            model.zero_grad()
            batch = {"input_ids": ids.clone()}  # fresh host tensors: their copy is counted
            if mask is not None:
                batch["attention_mask"] = mask.clone()
            with fake_cuda.SyncCounter() as c:
                loss = compute_loss(model, batch, "lm")
                loss.backward()
            with fake_cuda.SyncCounter() as cf:
                res = model(
                    input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask")
                )
            grads = [p.grad.clone() for p in model.parameters()]
            out[name, who] = {
                "logits": res.logits.detach(),
                "cache": getattr(res, "past_key_values", None) is not None,
                "loss": loss.detach(),
                "grads": grads,
                "syncs": c.calls + cf.calls,
                "copies": c.copies,
            }
    return out


def test_gpt_neo_copies_only_its_batch_and_equals_transformers():
    (res,) = spawn_workers(_forwards, 1, timeout_s=300)
    assert res["use_cache"] is False
    for name, mask in _masks().items():
        ours, theirs = res[name, "ours"], res[name, "theirs"]
        torch.testing.assert_close(ours["logits"], theirs["logits"], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(ours["loss"], theirs["loss"], rtol=1e-6, atol=1e-6)
        for g, h in zip(ours["grads"], theirs["grads"], strict=True):
            torch.testing.assert_close(g, h, rtol=1e-5, atol=1e-6)
        assert ours["syncs"] == [], (name, ours["syncs"])
        # the batch's tensors, asynchronously, and nothing else
        assert len(ours["copies"]) == (1 if mask is None else 2), ours["copies"]
        assert all(c.endswith("(async) at losses.py:32") for c in ours["copies"]), ours
        assert not ours["cache"] and theirs["cache"]
        # transformers' self-attention copies its mask value from the host in every layer
        # (twice: the loss and the second forward): the counter sees it
        assert len(theirs["syncs"]) >= 2 * res["layers"], theirs["syncs"]


def test_causal_padding_mask_is_transformers_eager_mask():
    """The project's mask equals the one transformers' ``create_causal_mask`` makes for
    eager attention, with and without padding."""
    from transformers.masking_utils import create_causal_mask

    from empirical.models import build_model
    from empirical.models.gptneo import causal_padding_mask

    model = build_model("gptneo-tiny", vocab_size=64)
    embeds = torch.zeros(2, 24, model.config.hidden_size)
    positions = torch.arange(24)[None]
    for name, mask in _masks().items():
        theirs = create_causal_mask(
            config=model.config,
            inputs_embeds=embeds,
            attention_mask=mask,
            cache=None,
            position_ids=positions,
        )
        ours = causal_padding_mask(mask, 2, 24, torch.float32, torch.device("cpu"))
        assert ours.shape == (2, 1, 24, 24)
        assert torch.equal(ours, theirs.expand_as(ours)), name


@pytest.mark.slow  # 13 s; the default run's sync-free check counts every blocking copy
@pytest.mark.distributed
def test_trainer_steps_copy_only_their_batches(tmp_path):
    """Every step of the trainer (warm-up, gradient, pull, sync) copies nothing from the host
    but its micro-batches, without blocking; and synchronises nowhere."""

    ranks = spawn_workers(_copies_per_step, 2, str(tmp_path / "run"), STEP_RUNS["gptneo"])
    for res in ranks:
        assert all(s["calls"] == [] for s in res["steps"]), res["steps"]
        kinds = {s["kind"] for s in res["steps"]}
        assert {"warmup", "grad", "pull"} <= kinds, kinds
        for step, copies in zip(res["steps"], res["copies"], strict=True):
            assert all(c.endswith("(async) at losses.py:32") for c in copies), (step, copies)
            # a gradient step's A micro-batches: input_ids and (when given) the mask each
            if step["kind"] in ("grad", "warmup"):
                assert len(copies) >= STEP_RUNS["gptneo"]["A"], copies
            else:
                assert copies == [], copies


def _copies_per_step(rank: int, world: int, out: str, overrides: dict) -> dict:
    """:func:`harness.steps.checked_steps` with each step's host-to-device copies listed."""
    from harness import fake_cuda

    from empirical.train.trainer import Trainer

    fake_cuda.install(world)
    copies: list[list[str]] = []
    one_step = Trainer._one_step

    def listed(self: Trainer) -> None:
        with fake_cuda.SyncCounter() as c:
            one_step(self)
        copies.append(c.copies)

    Trainer._one_step = listed  # this spawned process's class only
    res = checked_steps(rank, world, out, overrides, gpus=world)
    return {**res, "copies": copies}


def test_transformers_builds_no_mask_for_the_project_model(monkeypatch):
    """The project's GPT-Neo hands transformers its own mask, so transformers' mask builder
    (``eager_mask``, whose call copied from the host in 5.17) never runs, whatever its
    version does; transformers' own model calls it (the control)."""
    from transformers import masking_utils

    from empirical.models import build_model

    built: list[str] = []

    def refused(*args, **kwargs):
        built.append("eager_mask")
        raise AssertionError("transformers built the mask")

    mapping = masking_utils.ALL_MASK_ATTENTION_FUNCTIONS._global_mapping
    monkeypatch.setitem(mapping, "eager", refused)
    ours = build_model("gptneo-tiny", vocab_size=64)
    theirs = _transformers_model(ours)
    ids = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(1))
    for mask in _masks().values():
        ours(input_ids=ids, attention_mask=mask)
    assert built == []
    with pytest.raises(AssertionError, match="transformers built the mask"):
        theirs(input_ids=ids, attention_mask=_masks()["left padding"])
    assert built == ["eager_mask"]
