"""``palsgd train --workers-per-process W``: K workers in one process (StackedWorkers) are the
K ranks of a ``--nproc K`` run over gloo (docs/stacked_workers.md).

The key test trains GPT-Neo-tiny on the embedded text for 10 steps (T0 = 2 warm-up steps,
a sync every 3 local steps, p = 0.3, A = 2 micro-batches, AdamW, outer Nesterov) twice: ``--nproc 1
--workers-per-process 4`` in this process and ``--nproc 4`` through torchrun over gloo, with
the same seed. The trainer builds float32 models (it has no dtype option), so the two
runs agree to float32 rounding, not bit for bit: the stacked run's vmapped products are
batched (``bmm``) where a rank's are not, and its sync sums the workers' rows where gloo
sums the ranks' buffers in another order. Each such rounding is about 1e-7 relative
(float32's epsilon, 1.2e-7); over 10 AdamW steps of a model whose parameters are O(1)
the anchors were observed to differ by 3.6e-7 at most (the losses by 1.1e-7 relative). The
tolerance, 1e-5 on parameters and 1e-5 relative on losses, is about 30x that, and a wrong
computation moves the anchor far more: the negative controls (another seed: 0.17; the
workers' coin streams permuted through a recorded trace: 3.2e-3) move it by more than
1e-4, which the test requires, while the recorded trace of the ranks' own coins gives the
same run.

A resumed stacked run (stopped after 6 steps, resumed from the checkpoint of step 4) is
the uninterrupted one exactly (one process: the same operations in the same order).

``--nproc 2 --workers-per-process 2`` (two torchrun ranks of two stacked workers each) is
the same run again, to the same tolerance: rank ``r`` holds the workers ``2r, 2r + 1``
with their coins and data streams, and each mean over the workers is a sum over the rows,
then over the ranks. Its resume is the one-process resume above on each rank's file
(stopped after 6 steps and resumed, it was measured equal to the ranks' run as well; the
suite runs it once, uninterrupted, for time).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from core.errors import UserInputError
from empirical import checkpoint as ck
from empirical.config import resolve_config
from empirical.metrics import read_jsonl
from palsgd.cli import main as cli_main
from theory.coins import pull_coins

#: the compared runs: GPT-Neo-tiny, 10 steps, T0 = 2, H = 3, p = 0.3 (pulls in every round)
RUN = dict(T=10, T0=2, H=3, p=0.3, A=2, seq_len=16, batch_size=2, log_interval=1, eval_interval=5)
K, SEED, T = 4, 0, RUN["T"]
PARAM_TOL, LOSS_RTOL, CONTROL_GAP = 1e-5, 1e-5, 1e-4


def _flags(out: Path, **kw) -> list[str]:
    opts = {**RUN, "checkpoint_interval": 4, "seed": SEED, **kw}
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in opts.items()]
    return ["train", "--no-progress", "--output-dir", str(out), *flags]


def _run(out: Path, *, export: bool = True, **kw) -> Path:
    extra = ["--export-dir", str(out / "export")] if export else []
    assert cli_main([*_flags(out, **kw), *extra]) == 0
    return out


def _anchor(out: Path) -> dict[str, torch.Tensor]:
    return load_file(str(out / "export" / "model.safetensors"))


def _gap(a: Path, b: Path) -> float:
    """Largest absolute difference between two runs' exported anchors."""
    sa, sb = _anchor(a), _anchor(b)
    assert sa.keys() == sb.keys()
    return max(float((sa[k].double() - sb[k].double()).abs().max()) for k in sa)


def _losses(out: Path) -> list[tuple[str, int, float]]:
    """Every train record's loss (per step: log_interval 1) and every eval record's."""
    recs = [r for r in read_jsonl(out / "metrics.jsonl") if r["kind"] in ("train", "eval")]
    return [
        (r["kind"], r["step"], r["loss"] if r["kind"] == "train" else r["eval_loss"]) for r in recs
    ]


