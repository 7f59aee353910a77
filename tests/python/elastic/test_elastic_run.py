"""hvd.elastic.run in a job of every rank (plain hvdrun, so a reset re-initialises the same job):
after a HorovodInternalError the last commit comes back, after a HostsUpdatedInterrupt the
state stays as its commit saved it; either way the state is synced again and the reset
callbacks run after that sync, seeing the synced state. A worker the leader removed leaves with
exit status 0 and one line on stderr. The runtime's elastic queries are played where a test
needs them (monkeypatch), since this job is not elastic."""

import sys

import pytest
import torch

import hvd.torch as hvd
from hvd import _capi
from hvd.torch.elastic import common


def test_after_a_failure_the_commit_is_restored_synced_and_the_callbacks_see_it():
    torch.manual_seed(hvd.rank())
    net = torch.nn.Linear(3, 1)
    state = hvd.elastic.TorchState(net, epoch=0, batch=0)
    calls, seen = [], []

    def on_reset():
        seen.append((state.epoch, state.batch, net.weight.detach().clone(), hvd.size()))

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state, failures):
        calls.append((state.epoch, state.batch))
        if len(calls) == 1:
            # Rank-own values committed; the sync after the reset must pick rank 0's.
            state.epoch, state.batch = 10 + hvd.rank(), 20 + hvd.rank()
            with torch.no_grad():
                net.weight.fill_(float(hvd.rank() + 1))
            state.commit()
            state.batch = 99  # not committed: the failure drops it
            raise hvd.HorovodInternalError("a peer failed (played)")
        return failures

    assert train(state, "done") == "done"
    assert calls == [(0, 0), (10, 20)]
    assert len(seen) == 1
    epoch, batch, weight, size = seen[0]
    assert (epoch, batch, size) == (10, 20, hvd.size())
    assert torch.equal(weight, torch.ones_like(weight))  # rank 0's weights
    # hvd works after the reset.
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == hvd.size()


def test_after_a_host_change_nothing_is_restored_and_every_rank_resets_once():
    state = hvd.elastic.ObjectState(step=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(state.step)])
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(state.step)
        if len(calls) == 1:
            state.step = 3
            state.commit()
            state.step = 4 + hvd.rank()  # not committed, yet kept: no failure happened
            if hvd.rank() == hvd.size() - 1:
                state.on_hosts_updated(2, hvd.elastic.HostUpdateResult.removed)
            state.check_host_updates()  # raises on every rank
            pytest.fail("check_host_updates did not raise HostsUpdatedInterrupt")
        return state.step

    assert train(state) == 4  # rank 0's live value
    assert calls == [0, 4] and resets == [4]
    assert state._last_updated_timestamp == 2


def test_notices_reach_host_messages_while_the_run_loop_runs(monkeypatch):
    # Horovod's test scripts wait for state._host_messages to fill; the leader's notice is
    # played by hvd_elastic_pending: round 4 once rank 0's function has started.
    lib = _capi.lib()
    started = []

    def pending(round_, change):
        round_._obj.value = 4 if started else 0
        change._obj.value = 2 if started else 0
        return _capi.OK

    monkeypatch.setattr(lib, "elastic_enabled", lambda: 1)
    monkeypatch.setattr(lib, "elastic_pending", pending)
    monkeypatch.setattr(common, "_NOTICE_POLL_S", 0.02)
    state = hvd.elastic.ObjectState(step=0)
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(state.step)
        if len(calls) == 1:
            started.append(True)
            notice = state._host_messages.get(timeout=10)
            assert notice == (4, hvd.elastic.HostUpdateResult.added)
            state._host_messages.put(notice)
            state.commit()
        return len(calls)

    assert train(state) == 2
    assert state._last_updated_timestamp == 4


def test_a_removed_worker_prints_one_line_and_exits_0(monkeypatch, capsys):
    lib = _capi.lib()
    monkeypatch.setattr(lib, "elastic_removed", lambda: 1)

    def reset():
        raise ValueError("this worker was removed from the elastic job after round 2: its host "
                         "b left the job or has fewer slots now")

    def train(state):
        raise hvd.HorovodInternalError("a peer failed (played)")

    state = hvd.elastic.ObjectState(step=0)
    with pytest.raises(SystemExit) as exited:
        common.run_fn(train, reset)(state)
    assert exited.value.code == 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["hvd: this worker was removed from the elastic job after round 2: its host b "
                   "left the job or has fewer slots now"]


def test_a_failed_reset_of_a_worker_not_removed_is_raised(monkeypatch):
    tries = []

    def reset():
        tries.append(1)
        raise hvd.HorovodInternalError("no rendezvous (played)")

    def train(state):
        raise hvd.HorovodInternalError("a peer failed (played)")

    state = hvd.elastic.ObjectState(step=0)
    with pytest.raises(hvd.HorovodInternalError, match="no rendezvous"):
        common.run_fn(train, reset)(state)
    assert tries == [1]  # not elastic: no second try
    monkeypatch.setattr(_capi.lib(), "elastic_enabled", lambda: 1)
    monkeypatch.setattr(common, "_NOTICE_POLL_S", 3600)
    with pytest.raises(hvd.HorovodInternalError, match="no rendezvous"):
        common.run_fn(train, reset)(state)
    assert len(tries) == 1 + common._NEXT_ROUND_TRIES
