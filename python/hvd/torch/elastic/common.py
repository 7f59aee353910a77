"""The framework-independent half of elastic training, Horovod's horovod.common.elastic (that
module is this one): State, ObjectState, the run loop run_fn and HostUpdateResult. The package
docstring (hvd/torch/elastic/__init__.py) says where hvd departs from Horovod, and why.

Two facts the ranks must agree on are agreed through collectives, never taken from rank 0:

* the rank a sync copies the state from: every State counts the commits it holds (a fresh
  worker holds none), and the lowest rank holding the most is the root;
* whether hosts changed: each rank's view (the runtime's pending notice, the notices queued in
  state._host_messages) is combined by a MAX allreduce, so every rank raises
  HostsUpdatedInterrupt at the same commit, or none does.
"""

import copy
import ctypes
import enum
import functools
import queue
import sys
import threading

import torch

from hvd import _capi
from hvd.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from hvd.torch.basics import Max, rank
from hvd.torch.functions import broadcast_object
from hvd.torch.mpi_ops import allgather, allreduce


class HostUpdateResult(enum.IntFlag):
    """What a host-change notice reports (Horovod's horovod.runner.elastic.worker one)."""

    no_update = 0
    removed = 1
    added = 2
    mixed = removed | added


# How often the notice thread asks the runtime for the leader's notice: each question is a
# store round trip per worker, and nothing waits on it (commit() asks the runtime itself), so
# once a second is enough for the scripts that watch state._host_messages.
_NOTICE_POLL_S = 1.0

# Tries at the next round before the run loop gives up. An init that failed (a peer died during
# its rendezvous, say) leaves no round half-joined: the next init asks the leader again and it
# forms another round. Each try ends within HVD_ELASTIC_TIMEOUT, so a leader that is gone cannot
# hold a worker for long.
_NEXT_ROUND_TRIES = 3


def _announced(lib):
    """(status, the round the leader announced to follow this process's round or 0 when none,
    what changed): one question to the runtime, which needs hvd.init()."""
    announced, change = ctypes.c_int(), ctypes.c_int()
    status = lib.elastic_pending(ctypes.byref(announced), ctypes.byref(change))
    return status, announced.value, HostUpdateResult(change.value & HostUpdateResult.mixed)


def _snapshot(values):
    """A copy that later changes to the live values do not reach; an object that cannot be
    copied is kept by reference (Horovod keeps every value by reference)."""
    snapshot = {}
    for name, value in values.items():
        try:
            snapshot[name] = copy.deepcopy(value)
        except Exception:  # a lock, a file, a module...: any failure of copy means "not copyable"
            snapshot[name] = value
    return snapshot


