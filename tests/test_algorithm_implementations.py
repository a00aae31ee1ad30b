"""Every table row with a distributed name runs its own rule on torch.distributed: the class
its ``implementation`` names, the sync part of its ``sync`` rule; a row that its
implementation does not run is refused, never run by another rule (issue 29, item 4: giving
EASGD a distributed name used to run DDP silently; EASGD now runs its elastic sync,
``empirical.algorithms.elastic``, checked on K gloo processes in test_easgd_distributed.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from core.errors import UserInputError
from empirical.algorithms import (
    IMPLEMENTATIONS,
    RUNS,
    AlgorithmConfig,
    LocalAlgorithm,
    build_algorithm,
    implementation_for,
    implementation_of,
)
from empirical.algorithms.elastic import ElasticSync
from empirical.algorithms.local import SYNC_PARTS
from theory import algorithm as A

torch.set_num_threads(1)
DT = torch.float64
LR = 0.1
H = 3

#: what each implementation runs, written out here (not read from the code under test):
#: (implementation, local steps, sync rule)
RUNNABLE = {
    ("ddp", False, "average"),
    ("local", True, "average"),
    ("local", True, "outer"),
    ("local", True, "elastic"),
}
#: EASGD's elastic coefficient on one process (K = 1): Lemma 1's 2/(K+2), the simulator's
ELASTIC_A_K1 = 2.0 / 3.0

DISTRIBUTED_ROWS = [a for a in A.ALGORITHMS.values() if a.distributed]


def _model() -> nn.Module:
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).to(DT)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g, dtype=DT))
    return model


def _batch(t: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + t)
    return torch.randn(5, 3, generator=g, dtype=DT), torch.randn(5, 2, generator=g, dtype=DT)


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()


def _sgd_step(model: nn.Module, t: int) -> None:
    """One plain SGD step of ``model`` on batch ``t`` (the reference)."""
    x, y = _batch(t)
    model.zero_grad(set_to_none=True)
    nn.functional.mse_loss(model(x), y).backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= LR * p.grad


def _config(row: A.Algorithm) -> AlgorithmConfig:
    """A configuration of ``row`` whose sync rule shows: a warm-up where the row takes one,
    and for an ``"outer"`` row an outer update that is not averaging."""
    kw: dict = {"H": H, "T0": 1 if row.warms_up else 0}
    if row.sync == "outer":
        kw.update(outer=next(o for o in row.outers if o != "average"), gamma=0.5, mu=0.5)
    return AlgorithmConfig(name=row.distributed, **kw)


def test_the_table_names_every_distributed_rows_implementation_and_sync_rule():
    assert A.IMPLEMENTATION_KEYS == tuple(IMPLEMENTATIONS) == tuple(RUNS)
    assert DISTRIBUTED_ROWS
    for row in A.ALGORITHMS.values():
        assert row.sync in A.SYNC_RULES
        assert bool(row.distributed) == bool(row.implementation), row.name
        assert row.elastic == (row.sync == "elastic")
    with pytest.raises(ValueError, match="implementation go together"):
        dataclasses.replace(A.ALGORITHMS["easgd"], implementation="")
    with pytest.raises(ValueError, match="implementation go together"):
        dataclasses.replace(A.ALGORITHMS["slowmo_ar_sgd"], distributed="slowmo_ar_sgd")
    with pytest.raises(ValueError, match="its sync rule is 'outer'"):
        dataclasses.replace(A.ALGORITHMS["diloco"], sync="average")


@pytest.mark.parametrize("row", DISTRIBUTED_ROWS, ids=lambda r: r.distributed)
def test_every_distributed_row_runs_its_own_rule(row):
    """Build the row on one process, run a warm-up (if any) and one round of ``H`` steps,
    and compare with the row's rule written out: DDP is plain SGD with no sync; averaging
    (one worker) ends on the plain SGD trajectory after a sync; an outer update ends on
    ``outer_step`` applied to the anchor and the round's progress; the elastic mixing (one
    worker, ``a = 2/3``) ends on ``(1 - a) x + a z`` with the centre at ``(1 - a) z + a x``."""
    cfg = _config(row)
    model, ref = _model(), _model()
    algo = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=LR))
    assert type(algo) is IMPLEMENTATIONS[row.implementation]
    assert implementation_of(row.distributed) == row.implementation
    if row.local:
        assert type(algo.sync) is SYNC_PARTS[row.sync][0]
    T0 = cfg.warmup_steps
    for t in range(T0):
        _sgd_step(ref, t)
    z0 = _flat(ref)
    for t in range(T0, T0 + H):
        _sgd_step(ref, t)
    synced = []
    for t in range(T0 + H):
        x, y = _batch(t)
        nn.functional.mse_loss(algo.model(x), y).backward()
        synced.append(algo.step().synced)
    got, x_end = _flat(model), _flat(ref)
    if not row.local:  # every step averages the gradients: no rounds, no sync
        assert not any(synced)
        torch.testing.assert_close(got, x_end, rtol=0, atol=1e-12)
        return
    assert synced == [False] * (T0 + H - 1) + [True]
    if row.sync == "average":
        want = x_end
    elif row.sync == "elastic":
        a = ELASTIC_A_K1
        want = (1 - a) * x_end + a * z0
        torch.testing.assert_close(algo.z, (1 - a) * z0 + a * x_end, rtol=0, atol=1e-12)
        assert (want - x_end).abs().max() > 1e-3 and (want - algo.z).abs().max() > 1e-3
    else:
        want, _ = cfg.spec.outer_step(z0, torch.zeros_like(z0), z0 - x_end)
        assert (want - x_end).abs().max() > 1e-3  # the outer update shows
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("row", list(A.ALGORITHMS.values()), ids=lambda r: r.name)
@pytest.mark.parametrize("key", sorted(IMPLEMENTATIONS))
def test_an_implementation_runs_a_row_only_if_it_runs_its_rule(row, key):
    """Give any row a distributed name and any implementation: it is built by that class
    exactly when the class runs the row's local steps and sync rule, else refused."""
    named = dataclasses.replace(row, distributed=row.distributed or row.name, implementation=key)
    if (key, row.local, row.sync) in RUNNABLE:
        assert implementation_for(named) is IMPLEMENTATIONS[key]
        return
    with pytest.raises(UserInputError) as err:
        implementation_for(named)
    assert row.name in str(err.value) and (row.sync in str(err.value) or "local" in str(err.value))


