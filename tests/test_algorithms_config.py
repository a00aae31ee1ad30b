"""Single-process tests of empirical.algorithms: configuration, validation, and the exact
per-step semantics (pull, lr scaling, sync timing, outer steps, state round trip).

With no process group the collectives are no-ops (K = 1), so every formula can be checked
exactly in double precision. Multi-process behaviour is in test_algorithms_dist.py.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from core.errors import UserInputError
from core.validation import ParameterError
from empirical.algorithms import (
    AlgorithmConfig,
    DDPAlgorithm,
    LocalAlgorithm,
    build_algorithm,
    check_stability,
)
from empirical.algorithms.flat import FlatLayout
from theory.coins import pull_coins

torch.set_num_threads(1)
DT = torch.float64


def make_model(seed: int = 0, bn: bool = False) -> nn.Module:
    layers: list[nn.Module] = [nn.Linear(3, 4)]
    if bn:
        layers.append(nn.BatchNorm1d(4))
    layers += [nn.Tanh(), nn.Linear(4, 2)]
    model = nn.Sequential(*layers).to(DT)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g, dtype=DT))
    return model


def batch(t: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed * 100003 + t)
    return torch.randn(5, 3, generator=g, dtype=DT), torch.randn(5, 2, generator=g, dtype=DT)


def flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def run(algo, model: nn.Module, steps: int, seed: int = 1, start: int | None = None) -> list:
    infos = []
    for _ in range(steps):
        t = algo.t if start is None else start
        if algo.next_action() == "grad":
            x, y = batch(t, seed)
            nn.functional.mse_loss(algo.model(x), y).backward()
        infos.append(algo.step())
    return infos


# ---------------------------------------------------------------------- configuration


def test_defaults_and_diloco_preset():
    c = AlgorithmConfig(name="palsgd", H=4, p=0.2, eta=1.0)
    assert (c.outer, c.gamma, c.mu) == ("average", 1.0, 0.0)
    d = AlgorithmConfig(name="diloco", H=8)
    assert (d.outer, d.gamma, d.mu) == ("nesterov", 0.7, 0.9)
    assert d.uses_anchor and not AlgorithmConfig(name="local_sgd", H=2).uses_anchor
    assert AlgorithmConfig(name="palsgd").uses_anchor
    assert d.replace(H=3).H == 3 and d.replace(H=3).outer == "nesterov"


@pytest.mark.parametrize(
    "kw, bad",
    [
        ({"name": "palsgd", "H": 0}, "H"),
        ({"name": "palsgd", "H": 2.5}, "H"),
        ({"name": "palsgd", "p": 1.0}, "p"),
        ({"name": "palsgd", "p": -0.1}, "p"),
        ({"name": "palsgd", "eta": -1.0}, "eta"),
        ({"name": "palsgd", "T0": -1}, "T0"),
        ({"name": "palsgd", "outer": "sgd", "gamma": 0.0}, "gamma"),
        ({"name": "palsgd", "outer": "sgd", "mu": 1.0}, "mu"),
        ({"name": "palsgd", "outer": "nesterov", "mu": 0.0}, "mu"),
        ({"name": "palsgd", "outer_steps_per_sync": 0}, "outer_steps_per_sync"),
        ({"name": "palsgd", "sync_offset": -1}, "sync_offset"),
        ({"name": "palsgd", "seed": -3}, "seed"),
        ({"name": "palsgd", "clip_grad_norm": 0.0}, "clip_grad_norm"),
        ({"name": "diloco", "p": 0.2}, "p"),
        ({"name": "local_sgd", "T0": 5}, "T0"),
    ],
)
def test_bad_values_name_the_parameter(kw, bad):
    with pytest.raises(ParameterError) as exc:
        AlgorithmConfig(**kw)
    assert exc.value.name == bad
    assert f"'{bad}'" in str(exc.value)


@pytest.mark.parametrize(
    "kw, word",
    [
        ({"name": "slowmo_ar_sgd"}, "name"),
        ({"name": "palsgd", "outer": "adam"}, "outer"),
        ({"name": "palsgd", "coins": "common"}, "coins"),
        ({"name": "palsgd", "buffers": "sum"}, "buffers"),
        ({"name": "palsgd", "gamma": 0.5}, "outer='average'"),
    ],
)
def test_unknown_choices_are_user_errors(kw, word):
    with pytest.raises(UserInputError, match=word):
        AlgorithmConfig(**kw)


def test_reference_faithful_preset():
    c = AlgorithmConfig.reference_faithful(
        H=32, T0=32, p=0.2, eta=1.0, A=16, outer="nesterov", gamma=0.1, mu=0.9
    )
    assert c.name == "palsgd" and c.coins == "shared" and c.pull_first_tensor_only
    assert c.discard_batch_on_pull and c.sync_offset == 1 and c.outer_steps_per_sync == 16
    assert c.buffers == "anchor"
    d = AlgorithmConfig.reference_faithful(name="diloco", H=8)
    assert d.sync_offset == 0 and d.outer_steps_per_sync == 1 and d.coins == "independent"
    # every quirk can still be switched off individually
    e = AlgorithmConfig.reference_faithful(p=0.2, eta=1.0, coins="independent")
    assert e.coins == "independent" and e.pull_first_tensor_only


def test_check_stability_statuses():
    cfg = AlgorithmConfig(name="palsgd", H=4, p=0.2, eta=1.0)
    assert check_stability(cfg, 0.1).status == "ok"  # c = 0.5
    assert check_stability(cfg, 0.3).status == "overshoot"  # c = 1.5
    rep = check_stability(cfg, 0.5)  # c = 2.5
    assert rep.status == "unstable" and rep.coefficient == pytest.approx(2.5)
    assert "alpha*eta/p" in rep.message
    with pytest.raises(ParameterError) as exc:
        check_stability(cfg, 0.5, strict=True)
    assert exc.value.name == "eta"
    assert check_stability(AlgorithmConfig(name="diloco", H=4), 10.0).coefficient is None
    with pytest.raises(ParameterError):
        check_stability(cfg, 0.0)


def test_flat_layout_round_trip_and_offsets():
    ts = [torch.arange(6.0).view(2, 3), torch.tensor([7.0]), torch.zeros(0), torch.ones(2, 2)]
    lay = FlatLayout(ts, offset=3)
    assert lay.numel == 11 and lay.offsets == [3, 9, 10, 10]
    buf = torch.full((16,), -1.0, dtype=torch.float64)
    lay.gather(ts, buf)
    assert buf[:3].eq(-1).all() and buf[14:].eq(-1).all()
    assert buf[3:14].tolist() == list(range(6)) + [7.0, 1.0, 1.0, 1.0, 1.0]
    out = [torch.empty_like(t) for t in ts]
    lay.scatter(buf * 2, out)
    for a, b in zip(out, ts, strict=True):
        assert torch.equal(a, 2 * b)


# ---------------------------------------------------------------------- step semantics


def _palsgd(model, p=0.5, eta=1.0, H=100, lr=0.1, **kw):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    cfg = AlgorithmConfig(name="palsgd", H=H, p=p, eta=eta, **kw)
    return build_algorithm(cfg, model, opt), opt


def _first_step_of(algo, action: str, limit: int = 200) -> int:
    cfg = algo.config
    for t in range(algo.t, algo.t + limit):
        if bool(pull_coins(cfg.seed, cfg.p, t, 0, shared=cfg.coins == "shared")) == (
            action == "pull"
        ):
            return t
    raise AssertionError("no such step")


def test_next_action_is_the_shared_coin_and_pure():
    model = make_model()
    algo, _ = _palsgd(model, p=0.3, seed=11)
    expected = pull_coins(11, 0.3, np.arange(60), 0)
    got = []
    for _ in range(60):
        a1, a2 = algo.next_action(), algo.next_action()
        assert a1 == a2
        got.append(a1 == "pull")
        run(algo, model, 1)
    assert got == expected.tolist()
    assert algo.stats["pull_steps"] == int(expected.sum())
    assert algo.stats["grad_steps"] == 60 - int(expected.sum())


def test_gradient_step_uses_alpha_over_one_minus_p_and_restores_lr():
    model = make_model()
    algo, opt = _palsgd(model, p=0.5, lr=0.1)
    target = _first_step_of(algo, "grad")
    run(algo, model, target)  # move to the first gradient step
    x0 = flat(model)
    x, y = batch(algo.t)
    nn.functional.mse_loss(model(x), y).backward()
    g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    assert algo.next_action() == "grad"
    algo.step()
    torch.testing.assert_close(flat(model), x0 - (0.1 / (1 - 0.5)) * g, rtol=0, atol=1e-15)
    assert opt.param_groups[0]["lr"] == 0.1
    assert all(p.grad is None for p in model.parameters())


def test_pull_formula_on_every_tensor_with_group_lrs():
    model = make_model()
    opt = torch.optim.SGD(
        [
            {"params": model[0].parameters(), "lr": 0.1},
            {"params": model[2].parameters(), "lr": 0.03},
        ]
    )
    cfg = AlgorithmConfig(name="palsgd", H=1000, p=0.4, eta=2.0, seed=3)
    algo = build_algorithm(cfg, model, opt)
    run(algo, model, 6)  # some local progress, so x != z
    z = [v.clone() for v in algo.anchor_state_dict().values()]
    run(algo, model, _first_step_of(algo, "pull") - algo.t)
    before = [p.detach().clone() for p in model.parameters()]
    assert algo.next_action() == "pull"
    info = algo.step()
    assert info.action == "pull" and not info.synced
    for i, (b, zz, p) in enumerate(zip(before, z, model.parameters(), strict=True)):
        lr = 0.1 if i < 2 else 0.03
        c = lr * 2.0 / 0.4
        assert not torch.equal(b, zz)
        torch.testing.assert_close(p.detach(), b - c * (b - zz), rtol=0, atol=1e-14)


def test_pull_first_tensor_only_leaves_other_tensors_unchanged():
    model = make_model()
    algo, _ = _palsgd(model, p=0.4, eta=1.0, seed=5, pull_first_tensor_only=True)
    run(algo, model, 6)
    z0 = algo.anchor_state_dict()["0.weight"]
    run(algo, model, _first_step_of(algo, "pull") - algo.t)
    before = [p.detach().clone() for p in model.parameters()]
    algo.step()
    after = list(model.parameters())
    c = 0.1 * 1.0 / 0.4
    torch.testing.assert_close(
        after[0].detach(), before[0] - c * (before[0] - z0), rtol=0, atol=1e-15
    )
    assert not torch.equal(after[0].detach(), before[0])
    for b, a in zip(before[1:], after[1:], strict=True):
        assert torch.equal(a.detach(), b)


def test_eta_zero_pull_is_a_no_op():
    model = make_model()
    algo, _ = _palsgd(model, p=0.4, eta=0.0, seed=5)
    run(algo, model, _first_step_of(algo, "pull"))
    run(algo, model, 2)
    run(algo, model, _first_step_of(algo, "pull") - algo.t)
    before = flat(model)
    algo.step()
    assert torch.equal(flat(model), before)


@pytest.mark.parametrize("offset", [0, 1, 3])
def test_sync_timing_follows_the_offset_formula(offset):
    model = make_model()
    cfg = AlgorithmConfig(name="post_local_sgd", H=4, T0=2, sync_offset=offset)
    algo = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=0.05))
    infos = run(algo, model, 20)
    synced = [i for i, inf in enumerate(infos) if inf.synced]
    expected = [s for s in range(20) if s >= 2 and (s - 2 + 1 + offset) % 4 == 0]
    assert synced == expected and algo.stats["syncs"] == len(expected)
    assert [inf.t for inf in infos] == list(range(1, 21))


def test_authors_palsgd_offset_syncs_when_t_plus_one_divisible_by_H():
    # reference-implementation.md 3.6: sync right after the step making global_step = H-1 (mod H)
    model = make_model()
    cfg = AlgorithmConfig.reference_faithful(H=8, T0=8, p=0.0)
    algo = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=0.05))
    infos = run(algo, model, 40)
    assert [inf.t for inf in infos if inf.synced] == [15, 23, 31, 39]


@pytest.mark.parametrize("A", [1, 4])
def test_outer_steps_per_sync_matches_repeated_nesterov_formula(A):
    """reference-implementation.md 4: per sync, m <- mu^A m + Delta,
    z <- z - gamma*(Delta + (mu + ... + mu^A) m)."""
    gamma, mu = 0.3, 0.8
    model = make_model()
    cfg = AlgorithmConfig(name="diloco", H=3, gamma=gamma, mu=mu, outer_steps_per_sync=A)
    algo = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=0.1))
    seen = []
    orig = algo.sync.run

    def spy(s):
        seen.append((algo.z.clone(), flat(model)))
        orig(s)
        seen[-1] += (algo.z.clone(), flat(model))

    algo.sync.run = spy
    run(algo, model, 9)
    assert len(seen) == 3
    m = torch.zeros_like(seen[0][0])
    c = sum(mu**k for k in range(1, A + 1))
    for z_before, x, z_after, x_after in seen:
        delta = z_before - x
        m = mu**A * m + delta
        torch.testing.assert_close(
            z_after, z_before - gamma * (delta + c * m), rtol=1e-12, atol=1e-14
        )
        assert torch.equal(x_after, z_after)  # every worker restarts from z


def test_outer_average_equals_mean_and_pulls_after_sync_are_no_ops():
    model = make_model()
    algo, _ = _palsgd(model, p=0.5, eta=1.0, H=3, seed=2)
    infos = run(algo, model, 3)
    assert infos[-1].synced
    torch.testing.assert_close(algo.z, flat(model), rtol=0, atol=0)
    if algo.next_action() == "pull":
        before = flat(model)
        algo.step()
        assert torch.equal(flat(model), before)


def test_buffer_policies_single_process():
    for policy in ("average", "anchor", "local"):
        model = make_model(bn=True)
        cfg = AlgorithmConfig(name="local_sgd", H=2, buffers=policy)
        algo = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=0.05))
        start = model[1].running_mean.clone()
        run(algo, model, 1)
        x, y = batch(1)
        nn.functional.mse_loss(model(x), y).backward()
        pre = model[1].running_mean.clone()
        assert not torch.equal(pre, start)
        assert algo.step().synced
        post = model[1].running_mean
        if policy == "anchor":  # the authors' Q10: reset to the anchor's stale buffers
            assert torch.equal(post, start)
        else:  # K = 1: the average is the rank's own value
            assert torch.equal(post, pre)
        anchor_rm = algo.anchor_state_dict()["1.running_mean"]
        assert torch.equal(anchor_rm, start if policy == "anchor" else pre)


def test_state_dict_round_trip_continues_identically():
    cfg = AlgorithmConfig(
        name="palsgd",
        H=3,
        p=0.3,
        eta=1.5,
        T0=2,
        outer="nesterov",
        gamma=0.7,
        mu=0.9,
        seed=4,
        buffers="average",
    )

    def fresh():
        model = make_model(bn=True)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        return model, opt, build_algorithm(cfg, model, opt)

    model, opt, algo = fresh()
    run(algo, model, 7)
    saved = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()), algo.state_dict())
    run(algo, model, 8)
    ref = flat(model)
    ref_stats = dict(algo.stats)

    model2, opt2, algo2 = fresh()
    model2.load_state_dict(saved[0])
    opt2.load_state_dict(saved[1])
    algo2.load_state_dict(saved[2])
    assert algo2.t == 7
    run(algo2, model2, 8)
    assert torch.equal(flat(model2), ref)
    for key in ("grad_steps", "pull_steps", "syncs", "outer_steps"):
        assert algo2.stats[key] == ref_stats[key]
    assert algo2.stats["pull_steps"] > 0 and algo2.stats["syncs"] >= 4


def test_load_state_dict_rejects_a_different_algorithm():
    model = make_model()
    a = build_algorithm(
        AlgorithmConfig(name="diloco", H=3), model, torch.optim.SGD(model.parameters(), lr=0.1)
    )
    b = build_algorithm(
        AlgorithmConfig(name="post_local_sgd", H=3, T0=2),
        make_model(),
        torch.optim.SGD(make_model().parameters(), lr=0.1),
    )
    with pytest.raises(UserInputError, match="name"):
        b.load_state_dict(a.state_dict())


def test_memory_accounting_anchor_only_when_needed():
    def mem(**kw):
        model = make_model()
        algo = build_algorithm(
            AlgorithmConfig(**kw), model, torch.optim.SGD(model.parameters(), lr=0.1)
        )
        run(algo, model, 4)
        return algo.memory_bytes()

    d = sum(p.numel() for p in make_model().parameters()) * 8
    local = mem(name="local_sgd", H=2)
    pal = mem(name="palsgd", H=2, p=0.2, eta=1.0)
    dil = mem(name="diloco", H=2)
    assert local["anchor"] == 0 and pal["anchor"] == d and dil["anchor"] == d
    assert pal["outer_state"] == 0 and dil["outer_state"] == d
    assert pal["work_buffer"] == local["work_buffer"]


def test_single_process_ddp_uses_the_bare_model():
    model = make_model()
    algo = build_algorithm(
        AlgorithmConfig(name="ddp"), model, torch.optim.SGD(model.parameters(), lr=0.1)
    )
    assert isinstance(algo, DDPAlgorithm) and algo.model is model
    infos = run(algo, model, 3)
    assert [i.t for i in infos] == [1, 2, 3] and algo.stats["allreduce_calls"] == 0
    assert isinstance(
        build_algorithm(
            AlgorithmConfig(name="local_sgd", H=2),
            make_model(),
            torch.optim.SGD(make_model().parameters(), lr=0.1),
        ),
        LocalAlgorithm,
    )


def test_clip_grad_norm_is_applied_before_the_inner_step():
    model = make_model()
    cfg = AlgorithmConfig(name="local_sgd", H=100, clip_grad_norm=1e-3)
    algo = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=1.0))
    x0 = flat(model)
    run(algo, model, 1)
    step = (flat(model) - x0).norm().item()
    assert step == pytest.approx(1e-3, rel=1e-6)