class State:
    """State kept in memory across workers: commit() saves it and checks for host changes,
    restore() goes back to the last commit, sync() makes every rank's state that of the rank
    holding the most commits.

    Args:
        bcast_object: broadcast_object(obj, root_rank=...) used to sync values (hvd.torch's by
            default).
        get_rank: the function giving this worker's rank (hvd.torch's rank by default).
    """

    def __init__(self, bcast_object=None, get_rank=None):
        self._bcast_object = bcast_object or broadcast_object
        self._rank = get_rank or rank
        # Host-change notices, (round, HostUpdateResult): the round orders them (Horovod: a
        # timestamp). _last_updated_timestamp is the newest one acted upon.
        self._host_messages = queue.Queue()
        self._last_updated_timestamp = 0
        self._round_acted_upon = 0  # the leader's newest announced round this state raised for
        self._reset_callbacks = []
        # How many commits this state holds: the newest state is on the ranks holding most.
        self._commit_serial = 0

    def register_reset_callbacks(self, callbacks):
        """Adds functions to call after each reset (a worker added or removed), once the state
        is synced: to rescale the learning rate with the new hvd.size(), for example."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        """Runs after the sync that follows a reset: drops the notices of the rounds before,
        then calls the reset callbacks, which see the synced state."""
        self._host_messages = queue.Queue()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        """Queues a host-change notice: `timestamp` orders notices (here: the leader's round)."""
        self._host_messages.put((timestamp, update_res))

    def commit(self):
        """Saves the state (the copy restore() returns to) and checks for host changes, raising
        HostsUpdatedInterrupt on every rank when hosts were added or removed. A commit copies
        the whole state (from the GPU too): committing every few batches trades the copies
        against the batches redone after a failure."""
        self.save()
        self._commit_serial += 1
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt when the leader announced a new round (hosts added or
        removed) or a notice was queued in state._host_messages, on every rank alike: the
        ranks' views are combined by a MAX allreduce, so a rank that saw a change first brings
        the others along. A collective: every rank calls it at the same point.

        Whether to interrupt comes from the runtime's round numbers (the leader announced a
        round after the one this rank joined) and from queued notices newer than the last one
        acted upon; _last_updated_timestamp keeps Horovod's meaning, the newest notice stamp
        processed, whatever its scale (Horovod's scripts queue wall-clock stamps), so a stamp
        never hides a later round."""
        lib = _capi.lib()
        want = 0
        newest = float(self._last_updated_timestamp)
        announced = 0
        if lib.elastic_enabled():
            status, announced, _ = _announced(lib)
            lib.check(status)
            if announced > max(lib.elastic_round(), self._round_acted_upon):
                want = 1
                newest = max(newest, float(announced))
        while True:
            try:
                stamp, _ = self._host_messages.get_nowait()
            except queue.Empty:
                break
            if float(stamp) > self._last_updated_timestamp:
                want = 1
                newest = max(newest, float(stamp))
        # What changed is not agreed on: it would only decide Horovod's skip_sync, and hvd
        # syncs after every reset.
        view = torch.tensor([want, newest, announced], dtype=torch.float64)
        agreed_want, agreed_newest, agreed_round = allreduce(
            view, op=Max, name="hvd.elastic.host_updates").tolist()
        self._round_acted_upon = max(self._round_acted_upon, int(agreed_round))
        if agreed_newest > self._last_updated_timestamp:
            self._last_updated_timestamp = (int(agreed_newest)
                                            if agreed_newest.is_integer() else agreed_newest)
        if agreed_want:
            raise HostsUpdatedInterrupt(skip_sync=False)

    def save(self):
        """Saves the state in host memory (no collective)."""
        raise NotImplementedError()

    def restore(self):
        """Goes back to the last commit, undoing every change made since."""
        raise NotImplementedError()

    def sync(self):
        """Makes every rank's state that of the agreed root (a collective)."""
        raise NotImplementedError()

    def reset(self):
        """Called after each reset, before the sync: rebuild what depends on the old round."""

    def _agree_on_root(self):
        """(root, its commit serial, the newest notice acted upon by any rank): the root is the
        lowest rank holding the most commits, the same on every rank (one allgather)."""
        # float64: a stamp may be a wall-clock time (Horovod's scripts queue those).
        mine = torch.tensor([[self._commit_serial, self._last_updated_timestamp]],
                            dtype=torch.float64)
        views = allgather(mine, name="hvd.elastic.commits").tolist()
        serials = [int(serial) for serial, _ in views]
        most = max(serials)
        stamp = max(stamp for _, stamp in views)
        return serials.index(most), most, int(stamp) if stamp.is_integer() else stamp


class ObjectState(State):
    """State of plain Python values: every keyword argument becomes an attribute, saved by
    commit(), put back by restore() and broadcast by sync().

    Args:
        bcast_object, get_rank: as for State (hvd.torch's by default).
        kwargs: the values, exposed as attributes of the same names.
    """

    def __init__(self, bcast_object=None, get_rank=None, **kwargs):
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)
        self._saved_state = _snapshot(kwargs)
        self._set_attrs()

    def save(self):
        self._saved_state = _snapshot({name: getattr(self, name) for name in self._saved_state})

    def restore(self):
        self._set_attrs()

    def sync(self):
        """Every rank takes the root's values (the root: the lowest rank holding the most
        commits), saves them and holds the root's count of commits from then on."""
        root, serial, stamp = self._agree_on_root()
        self._sync_from(root)
        self.save()  # what a restore before the next commit returns to: the synced state
        self._commit_serial = serial
        self._last_updated_timestamp = stamp

    def _sync_from(self, root):
        # The live values, not the saved ones: after a HostsUpdatedInterrupt raised by
        # check_host_updates() alone they are newer than the last commit, like the model's.
        if self._saved_state:
            values = {name: getattr(self, name) for name in self._saved_state}
            for name, value in self._bcast_object(values, root_rank=root).items():
                setattr(self, name, value)

    def _set_attrs(self):
        for name, value in _snapshot(self._saved_state).items():
            setattr(self, name, value)


