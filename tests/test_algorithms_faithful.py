"""The reference-faithful mode against a line-by-line emulation of the authors' training loop.

The emulation follows the per-micro-batch semantics of the authors' PALSGD and DiLoCo
classes (docs/reference-faithful.md, from the authors' ``postadaptive_localsgd_decoupled.py``
and ``post_localsgd_decoupled.py``): one call per micro-batch, a counter of accumulated
micro-batches, the step counter ``global_step`` counting warm-up steps, the pull flag drawn
after each completed local step, and the sync test evaluated on every call of the local
phase (``(t + 1) % H == 0`` for PALSGD with ``is_intended_impl=False``: it also fires on
the next ``A - 1`` calls, each an outer step on a zero outer gradient followed by
``x <- z``; ``t % H == 0`` once per step for DiLoCo). The toolkit, given the same coins
through its coin-source hook, must produce the same iterates after every optimizer step,
for ``T0`` not a multiple of ``H`` and ``A > 1``. Single process, float64.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from core.errors import UserInputError
from empirical.algorithms import AlgorithmConfig, build_algorithm, recorded_coins

DT = torch.float64
LR, ETA, P, GAMMA, MU = 0.05, 1.0, 0.35, 0.5, 0.9


def make_model() -> nn.Module:
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).to(DT)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g, dtype=DT))
    return model


def micro_batch(i: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + i)
    return torch.randn(4, 3, generator=g, dtype=DT), torch.randn(4, 2, generator=g, dtype=DT)


def loss_fn(model: nn.Module, batch) -> torch.Tensor:
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


def flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def coin_trace(T: int, T0: int, seed: int = 3) -> np.ndarray:
    """Pull coins per step; the first local step is a gradient step, as in the authors' code
    (the flag starts False and is drawn after each completed step)."""
    c = np.random.default_rng(seed).random(T) < P
    c[T0] = False
    return c


def authors_loop(kind: str, T: int, T0: int, H: int, A: int, coins: np.ndarray) -> list:
    """Iterates after each completed optimizer step, by the authors' per-call semantics."""
    model = make_model()
    outer_model = copy.deepcopy(model)
    inner = torch.optim.SGD(model.parameters(), lr=LR)
    outer = torch.optim.SGD(outer_model.parameters(), lr=GAMMA, momentum=MU, nesterov=True)
    t, a, pull_next, use_ddp, call = 0, 0, False, True, 0
    out = []

    def outer_sync() -> None:
        with torch.no_grad():
            for zp, xp in zip(outer_model.parameters(), model.parameters(), strict=True):
                zp.grad = (zp - xp).clone()  # all-reduce mean over K = 1 worker
        outer.step()
        outer.zero_grad(set_to_none=True)
        model.load_state_dict(outer_model.state_dict())

    while t < T:
        batch = micro_batch(call)
        call += 1
        if t == T0 and use_ddp:
            use_ddp = False
            outer_model.load_state_dict(model.state_dict())
        elif t == T0:
            outer_model.load_state_dict(model.state_dict())  # repeated on every call, idempotent
        done = False
        if use_ddp:
            (loss_fn(model, batch) / A).backward()
            if a == A - 1:
                inner.step()
                inner.zero_grad(set_to_none=True)
                t += 1
                done = True
        elif kind == "palsgd" and pull_next:
            if a == A - 1:
                with torch.no_grad():  # Q1: the first parameter tensor only
                    xp, zp = next(iter(model.parameters())), next(iter(outer_model.parameters()))
                    xp.sub_(LR * ETA / P * (xp - zp))
                t += 1
                pull_next = bool(coins[t]) if t < T else False
                done = True
        else:
            (loss_fn(model, batch) / A).backward()
            if a == A - 1:
                scale = 1.0 / (1.0 - P) if kind == "palsgd" else 1.0
                for g in inner.param_groups:
                    g["lr"] = LR * scale
                inner.step()
                for g in inner.param_groups:
                    g["lr"] = LR
                inner.zero_grad(set_to_none=True)
                t += 1
                if kind == "palsgd":
                    pull_next = bool(coins[t]) if t < T else False
                done = True
        a = (a + 1) % A
        if not use_ddp:
            if kind == "palsgd" and (t + 1) % H == 0:
                outer_sync()  # is_intended_impl=False: fires on A consecutive calls
            elif kind == "diloco" and done and t > T0 and t % H == 0:
                outer_sync()
        if done:
            out.append(flat(model))
    return out


