"""Device state around checkpoints and exports, on the CPU (CUDA mocked where needed): the
GPUs' RNG states restored when fewer GPUs are visible on resume, the offloaded outer
momentum read only after its copy has finished, and the export of the anchor through host
memory without a copy of the model on its device."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from empirical.algorithms import AlgorithmConfig, build_algorithm
from empirical.checkpoint import capture_rng, restore_rng
from empirical.export import export_anchor
from empirical.models import build_model


# ----------------------------------------------------------------------------- RNG
@pytest.fixture
def gpus(monkeypatch):
    """Fake GPUs for the RNG functions: ``gpus(count, current)`` sets how many are visible
    and which one this process uses; returns the states set, by index. Setting a GPU past
    the count fails as the driver does."""
    states: dict[int, torch.Tensor] = {}
    seen = {"count": 0, "current": 0}

    def set_state(state, device="cuda"):
        index = int(device)
        if not 0 <= index < seen["count"]:
            raise RuntimeError("CUDA error: invalid device ordinal")
        states[index] = state

    def setup(count: int, current: int = 0) -> dict[int, torch.Tensor]:
        seen.update(count=count, current=current)
        states.clear()
        return states

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: seen["count"])
    monkeypatch.setattr(torch.cuda, "current_device", lambda: seen["current"])
    monkeypatch.setattr(torch.cuda, "set_rng_state", set_state)
    monkeypatch.setattr(
        torch.cuda,
        "get_rng_state_all",
        lambda: [torch.full((4,), i, dtype=torch.uint8) for i in range(seen["count"])],
    )
    return setup


def test_rng_restore_with_fewer_visible_gpus_gives_this_process_its_own_state(gpus):
    gpus(4, current=3)  # rank 3 of a node with 4 visible GPUs
    state = capture_rng()
    assert state["cuda_device"] == 3 and len(state["cuda"]) == 4
    restored = gpus(1, current=0)  # the resume sees one GPU per process
    restore_rng(state)
    assert list(restored) == [0] and restored[0].tolist() == [3] * 4
    restored = gpus(4, current=3)  # the same GPUs: every state back in its place
    restore_rng(state)
    assert {i: s[0].item() for i, s in restored.items()} == {0: 0, 1: 1, 2: 2, 3: 3}


def test_rng_restore_of_a_checkpoint_without_the_device_index(gpus):
    gpus(4)
    state = capture_rng()
    del state["cuda_device"]  # checkpoints written before the index was recorded
    restored = gpus(2)
    restore_rng(state)
    assert {i: s[0].item() for i, s in restored.items()} == {0: 0, 1: 1}


# ----------------------------------------------------------------------------- offload
class _Event:
    """A CUDA event stand-in that logs when it is recorded and waited for."""

    log: list[str] = []

    def __init__(self, enable_timing: bool = False):
        pass

    def record(self, stream=None):
        _Event.log.append("record")

    def synchronize(self):
        _Event.log.append("wait")


def _diloco(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    _Event.log = []
    g = torch.Generator().manual_seed(0)
    model = nn.Linear(4, 2)
    cfg = AlgorithmConfig(name="diloco", H=2, T0=1, gamma=0.7, mu=0.9)
    algo = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=0.05))
    algo.outer.offload = True  # a CUDA anchor turns it on; forced here

    def step():
        x = torch.randn(3, 4, generator=g)
        algo.train_step(lambda: x, lambda m, b: m(b).square().mean())

    return algo, step


def test_offloaded_momentum_is_read_only_after_its_copy_and_steps_never_wait(monkeypatch):
    algo, step = _diloco(monkeypatch)
    for _ in range(5):  # two syncs: two copies to the host, each marked, none waited for
        step()
    assert _Event.log == ["record", "record"]
    state = algo.state_dict()  # a direct state_dict right after an offloaded outer step
    assert _Event.log == ["record", "record", "wait"]
    momentum = state["outer"]["state"][0]["momentum_buffer"]
    assert torch.equal(momentum, algo.outer.momentum_buffer)
    assert _Event.log[-1] == "wait" and _Event.log.count("wait") == 1  # waited once only
    step()
    step()  # the next sync's copy is marked; reading it waits again
    assert _Event.log[-1] == "record"
    algo.outer.momentum_buffer  # noqa: B018 - the read is what is tested
    assert _Event.log[-1] == "wait"


# ----------------------------------------------------------------------------- export
@pytest.mark.parametrize("name", ["gptneo-tiny", "resnet-tiny"])
def test_export_reads_nothing_of_the_model_on_its_device(name, tmp_path):
    """A model on the ``meta`` device has no data: an export that copied it (to the host or
    on its device) would fail. The export builds its copy in host memory from the state."""
    torch.manual_seed(0)
    kw = {"vocab_size": 64} if name.startswith("gptneo") else {}
    host = build_model(name, **kw)
    state = {k: v.clone() for k, v in host.state_dict().items()}
    with torch.device("meta"):
        on_device = build_model(name, **kw)
    path = export_anchor(on_device, state, tmp_path / "export", name)
    if name.startswith("gptneo"):
        from transformers import GPTNeoForCausalLM

        loaded = GPTNeoForCausalLM.from_pretrained(str(path))
    else:
        assert json.loads((path / "export.json").read_text()) == {"model": name}
        loaded = build_model(name)
        loaded.load_state_dict(torch.load(path / "anchor.pt", weights_only=True))
    for key, val in loaded.state_dict().items():
        assert torch.equal(val, state[key]), key
