"""hvd.elastic: Horovod's elastic training API for hvd.torch (horovod.torch.elastic).

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()

    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
    state.register_reset_callbacks([on_state_reset])
    train(state)

A job in elastic mode (hvdrun --min-np or --host-discovery-script) lives through rounds, each
with its own ranks. When a peer fails, the pending op raises HorovodInternalError; when the
leader announces a new round (hosts added or removed), the next state.commit() or
state.check_host_updates() raises HostsUpdatedInterrupt. The run loop answers either: it
restores the last commit (after a failure only), shuts hvd down and initialises it again (the
runtime takes this worker's place in the next round from the leader), syncs the state, runs the
reset callbacks and calls the function again. A worker the leader removed prints one line and
exits with status 0. Outside elastic mode the decorator works the same (a reset re-initialises
the same job), so elastic scripts run unchanged under plain hvdrun.

Where hvd departs from Horovod 0.28.1 on purpose (Horovod's behaviour is a bug each time):

1. The state is always synced after a reset. HostsUpdatedInterrupt(skip_sync) is accepted, but
   skipping the sync when hosts were only removed deadlocks when ranks disagree (Horovod #3494).
2. The sync root is agreed, not rank 0: every State counts the commits it holds (a fresh worker
   holds none); sync() allgathers the counts, the lowest rank holding the most is the root, and
   every rank holds that count (and the synced state, saved) afterwards. Rank 0 of a new round
   may be a fresh worker whose state would overwrite everyone's.
3. Reset callbacks run after the sync, so they see the synced state (Horovod #2844: before it,
   a callback's work, such as a learning rate set for the new size, was overwritten).
4. check_host_updates() is agreed by every rank, not taken from rank 0: each rank's newest
   notice (the round the runtime says the leader announced, the notices in
   state._host_messages) and the newest it acted on are combined by a MAX allreduce, and
   every rank raises at the same commit when the first exceeds the second. Horovod broadcast
   rank 0's view, so a notice only another rank had seen was dropped.
5. state._host_messages holds (round, HostUpdateResult) notices ordered by the leader's round
   number (Horovod: the driver's timestamp); a thread queues them while the run loop runs.
6. ObjectState saves deep copies (Horovod kept references, so a value changed in place could
   not be restored) and syncs the live values (consistent with the model's, which Horovod
   also syncs live, after an interrupt raised by check_host_updates() between commits).
"""

import sys

from hvd.torch import process_sets
from hvd.torch.basics import shutdown
from hvd.torch.elastic.common import HostUpdateResult, ObjectState, State, run_fn
from hvd.torch.elastic.sampler import ElasticSampler
from hvd.torch.elastic.state import TorchState
from hvd.torch.mpi_ops import init


def run(func):
    """Decorates the training function, whose first argument is the State: before each call
    the state is synced across the ranks; after a failure or a host change the job moves to
    its next round and the function is called again (the module docstring says how). The
    function must not begin with a collective of its own outside the state's: a new worker
    would meet the others' sync with it."""
    return run_fn(func, _reset)


def _reset():
    # Static process sets name the ranks of the round they were made for, so a new round starts
    # with none; dynamic mode stays, and reset callbacks declare the new round's sets.
    dynamic = process_sets.dynamic_requested()
    shutdown()
    init(process_sets="dynamic" if dynamic else None)


# horovod.torch is hvd.torch itself (python/horovod/torch/__init__.py), whose package path is
# this package's parent: without these names, `import horovod.torch.elastic` would load a
# second copy of this package, with classes of its own.
for _name in ("", ".common", ".sampler", ".state"):
    sys.modules.setdefault("horovod.torch.elastic" + _name, sys.modules[__name__ + _name])

__all__ = ["ElasticSampler", "HostUpdateResult", "ObjectState", "State", "TorchState", "run",
           "run_fn"]
