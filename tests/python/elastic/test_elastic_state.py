"""hvd.elastic's State, ObjectState and TorchState in a job of every rank: restore() gives the
committed values back (model, SGD momentum and Adam state, plain values, a value changed in
place), sync() copies from the lowest rank holding the most commits (not rank 0 blindly) and
leaves every rank identical, and a host-change notice seen by one rank interrupts every rank at
the same commit. Every rank starts from a state of its own, so that a sync that did nothing
fails the test."""

import copy

import pytest
import torch
import torch.nn.functional as F

import hvd.torch as hvd
from hvd import _capi


def model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))


def train(net, optimizers, steps, seed):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(6, 4, generator=g), torch.randn(6, 2, generator=g)
    for _ in range(steps):
        for opt in optimizers:
            opt.zero_grad()
        F.mse_loss(net(x), y).backward()
        for opt in optimizers:
            opt.step()


def make_state(seed):
    """A TorchState of a model, an SGD optimizer with momentum over its first layer, an Adam
    optimizer over its last one and plain values, all this rank's own after a few steps."""
    net = model(seed)
    sgd = torch.optim.SGD(net[0].parameters(), lr=0.1, momentum=0.9)
    adam = torch.optim.Adam(net[2].parameters(), lr=0.01)
    train(net, [sgd, adam], 2 + seed % 3, seed)
    state = hvd.elastic.TorchState(net, sgd, adam=adam, epoch=seed, batch=3 * seed,
                                   history=[seed])
    return state


def snapshot(state):
    return (copy.deepcopy(state.model.state_dict()), copy.deepcopy(state.optimizer.state_dict()),
            copy.deepcopy(state.adam.state_dict()), state.epoch, state.batch, list(state.history))


def flat(value):
    """Every tensor and number in a (nested) state dict, as one float64 vector."""
    if torch.is_tensor(value):
        return [value.detach().to(torch.float64).reshape(-1)]
    if isinstance(value, dict):
        return [t for key in sorted(value, key=str) for t in flat(value[key])]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in flat(item)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [torch.tensor([float(value)], dtype=torch.float64)]
    return []


def vector(snap):
    return torch.cat(flat(list(snap)))


def assert_equal_snapshots(got, want):
    assert got[3:] == want[3:]
    for a, b in zip(got[:3], want[:3]):
        assert torch.equal(torch.cat(flat(a)), torch.cat(flat(b)))


def test_restore_gives_the_committed_values_back_every_time():
    state = make_state(seed=20 + hvd.rank())
    state.commit()
    committed = snapshot(state)
    for _ in range(2):  # a second restore must not see what the steps after the first did
        train(state.model, [state.optimizer, state.adam], 3, seed=99)
        state.epoch += 1
        state.batch = -1
        state.history.append("changed in place")
        assert state.epoch != committed[3]
        state.restore()
        assert_equal_snapshots(snapshot(state), committed)
    # Momentum buffers and Adam's moments are there, and came back.
    assert all("momentum_buffer" in s for s in committed[1]["state"].values())
    assert all("exp_avg_sq" in s for s in committed[2]["state"].values())


def test_sync_copies_from_the_lowest_rank_holding_the_most_commits():
    # Every rank commits once; then the ranks other than the holders start afresh (a worker
    # that joined), so the holders hold the most commits: ranks 1 (and 2 at np 3).
    holders = [r for r in range(1, hvd.size()) if r <= 2]
    state = make_state(seed=40 + hvd.rank())
    state.commit()
    if hvd.rank() not in holders:
        state = make_state(seed=60 + hvd.rank())
    root = holders[0]
    root_values = hvd.broadcast_object(snapshot(state) if hvd.rank() == root else None, root,
                                       name="elastic.state.root_values")
    state.sync()
    mine = snapshot(state)
    assert_equal_snapshots(mine, root_values)
    everyone = hvd.allgather(vector(mine).unsqueeze(0), name="elastic.state.synced")
    assert torch.equal(everyone, everyone[:1].expand_as(everyone))
    assert state._commit_serial == 1  # every rank holds the root's count now
    # The synced state is what a restore returns to, on a fresh worker too.
    train(state.model, [state.optimizer, state.adam], 2, seed=7)
    state.epoch = -5
    state.restore()
    assert_equal_snapshots(snapshot(state), root_values)


def test_a_fresh_state_everywhere_syncs_from_rank_0():
    state = hvd.elastic.ObjectState(value=100 + hvd.rank())
    state.sync()
    assert state.value == 100


def test_object_state_with_horovods_arguments_saves_copies():
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, items=[1, 2])
    state.items.append(3)
    state.restore()
    assert state.items == [1, 2]
    state.items.append(4)
    state.commit()
    state.items.append(5)
    state.restore()
    assert state.items == [1, 2, 4]


def test_a_notice_seen_by_one_rank_interrupts_every_rank_at_the_same_commit():
    state = hvd.elastic.ObjectState(step=0)
    state.commit()  # nothing pending: no interrupt
    if hvd.rank() == hvd.size() - 1:
        state.on_hosts_updated(5, hvd.elastic.HostUpdateResult.added)
    with pytest.raises(hvd.HostsUpdatedInterrupt) as raised:
        state.commit()
    assert raised.value.skip_sync is False
    assert state._last_updated_timestamp == 5
    assert state._host_messages.empty()
    # An older notice, on one rank, is not news.
    if hvd.rank() == 0:
        state.on_hosts_updated(4, hvd.elastic.HostUpdateResult.removed)
    state.commit()
    # A rank that acted on no notice yet (a fresh worker) agrees with the others.
    fresh = hvd.elastic.ObjectState(step=0)
    if hvd.rank() == 0:
        fresh._last_updated_timestamp = 5
        fresh.on_hosts_updated(5, hvd.elastic.HostUpdateResult.added)
    fresh.commit()
    assert fresh._last_updated_timestamp == 5


def test_the_runtimes_pending_round_on_one_rank_interrupts_every_rank(monkeypatch):
    lib = _capi.lib()

    def pending(round_, change):  # what hvd_elastic_pending writes: round 7, hosts added
        round_._obj.value = 7 if hvd.rank() == 0 else 0
        change._obj.value = 2 if hvd.rank() == 0 else 0
        return _capi.OK

    monkeypatch.setattr(lib, "elastic_enabled", lambda: 1)
    monkeypatch.setattr(lib, "elastic_pending", pending)
    state = hvd.elastic.ObjectState(step=0)
    with pytest.raises(hvd.HostsUpdatedInterrupt):
        state.check_host_updates()
    assert state._last_updated_timestamp == 7
    state.check_host_updates()  # round 7 is acted upon: no second interrupt
