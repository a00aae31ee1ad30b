"""``palsgd train --compile``: the model's forward compiled in place, on the CPU.

* The flag: off by default, ``--compile``/``--no-compile``, refused with
  ``--reference-faithful``.
* Two gloo ranks train the same steps of Local SGD (syncs that average) and PALSGD
  (warm-up, gradient and pull steps, syncs with an outer Nesterov step) eagerly and compiled: every micro-batch's loss
  and the final parameters agree within float tolerance, so the pulls and syncs, which
  update the parameters in place between compiled forwards, act on what the compiled
  forward reads.
* A compiled run stops, writes checkpoints whose model state has the plain module's names
  (no ``_orig_mod.``) and resumes compiled to the uninterrupted eager run's loss.

The default tests compile with the ``aot_eager`` backend (the same forward and backward
graphs, traced by dynamo and AOTAutograd, without generated code: seconds); the ``slow`` one
compiles with inductor, the backend of ``--compile`` (minutes on two cores, C++ compiler).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_cli_args import train_args

from core.errors import UserInputError
from empirical import checkpoint as ck
from empirical.config import resolve_config
from empirical.distributed import spawn_workers
from empirical.metrics import read_jsonl
from empirical.models import compiled
from palsgd.cli import main as cli_main

_RUN = dict(
    T=8,
    T0=2,
    H=2,
    p=0.5,
    eta=1.0,
    outer="nesterov",
    gamma=0.7,
    mu=0.9,
    A=2,
    batch_size=2,
    seq_len=16,
    eval_interval=0,
    checkpoint_interval=0,
    progress=False,
)
RUNS = {
    "palsgd": dict(_RUN, algorithm="palsgd"),
    "local_sgd": dict(_RUN, algorithm="local_sgd", T0=0, p=0.0, outer="average", gamma=1.0, mu=0.0),
}


def test_compile_flag_is_off_by_default_and_not_faithful(capsys):
    assert resolve_config().compile is False
    assert resolve_config(overrides={"compile": True}).compile is True
    with pytest.raises(UserInputError, match="faithful"):
        resolve_config(overrides={"compile": True, "reference_faithful": True})
    assert cli_main(["train", "--help"]) == 0
    assert "--compile, --no-compile" in capsys.readouterr().out


def _eager_and_compiled(rank: int, world: int, out: str, runs: dict, backend: str) -> dict:
    """One rank trains each of ``runs`` eagerly, then compiled (the same process group and
    seeds); each run's losses per micro-batch, final parameters and kinds of step."""
    from empirical.distributed import init_distributed
    from empirical.models import is_compiled
    from empirical.train.prepare import backend_of, prepare
    from empirical.train.trainer import Trainer

    compiled.COMPILE_BACKEND = backend
    ctx, res = None, {}
    for name, overrides in runs.items():
        for mode in (False, True):
            over = {**overrides, "compile": mode, "device": "cpu", "nproc": world}
            cfg = resolve_config(overrides={**over, "output_dir": f"{out}/{name}-{mode}"})
            prep = prepare(cfg)
            if ctx is None:
                ctx = init_distributed(backend_of(cfg, prep.device), bound=torch.device("cpu"))
            res[name, mode] = _train(Trainer(prep, ctx))
            res[name, mode]["compiled"] = is_compiled(res[name, mode].pop("model"))
    return res


def _train(trainer) -> dict:
    """Run ``trainer``'s steps, recording each micro-batch's loss and each step's kind."""
    losses: list[torch.Tensor] = []
    loss_of = trainer._loss

    def recorded(model, batch):
        loss = loss_of(model, batch)
        losses.append(loss.detach().clone())
        return loss

    trainer._loss = recorded
    kinds, algo = [], trainer.algo
    for _ in range(trainer.cfg.T):
        kind = "warmup" if algo.in_warmup else algo.next_action()
        kinds.append((kind, not algo.in_warmup and algo.sync_due_after(algo.t)))
        trainer._one_step()
    model = trainer.state.model
    return {
        "losses": torch.stack(losses),
        "params": [p.detach().clone() for p in model.parameters()],
        "keys": list(model.state_dict()),
        "kinds": kinds,
        "model": model,
    }


def _check_equal(ranks: list[dict], name: str, rtol: float, atol: float) -> None:
    for res in ranks:
        eager, comp = res[name, False], res[name, True]
        assert not eager["compiled"] and comp["compiled"]
        assert eager["kinds"] == comp["kinds"]
        kinds = set(eager["kinds"])
        assert ("grad", False) in kinds and any(synced for _, synced in kinds), kinds
        if name == "palsgd":  # a warm-up, and pull steps between the syncs
            assert {"warmup", "pull"} <= {k for k, _ in kinds}, kinds
        assert eager["keys"] == comp["keys"]
        assert not any("_orig_mod" in k for k in comp["keys"])
        torch.testing.assert_close(comp["losses"], eager["losses"], rtol=rtol, atol=atol)
        for p, q in zip(comp["params"], eager["params"], strict=True):
            torch.testing.assert_close(p, q, rtol=rtol, atol=atol)
    # the ranks trained different batches (so the syncs had something to average)
    assert not torch.equal(ranks[0][name, True]["losses"], ranks[1][name, True]["losses"])


@pytest.mark.distributed
def test_compiled_steps_equal_eager_steps(tmp_path):
    """PALSGD (gradient steps, pulls and outer syncs around the compiled model); Local SGD
    as well under ``-m slow``."""
    runs = {"palsgd": RUNS["palsgd"]}
    ranks = spawn_workers(_eager_and_compiled, 2, str(tmp_path), runs, "aot_eager", timeout_s=300)
    _check_equal(ranks, "palsgd", rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.distributed
def test_compiled_local_sgd_steps_equal_eager_steps(tmp_path):
    runs = {"local_sgd": RUNS["local_sgd"]}
    ranks = spawn_workers(_eager_and_compiled, 2, str(tmp_path), runs, "aot_eager", timeout_s=300)
    _check_equal(ranks, "local_sgd", rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.distributed
def test_inductor_compiled_steps_equal_eager_steps(tmp_path):
    """The backend of ``--compile`` (generated C++ kernels on the CPU): float tolerance."""
    ranks = spawn_workers(_eager_and_compiled, 2, str(tmp_path), RUNS, "inductor", timeout_s=1800)
    for name in RUNS:
        _check_equal(ranks, name, rtol=1e-4, atol=1e-5)


def _final_loss(out: Path) -> float:
    train = [r for r in read_jsonl(out / "metrics.jsonl") if r["kind"] == "train"]
    return train[-1]["loss"]


def test_a_compiled_run_resumes_from_plain_checkpoints(tmp_path, monkeypatch):
    monkeypatch.setattr(compiled, "COMPILE_BACKEND", "aot_eager")
    eager, comp = tmp_path / "eager", tmp_path / "compiled"
    assert cli_main(train_args(eager)) == 0
    assert cli_main(train_args(comp, "--compile", "--max-steps-this-run", "4")) == 0
    step4 = ck.step_dir(comp / "checkpoints", 4)
    state = ck.load_rank_state(step4, ck.read_manifest(step4), 0)
    keys = list(state["model"])
    assert keys and not any("_orig_mod" in k for k in keys), keys
    assert cli_main(train_args(comp, "--compile", "--resume", "auto")) == 0
    resumed = [r for r in read_jsonl(comp / "metrics.jsonl", "event") if r["event"] == "resume"]
    assert resumed and resumed[-1]["step"] == 4
    assert _final_loss(comp) == pytest.approx(_final_loss(eager), rel=1e-5)