def toolkit_loop(cfg: AlgorithmConfig, T: int, A: int, coins=None) -> tuple[list, object]:
    model = make_model()
    algo = build_algorithm(
        cfg, model, torch.optim.SGD(model.parameters(), lr=LR), coin_source=coins
    )
    calls = iter(range(10**6))
    out = []
    for _ in range(T):
        algo.train_step(lambda: micro_batch(next(calls)), loss_fn, micro_batches=A)
        out.append(flat(model))
    return out, algo


@pytest.mark.parametrize(
    ("T0", "H", "A"),
    [(5, 4, 3), (6, 4, 2), (7, 4, 3), (3, 5, 4), (9, 3, 1)],
)
def test_palsgd_faithful_mode_equals_the_authors_loop(T0, H, A):
    T = 40
    coins = coin_trace(T, T0)
    cfg = AlgorithmConfig.reference_faithful(
        H=H, T0=T0, p=P, eta=ETA, outer="nesterov", gamma=GAMMA, mu=MU, A=A
    )
    assert cfg.sync_offset == (T0 + 1) % H and cfg.interleave_outer_steps
    mine, algo = toolkit_loop(cfg, T, A, recorded_coins(coins))
    ref = authors_loop("palsgd", T, T0, H, A, coins)
    assert len(mine) == len(ref) == T
    for s, (x, y) in enumerate(zip(mine, ref, strict=True)):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-13, msg=f"step {s}")
    assert algo.stats["pull_steps"] == int(coins[T0:].sum())
    assert algo.stats["syncs"] == sum(1 for s in range(T0, T) if (s + 2) % H == 0)


def test_the_fixed_offset_of_the_old_preset_is_wrong_when_T0_is_not_a_multiple_of_H():
    """The check above can fail: with the offset that is right for T0 = H the trajectories
    part."""
    T, T0, H, A = 30, 5, 4, 2
    coins = coin_trace(T, T0)
    cfg = AlgorithmConfig.reference_faithful(
        H=H,
        T0=T0,
        p=P,
        eta=ETA,
        outer="nesterov",
        gamma=GAMMA,
        mu=MU,
        A=A,
        sync_schedule="rounds",
        sync_offset=1,
    )
    mine, _ = toolkit_loop(cfg, T, A, recorded_coins(coins))
    ref = authors_loop("palsgd", T, T0, H, A, coins)
    assert max(float((x - y).abs().max()) for x, y in zip(mine, ref, strict=True)) > 1e-3


def test_interleaving_matters_for_A_above_one():
    """All A outer steps at once evaluate the next step's micro-batches at another point."""
    T, T0, H, A = 30, 5, 4, 3
    coins = coin_trace(T, T0)
    kw = dict(H=H, T0=T0, p=P, eta=ETA, outer="nesterov", gamma=GAMMA, mu=MU, A=A)
    at_once = AlgorithmConfig.reference_faithful(**kw, interleave_outer_steps=False)
    mine, _ = toolkit_loop(at_once, T, A, recorded_coins(coins))
    ref = authors_loop("palsgd", T, T0, H, A, coins)
    assert max(float((x - y).abs().max()) for x, y in zip(mine, ref, strict=True)) > 1e-6