def test_easgd_runs_its_elastic_sync_and_a_rule_without_a_part_is_refused(monkeypatch):
    """The trap, through the trainer's path (``AlgorithmConfig`` -> ``build_algorithm``):
    EASGD is built with its own sync part, never as DDP or with another rule's sync; and a
    row whose rule has no part (the control: the elastic part taken out of ``SYNC_PARTS``)
    is refused naming the rule, by every entry point."""
    cfg = AlgorithmConfig(name="easgd", H=2)
    assert cfg.spec.definition.elastic and implementation_of("easgd") == "local"
    model = _model()
    algo = build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=LR))
    assert type(algo) is LocalAlgorithm and type(algo.sync) is ElasticSync
    assert SYNC_PARTS["elastic"] == (ElasticSync, ElasticSync)
    monkeypatch.delitem(SYNC_PARTS, "elastic")
    model = _model()
    with pytest.raises(UserInputError, match="elastic"):
        build_algorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=LR))
    with pytest.raises(UserInputError, match="elastic"):
        implementation_of("easgd")
    with pytest.raises(UserInputError, match="elastic"):
        LocalAlgorithm(cfg, model, torch.optim.SGD(model.parameters(), lr=LR))


def test_the_elastic_sync_refuses_an_overlapped_sync():
    """EASGD's mixing is blocking: ``sync_delay > 0`` is refused naming the flag, by the
    configuration (the table's rule) and by the part itself."""
    with pytest.raises(UserInputError, match="sync_delay"):
        AlgorithmConfig(name="easgd", H=4, sync_delay=1)
    cfg = AlgorithmConfig(name="local_sgd", H=4, sync_delay=1)  # a config that carries one
    with pytest.raises(UserInputError, match="sync_delay"):
        ElasticSync(None, None, None, cfg, {}, None)  # type: ignore[arg-type]


def test_local_algorithm_refuses_a_row_without_local_steps():
    model = _model()
    with pytest.raises(UserInputError, match="no local steps"):
        LocalAlgorithm(AlgorithmConfig(name="ddp"), model, torch.optim.SGD(model.parameters()))
