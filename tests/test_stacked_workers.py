"""K PALSGD workers in one process (:class:`empirical.algorithms.stacked.StackedWorkers`)
against K workers run one after another with the project's own per-worker update.

The reference: K :class:`~empirical.algorithms.local.LocalAlgorithm` instances in one
process (no process group), worker ``k``'s coins those of rank ``k`` (``pulls.worker =
k``), their own syncs switched off (``H`` huge) and the sync's all-reduce done here: the
mean over the K instances of ``Delta_k = z - x_k`` (or ``x_k``), then each instance's own
:class:`~empirical.algorithms.outer.OuterOptimizer` step and reset, as
:class:`~empirical.algorithms.sync.Sync` does after its all-reduce. Float64, 1e-12.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from empirical.algorithms import AlgorithmConfig
from empirical.algorithms.coins import counter_coins
from empirical.algorithms.local import LocalAlgorithm
from empirical.algorithms.stacked import StackedWorkers
from theory.sync import is_sync_step

K, H, T, B, D = 3, 4, 12, 5, 6  # workers, period, steps (3 syncs), batch, features
TOL = 1e-12

OPTIMIZERS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1, weight_decay=0.01),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
}


def _mlp(bn: bool = False) -> nn.Module:
    torch.manual_seed(0)
    mid = [nn.BatchNorm1d(16)] if bn else []
    return nn.Sequential(nn.Linear(D, 16), *mid, nn.Tanh(), nn.Linear(16, 3)).double()


def _loss(model: nn.Module, batch) -> torch.Tensor:
    x, y = batch
    return nn.functional.cross_entropy(model(x), y)


def _data(steps: int = T, k: int = K) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(steps, k, B, D, dtype=torch.float64, generator=g)
    return x, torch.randint(0, 3, (steps, k, B), generator=g)


def run_stacked(
    cfg, opt, model, data, *, steps=T, cls=StackedWorkers, loss=_loss, **kw
) -> StackedWorkers:
    """``steps`` steps of ``K`` stacked workers on ``data`` (``(T, K, ...)`` leaves)."""
    k = data[0].shape[1]
    sw = cls(cfg, copy.deepcopy(model), k, OPTIMIZERS[opt](model.parameters()), loss, **kw)
    for s in range(steps):
        sw.step((data[0][s], data[1][s]))
    return sw


def _reference_sync(algos: list[LocalAlgorithm], cfg: AlgorithmConfig) -> None:
    """The sync's all-reduce (a mean over the instances), then each instance's own outer
    step and reset (:meth:`empirical.algorithms.sync.Sync._sync` after its all-reduce)."""
    n = algos[0].flat_model.n
    flats = [a.flat_model.flat[:n] for a in algos]
    with torch.no_grad():
        if cfg.outer == "average":
            mean = sum(f.clone() for f in flats) / len(algos)
            for a, f in zip(algos, flats, strict=True):
                if a.anchor.z is not None:
                    a.anchor.z.copy_(mean)
                f.copy_(mean)
        else:
            delta = sum(a.anchor.z - f for a, f in zip(algos, flats, strict=True)) / len(algos)
            for a in algos:
                a.anchor.outer.step(delta.clone())
                a.anchor.reset_workers()
        if cfg.buffers == "average":  # the floating-point buffers ride in the same all-reduce
            for bs in zip(*(a.flat_model.float_buffers for a in algos), strict=True):
                mean = sum(b.clone() for b in bs) / len(algos)
                for b in bs:
                    b.copy_(mean)


def run_reference(
    cfg, opt, model, data, *, steps=T, workers=None, loss=_loss
) -> list[LocalAlgorithm]:
    """``K`` LocalAlgorithm instances run one after another (module docstring);
    ``workers[k]``: the rank whose coins instance ``k`` draws (default ``k``)."""
    k_all = data[0].shape[1]
    workers = list(range(k_all)) if workers is None else workers
    algos = []
    for k in range(k_all):
        m = copy.deepcopy(model)
        algo = LocalAlgorithm(cfg.replace(H=10**6), m, OPTIMIZERS[opt](m.parameters()))
        algo.pulls.worker = workers[k]
        algo.pulls.forget_coins()
        algos.append(algo)
    for s in range(steps):
        for k, a in enumerate(algos):
            if a.next_action() == "grad":
                loss(a.model, (data[0][s, k], data[1][s, k])).backward()
        if s < cfg.warmup_steps:  # the warm-up's gradient all-reduce
            for ps in zip(*(a.params for a in algos), strict=True):
                mean = sum(p.grad for p in ps) / len(algos)
                for p in ps:
                    p.grad = mean.clone()
        for a in algos:
            a.step()
        if is_sync_step(s, cfg.warmup_steps, cfg.H, cfg.sync_offset):
            _reference_sync(algos, cfg)
    return algos


def gap(sw: StackedWorkers, algos: list[LocalAlgorithm]) -> float:
    """Largest absolute difference of the anchors and of every worker's parameters."""
    n = algos[0].flat_model.n
    diffs = [(sw.x[k] - a.flat_model.flat[:n]).abs().max() for k, a in enumerate(algos)]
    if algos[0].anchor.z is not None:
        diffs.append((sw.z - algos[0].anchor.z).abs().max())
    return float(max(diffs))