@pytest.mark.parametrize(("T0", "H"), [(5, 4), (6, 3), (4, 4)])
def test_diloco_faithful_schedule_equals_the_authors_loop(T0, H):
    T, A = 30, 2
    cfg = AlgorithmConfig.reference_faithful(name="diloco", H=H, T0=T0, gamma=GAMMA, mu=MU)
    assert cfg.sync_offset == T0 % H
    mine, _ = toolkit_loop(cfg, T, A)
    ref = authors_loop("diloco", T, T0, H, A, np.zeros(T, dtype=bool))
    for s, (x, y) in enumerate(zip(mine, ref, strict=True)):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-13, msg=f"step {s}")


def test_derived_offset_conflicts_and_replace():
    c = AlgorithmConfig.reference_faithful(H=4, T0=5, p=0.2, eta=1.0)
    assert c.sync_offset == 2
    assert c.replace(T0=6).sync_offset == 3  # derived again, not carried over
    with pytest.raises(UserInputError, match="sync_offset"):
        AlgorithmConfig(name="palsgd", H=4, T0=5, sync_schedule="global_step", sync_offset=1)
    with pytest.raises(UserInputError, match="sync_schedule"):
        AlgorithmConfig(name="palsgd", H=4, sync_schedule="absolute")


# ----------------------------------------------------------------------------- coins, API


def test_coin_source_hook_callable_and_trace():
    model = make_model()
    cfg = AlgorithmConfig(name="palsgd", H=100, p=0.5, eta=1.0)

    def every_third(steps, worker):
        return np.asarray(steps) % 3 == 0

    algo = build_algorithm(
        cfg, model, torch.optim.SGD(model.parameters(), lr=LR), coin_source=every_third
    )
    actions = [algo.train_step(lambda: micro_batch(0), loss_fn).info.action for _ in range(9)]
    assert actions == ["pull", "grad", "grad"] * 3
    trace = np.array([0, 1, 1, 0], dtype=np.int8)
    model = make_model()
    algo = build_algorithm(
        cfg, model, torch.optim.SGD(model.parameters(), lr=LR), coin_source=trace
    )
    actions = [algo.train_step(lambda: micro_batch(0), loss_fn).info.action for _ in range(4)]
    assert actions == ["grad", "pull", "pull", "grad"]
    with pytest.raises(UserInputError, match="4 steps; step 4 has no coin"):
        algo.next_action()
    with pytest.raises(UserInputError, match="shape"):
        recorded_coins(np.zeros((2, 2, 2)))
    with pytest.raises(UserInputError, match="0/1"):
        recorded_coins(np.array([0.5, 1.0]))


def test_train_step_discards_batches_on_pulls_only_when_asked():
    for discard in (False, True):
        model = make_model()
        cfg = AlgorithmConfig(name="palsgd", H=100, p=0.5, eta=1.0, discard_batch_on_pull=discard)
        algo = build_algorithm(
            cfg,
            model,
            torch.optim.SGD(model.parameters(), lr=LR),
            coin_source=np.array([1, 0, 1, 0], dtype=bool),
        )
        drawn = [
            algo.train_step(lambda: micro_batch(0), loss_fn, micro_batches=3).batches
            for _ in range(4)
        ]
        assert drawn == ([3, 3, 3, 3] if discard else [0, 3, 0, 3])


def test_backward_on_a_pull_step_warns_and_is_counted():
    model = make_model()
    cfg = AlgorithmConfig(name="palsgd", H=100, p=0.5, eta=1.0)
    algo = build_algorithm(
        cfg,
        model,
        torch.optim.SGD(model.parameters(), lr=LR),
        coin_source=np.array([1, 0], dtype=bool),
    )
    loss_fn(model, micro_batch(0)).backward()  # wrong: step 0 is a pull step
    with pytest.warns(RuntimeWarning, match="pull step but the parameters hold gradients"):
        info = algo.step()
    assert info.action == "pull" and algo.stats["discarded_backward_steps"] == 1
    assert all(p.grad is None for p in model.parameters())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss_fn(model, micro_batch(1)).backward()
        algo.step()  # a gradient step: no warning
