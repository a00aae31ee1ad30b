"""No host-device synchronisation inside a training step, shown on the CPU.

Two gloo ranks each build the real trainer (``prepare`` -> ``init_distributed`` ->
``Trainer``) with ``--device cuda`` under the fake-CUDA harness (tests/harness), and every
step runs inside a :class:`fake_cuda.SyncCounter`: each call that would make the host wait
for the GPU (``.item()``, ``float()``/``int()``/``bool()`` of a tensor, ``.tolist()``,
``.cpu()``, ``.numpy()``, data-dependent shapes, ``torch.tensor(..., device=cuda)`` of host
data, ``torch.cuda.synchronize``, event and stream waits) is counted. The host-side data
pipeline (the batch stream) and the inner optimizer's step counters (host tensors in a GPU
run too: torch keeps them on the CPU unless ``capturable``) are not counted.

Every step (warm-up, gradient, pull and sync) of every sync mode (``SYNC_MODES``: the
blocking sync with an outer optimizer or the average, interleaved outer steps, an emulated
slow link, and the overlapped sync, ``--sync-delay``, whose landings are steps too) must
count zero; the logging and checkpoint collectives, which read values on purpose, are the
negative controls that the counter must see.
"""

from __future__ import annotations

import pytest
import torch
from harness.steps import STEP_RUNS, SYNC_MODES, checked_runs

from empirical.distributed import spawn_workers

pytestmark = pytest.mark.distributed


RUNS = {**STEP_RUNS, **SYNC_MODES}


def test_no_host_sync_in_any_step_of_any_sync_mode(tmp_path):
    """0 host syncs in every step of every sync mode (blocking, average, interleaved outer
    steps, slow link, and the overlapped sync: its start, its window and its landing), on
    GPT-Neo and ResNet; every mode runs in one spawn of the two ranks."""
    ranks = spawn_workers(checked_runs, 2, str(tmp_path / "run"), RUNS, timeout_s=600)
    for rank, results in enumerate(ranks):
        assert sorted(results) == sorted(RUNS)
        for name, res in results.items():
            _check(name, RUNS[name], rank, res)


def _check(name: str, run: dict, rank: int, res: dict) -> None:
    """One rank's steps of the run ``name``: every kind of step ran, none synchronised,
    and the controls were seen."""
    where = f"{name}, rank {rank}"
    assert res["device"] == f"cuda:{rank}", where
    kinds = {(s["kind"], s["synced"]) for s in res["steps"]}
    # every kind of step ran: warm-up, gradient and pull steps, and syncs after both
    assert {("warmup", False), ("grad", False), ("pull", False)} <= kinds, (where, kinds)
    assert any(synced for _, synced in kinds), (where, kinds)
    landings = [s["t"] for s in res["steps"] if s["landed"]]
    if run.get("sync_delay"):
        # the overlapped sync's updates land inside the counted steps (and the last
        # one in the final step, through Trainer.finish)
        assert len(landings) >= 2, (where, landings)
    else:
        assert landings == [], where
    per_step = [len(s["calls"]) for s in res["steps"]]
    assert per_step == [0] * len(res["steps"]), (where, res["steps"])
    # the controls read values on purpose: the counter must see them
    c = res["controls"]
    assert c["finite"] >= 1 and c["log"] >= 1, (where, c)
    assert c["float(step) on the device"] == 1 and c["consensus"] == 1, (where, c)
    # the consensus statistic of the last sync is resolved when read (by the log)
    assert isinstance(res["consensus"], float) and res["consensus"] >= 0.0, where


def _attention(rank: int, world: int) -> dict:
    """GPT-Neo's forward with the project's attention and with transformers' own class:
    the same logits; host copies counted in each."""
    import copy

    from harness import fake_cuda
    from transformers.models.gpt_neo.modeling_gpt_neo import GPTNeoSelfAttention

    from empirical.models import build_model

    fake_cuda.install(1)
    torch.manual_seed(0)
    model = build_model("gptneo-tiny", vocab_size=64).to("cuda")
    original = copy.deepcopy(model)
    for module in original.modules():
        if isinstance(module, GPTNeoSelfAttention):
            module.__class__ = GPTNeoSelfAttention
    ids = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 24, dtype=torch.long)
    mask[1, :7] = 0  # left padding: the additive attention mask is used too
    torch.manual_seed(0)
    fused = build_model("gptneo-tiny", vocab_size=64, attention="sdpa").to("cuda")
    out = {}
    for name, m in {"project": model, "transformers": original, "sdpa": fused}.items():
        with fake_cuda.SyncCounter() as c:
            logits = m(input_ids=ids, attention_mask=mask).logits
        out[name] = (logits, c.count)
    out["layers"] = len(model.transformer.h)
    return out


def test_gpt_neo_attention_copies_nothing_from_the_host_and_matches_transformers():
    (res,) = spawn_workers(_attention, 1, timeout_s=300)
    (ours, ours_syncs), (theirs, theirs_syncs) = res["project"], res["transformers"]
    assert torch.equal(ours, theirs)
    assert ours_syncs == 0
    # transformers' class copies its mask value from the host in every layer (the control)
    assert theirs_syncs == res["layers"]
    # the attention through scaled_dot_product_attention copies nothing either
    assert res["sdpa"][1] == 0 and torch.allclose(res["sdpa"][0], ours, rtol=1e-5, atol=1e-5)