def _assert_same_losses(a: Path, b: Path) -> None:
    la, lb = _losses(a), _losses(b)
    assert [x[:2] for x in la] == [x[:2] for x in lb]
    assert len([x for x in la if x[0] == "train"]) == T
    for (kind, step, va), (_, _, vb) in zip(la, lb, strict=True):
        assert va == pytest.approx(vb, rel=LOSS_RTOL), (kind, step, va, vb)


def _coin_trace(path: Path, order: list[int]) -> Path:
    """The coins ranks 0..K-1 draw (the counter-based ones), columns in ``order``."""
    steps = np.arange(T)
    cols = [pull_coins(SEED, RUN["p"], step=steps, worker=k, replica=0) for k in range(K)]
    np.save(path, np.stack(cols, 1)[:, order])
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("stacked")
    out = {
        "ranks": _run(base / "ranks", nproc=K),  # torchrun, gloo, K ranks
        "stacked": _run(base / "stacked", nproc=1, workers_per_process=K),
        "seed": _run(base / "seed", nproc=1, workers_per_process=K, seed=SEED + 1),
    }
    trace = _coin_trace(base / "coins.npy", list(range(K)))
    out["trace"] = _run(base / "trace", nproc=1, workers_per_process=K, coins_file=trace)
    swapped = _coin_trace(base / "swapped.npy", [1, 0, 3, 2])
    out["swapped"] = _run(base / "swapped", nproc=1, workers_per_process=K, coins_file=swapped)
    part = base / "part"
    _run(part, export=False, nproc=1, workers_per_process=K, max_steps_this_run=6)
    out["part"] = _run(part, nproc=1, workers_per_process=K, resume="auto")
    # torchrun, 2 ranks of 2 workers each
    out["two_by_two"] = _run(base / "two_by_two", nproc=2, workers_per_process=2)
    return out


@pytest.mark.distributed
def test_stacked_workers_are_the_ranks_of_a_gloo_run(runs):
    summary = json.loads((runs["stacked"] / "summary.json").read_text())
    totals = summary["totals"]
    assert summary["world_size"] == 1 and totals["syncs"] == 2 and totals["pull_steps"] > 0
    assert totals["grad_steps"] + totals["pull_steps"] == K * T
    assert _gap(runs["stacked"], runs["ranks"]) < PARAM_TOL
    _assert_same_losses(runs["stacked"], runs["ranks"])
    # the recorded trace of the ranks' own coins is the same run
    assert _gap(runs["trace"], runs["ranks"]) < PARAM_TOL
    _assert_same_losses(runs["trace"], runs["ranks"])