def _cfg(p: float, outer: str, **kw) -> AlgorithmConfig:
    name = kw.pop("name", "palsgd" if p else ("local_sgd" if outer == "average" else "diloco"))
    if outer != "average":
        kw.update(outer=outer, gamma=0.7, mu=0.9)
    if p:
        kw.update(p=p, eta=0.5)
    return AlgorithmConfig(name=name, H=H, **kw)


@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
@pytest.mark.parametrize("p", [0.0, 0.3])
@pytest.mark.parametrize("outer", ["average", "nesterov"])
def test_stacked_equals_separate_workers(opt, p, outer):
    cfg, model, data = _cfg(p, outer), _mlp(), _data()
    sw = run_stacked(cfg, opt, model, data)
    algos = run_reference(cfg, opt, model, data)
    assert sw.stats["syncs"] == T // H
    if p:  # the coins made both kinds of steps, with different counts per worker
        assert sw.stats["pull_steps"].sum() > 0 and sw.stats["grad_steps"].sum() > 0
        assert len(set(sw.stats["pull_steps"].tolist())) > 1
    assert gap(sw, algos) < TOL


@pytest.mark.parametrize(
    "kw",
    [
        dict(name="palsgd", T0=3, coins="shared"),
        dict(name="post_local_sgd", T0=3),
        dict(outer_steps_per_sync=2, pull_first_tensor_only=True, clip_grad_norm=0.5),
    ],
)
def test_warmup_shared_coins_and_switches(kw):
    post = kw.get("name") == "post_local_sgd"
    cfg = _cfg(0.0 if post else 0.3, "average" if post else "nesterov", **kw)
    model, data = _mlp(), _data()
    assert (
        gap(run_stacked(cfg, "adamw", model, data), run_reference(cfg, "adamw", model, data)) < TOL
    )


def test_batchnorm_buffers_are_per_worker_and_averaged_at_the_sync():
    cfg, model, data = _cfg(0.3, "average"), _mlp(bn=True), _data()
    for steps in (H, T - 1):  # right after a sync; and between syncs
        sw = run_stacked(cfg, "sgd", model, data, steps=steps)
        algos = run_reference(cfg, "sgd", model, data, steps=steps)
        assert gap(sw, algos) < TOL
        for key, stacked in sw.model.buffers.items():
            for k, a in enumerate(algos):
                ref = dict(a.model.named_buffers())[key.removeprefix("model.")]
                assert torch.allclose(stacked[k], ref.to(stacked.dtype), atol=TOL, rtol=0), key
    rm = sw.model.buffers["model.1.running_mean"]
    assert not torch.equal(rm[0], rm[1])  # per worker between syncs


# ---------------------------------------------------------------------- negative controls
def test_a_wrong_coin_stream_is_detected():
    cfg, model, data = _cfg(0.3, "average"), _mlp(), _data()
    algos = run_reference(cfg, "sgd", model, data)
    default = counter_coins(cfg.seed, cfg.p, shared=False)
    shifted = run_stacked(cfg, "sgd", model, data, coin_source=lambda s, k: default(s, (k + 1) % K))
    assert gap(shifted, algos) > 1e-4
    # the same permutation on both sides agrees again: the check compares coins, not luck
    permuted = run_reference(cfg, "sgd", model, data, workers=[(k + 1) % K for k in range(K)])
    assert gap(shifted, permuted) < TOL


class _ForgetsOuterRate(StackedWorkers):
    """A sync that averages (``gamma = 1``, no momentum) whatever the outer optimizer."""

    @torch.no_grad()
    def sync(self) -> None:
        self.z.copy_(self.x.mean(0))
        self.x.copy_(self.z.expand_as(self.x))
        self.stats["syncs"] += 1


def test_a_sync_that_forgets_the_outer_rate_is_detected():
    cfg, model, data = _cfg(0.3, "sgd"), _mlp(), _data()
    algos = run_reference(cfg, "sgd", model, data)
    assert gap(run_stacked(cfg, "sgd", model, data), algos) < TOL
    assert gap(run_stacked(cfg, "sgd", model, data, cls=_ForgetsOuterRate), algos) > 1e-4


# ---------------------------------------------------------------------- no host reads
_HOST_READS = {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", "cpu",
               "numpy", "nonzero", "__array__"}  # fmt: skip