class _NoticeThread:
    """Horovod's workers are sent the driver's notices; here a thread asks the runtime for the
    leader's (once a second, while the run loop runs) and queues each new one in
    state._host_messages, which Horovod's scripts watch. commit() asks the runtime itself, so
    nothing depends on this thread's timing."""

    def __init__(self, state):
        self._state = state
        self._stop = threading.Event()
        self._queued = 0
        self._thread = threading.Thread(target=self._run, name="hvd.elastic.notices",
                                        daemon=True)
        self._thread.start()

    def _run(self):
        lib = _capi.lib()
        while not self._stop.wait(_NOTICE_POLL_S):
            if not lib.is_initialized():
                continue  # between rounds
            status, announced, change = _announced(lib)
            if status != _capi.OK:
                continue  # shut down meanwhile; the run loop's own calls report failures
            if announced > self._queued:
                self._queued = announced
                self._state.on_hosts_updated(announced, change)

    def stop(self):
        self._stop.set()
        # A store that stopped answering can hold the thread in its question; it is a daemon.
        self._thread.join(timeout=5 * _NOTICE_POLL_S)


def _next_round(reset):
    """Runs reset() (shutdown, then init, which joins the leader's next round). A worker the
    leader removed from the job leaves: exit status 0, which the leader ignores."""
    lib = _capi.lib()
    for attempt in range(1, _NEXT_ROUND_TRIES + 1):
        try:
            reset()
            return
        except Exception as e:  # init reports a removal as ValueError, a failure otherwise
            if lib.elastic_removed():
                # libhvd's message says it was removed, after which round and why.
                print("hvd: %s" % e, file=sys.stderr, flush=True)
                sys.exit(0)
            retry = (isinstance(e, HorovodInternalError) and lib.elastic_enabled()
                     and attempt < _NEXT_ROUND_TRIES)
            if not retry:
                raise


def run_fn(func, reset):
    """The run loop of hvd.elastic.run: func(state, ...) is called after a sync of `state`.
    A HorovodInternalError (a peer failed) restores the last commit; a HostsUpdatedInterrupt
    (hosts changed; raised by a commit, which saved the state) restores nothing. Either way
    reset() moves the job to its next round, the state is synced from the agreed root, the
    reset callbacks run, and func is called again."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        notices = _NoticeThread(state) if _capi.lib().elastic_enabled() else None
        try:
            after_reset = False
            while True:
                if after_reset:
                    _next_round(reset)
                    state.reset()
                try:
                    state.sync()
                    if after_reset:
                        state.on_reset()
                    return func(state, *args, **kwargs)
                except HorovodInternalError:
                    state.restore()
                except HostsUpdatedInterrupt:
                    pass  # skip_sync is not honoured: every rank syncs (Horovod #3494)
                after_reset = True
        finally:
            if notices is not None:
                notices.stop()

    return wrapper


__all__ = ["HostUpdateResult", "ObjectState", "State", "run_fn"]