@pytest.mark.distributed
def test_ranks_of_stacked_workers_are_the_ranks_of_a_gloo_run(runs):
    two = runs["two_by_two"]
    assert _gap(two, runs["ranks"]) < PARAM_TOL
    _assert_same_losses(two, runs["ranks"])
    summary = json.loads((two / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["totals"]["syncs"] == 2
    assert summary["totals"]["allreduce_calls"] > 0  # the sync crosses the processes
    d = ck.latest_complete(two / "checkpoints")
    manifest = ck.read_manifest(d)
    assert manifest["world_size"] == 2
    for rank in (0, 1):
        state = ck.load_rank_state(d, manifest, rank)
        assert (state["algorithm"]["K"], state["algorithm"]["W"]) == (K, 2)
        assert [s["rank"] for s in state["data"]["workers"]] == [2 * rank, 2 * rank + 1]


@pytest.mark.distributed
@pytest.mark.parametrize("control", ["seed", "swapped"])
def test_negative_controls_do_not_match(runs, control):
    """Another seed, or the workers' coin streams permuted, move the anchor by far more
    than the tolerance."""
    assert _gap(runs[control], runs["ranks"]) > CONTROL_GAP


@pytest.mark.distributed
def test_a_resumed_stacked_run_is_the_uninterrupted_one(runs):
    part, full = runs["part"], runs["stacked"]
    assert _gap(part, full) == 0.0
    assert _losses(part) == _losses(full)
    resume = [r for r in read_jsonl(part / "metrics.jsonl", "event") if r["event"] == "resume"]
    assert resume[-1]["step"] == 4
    d = ck.latest_complete(part / "checkpoints")
    manifest = ck.read_manifest(d)
    state = ck.load_rank_state(d, manifest, 0)
    assert manifest["world_size"] == 1 and len(manifest["files"]) == 1
    assert state["algorithm"]["kind"] == "stacked" and state["algorithm"]["K"] == K
    assert [s["rank"] for s in state["data"]["workers"]] == list(range(K))
    # the checkpoint's model is the global model (the anchor)
    anchor = _anchor(full)
    assert all(torch.equal(state["model"][k], anchor[k]) for k in anchor)


def test_a_checkpoint_of_other_workers_is_refused(tmp_path, capsys):
    part = tmp_path / "part"
    _run(part, export=False, nproc=1, workers_per_process=2, max_steps_this_run=4, T=6)
    capsys.readouterr()
    code = cli_main(_flags(part, nproc=1, workers_per_process=3, resume="auto", T=6))
    assert code == 2 and "workers_per_process" in capsys.readouterr().err


# ----------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    ("kw", "named"),
    [
        (dict(algorithm="ddp", p=None, eta=None, T0=None), "--algorithm ddp"),
        (dict(sync_delay=1), "--sync-delay"),
        (dict(interleave_outer_steps=True), "--interleave-outer-steps"),
        (dict(precision="fp16"), "--precision fp16"),
        (dict(nproc=2, shards=2), "--shards 2"),
        (dict(compile=True), "--compile"),
        (dict(comm_delay_s=0.1), "--comm-delay-s / --comm-delay-per-byte-s with --nproc 1"),
    ],
)
def test_unsupported_settings_are_refused_naming_the_flags(kw, named):
    with pytest.raises(UserInputError) as exc:
        resolve_config(overrides={"nproc": 1, "workers_per_process": 4, **kw})
    assert "--workers-per-process 4" in str(exc.value) and named in str(exc.value)


def test_the_command_exits_2_with_one_line(tmp_path, capsys):
    assert cli_main([*_flags(tmp_path, nproc=1, workers_per_process=2), "--compile"]) == 2
    err = capsys.readouterr().err
    assert "--workers-per-process 2 does not support --compile" in err and "Traceback" not in err
    # the resolved algorithm: interleaved outer steps of the authors' code with A > 1 steps
    faithful = ["--reference-faithful", "--outer-steps-per-sync", "2"]
    assert cli_main([*_flags(tmp_path, nproc=1, workers_per_process=2), *faithful]) == 2
    assert "no interleaving" in capsys.readouterr().err
    assert cli_main(_flags(tmp_path, nproc=1, workers_per_process=0)) == 2


def test_help_says_what_it_does_and_refuses(capsys):
    assert cli_main(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--workers-per-process WORKERS_PER_PROCESS" in text
    assert "K = nproc x W" in text and "delay-* with --nproc 1" in text
    assert "not ddp, sgd" in text


def test_bf16_and_local_sgd_run_and_evaluate_the_average(tmp_path):
    """bf16 autocast runs through the vmapped step; Local SGD's global model between syncs
    is the workers' average, as a K-rank run evaluates it."""
    local = dict(algorithm="local_sgd", p=0.0, eta=0.0, T0=0, outer="average", gamma=1.0, mu=0.0)
    out = _run(tmp_path / "local", export=False, nproc=1, workers_per_process=2,
               precision="bf16", T=4, H=4, eval_interval=2, checkpoint_interval=0, **local)  # fmt: skip
    evals = [r for r in read_jsonl(out / "metrics.jsonl") if r["kind"] == "eval"]
    assert [r["evaluated"] for r in evals] == ["average"] * 3