class _HostReadSpy(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        if name in _HOST_READS:
            self.reads.append(name)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("opt", ["sgd_momentum", "adamw"])
def test_a_step_reads_nothing_back_from_the_tensors(opt):
    cfg, model, data = _cfg(0.3, "nesterov", clip_grad_norm=1.0), _mlp(), _data()
    sw = StackedWorkers(cfg, model, K, OPTIMIZERS[opt](model.parameters()), _loss)
    sw.coins(0)  # the first block of coins (host numpy) drawn outside the spy
    spy = _HostReadSpy()
    with spy:
        for s in range(T):
            sw.step((data[0][s], data[1][s]))
    assert sw.stats["syncs"] == T // H and not spy.reads


def test_the_spy_sees_host_reads():
    spy = _HostReadSpy()
    with spy:
        t = torch.ones(2)
        _ = bool(t.sum() > 0), t.sum().item()
    assert {"__bool__", "item"} <= set(spy.reads)


# ---------------------------------------------------------------------- GPT-Neo
def test_tiny_gptneo_matches_separate_workers():
    """GPT-Neo's attention scores are float32 even in a float64 model (and the loss casts
    the logits to float32). Here batched and unbatched products round alike (the gap is
    about 7e-16), but a BLAS may round batched float32 products differently (about 1e-7):
    the tolerance is float32's, still far below what a wrong coin or rate moves (> 1e-4)."""
    from empirical import models

    model = models.build_model("gptneo-tiny", seed=0, num_layers=1).double()
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 257, (2 * H, 2, 2, 8), generator=g)

    def lm(m, batch):
        return models.compute_loss(m, {"input_ids": batch[0], "labels": batch[1]}, "lm")

    cfg, data = _cfg(0.3, "nesterov"), (ids, ids)
    sw = run_stacked(cfg, "adamw", model, data, steps=2 * H, loss=lm)
    algos = run_reference(cfg, "adamw", model, data, steps=2 * H, loss=lm)
    assert sw.stats["syncs"] == 2 and sw.stats["pull_steps"].sum() > 0
    assert gap(sw, algos) < 1e-6
    sd = sw.anchor_state_dict()  # the tied head is the embedding's row of z
    assert torch.equal(sd["lm_head.weight"], sd["transformer.wte.weight"])
    assert not torch.equal(sd["lm_head.weight"], model.lm_head.weight)


def test_state_dict_round_trip_continues_identically():
    cfg, model, data = _cfg(0.3, "nesterov"), _mlp(), _data()
    full = run_stacked(cfg, "adamw", model, data)
    half = run_stacked(cfg, "adamw", model, data, steps=6)
    fresh = StackedWorkers(
        cfg, copy.deepcopy(model), K, OPTIMIZERS["adamw"](model.parameters()), _loss
    )
    fresh.load_state_dict(half.state_dict())
    for s in range(6, T):
        fresh.step((data[0][s], data[1][s]))
    assert torch.equal(fresh.x, full.x) and torch.equal(fresh.z, full.z)
    sd = full.anchor_state_dict()
    assert torch.equal(sd["0.weight"].reshape(-1), full.z[: 16 * D])
    assert np.array_equal(fresh.stats["pull_steps"], full.stats["pull_steps"])


# ---------------------------------------------------------------------- the inner optimizers
@pytest.mark.parametrize(
    "make",
    [
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.8, dampening=0.3, weight_decay=0.1),
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.8, nesterov=True),
        lambda ps: torch.optim.AdamW(ps, lr=0.02, betas=(0.8, 0.95), eps=1e-6),
    ],
)
def test_masked_inner_steps_equal_torch_per_worker(make):
    """Each worker's row under random subsets of stepping workers equals a torch optimizer stepped only on that
    worker's active steps (dampening's first step, Nesterov, AdamW's own step count)."""
    from empirical.algorithms.stacked_inner import StackedInner

    g = torch.Generator().manual_seed(3)
    x0 = torch.randn(K, 7, dtype=torch.float64, generator=g)
    inner = StackedInner.from_torch(make([torch.zeros(1, requires_grad=True)]))
    x = x0.clone()
    rows = [x0[k].clone().requires_grad_() for k in range(K)]
    opts = [make([r]) for r in rows]
    for _ in range(6):
        grads = torch.randn(K, 7, dtype=torch.float64, generator=g)
        workers = [k for k in range(K) if torch.rand((), generator=g) < 0.6]
        inner.step(x, grads[workers].clone(), workers, inner.lr)
        for k in workers:
            rows[k].grad = grads[k].clone()
            opts[k].step()
    assert max(float((x[k] - rows[k].detach()).abs().max()) for k in range(K)) < TOL


def test_an_elastic_row_is_refused_not_run_with_another_rule():
    """EASGD's elastic mixing has no stacked form: refused naming the rule, never averaged."""
    from core.errors import UserInputError
    from empirical.algorithms import AlgorithmConfig
    from empirical.algorithms.stacked import check_supported

    with pytest.raises(UserInputError, match="elastic"):
        check_supported(AlgorithmConfig(name="easgd", H=2))
