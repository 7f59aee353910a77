"""The exceptions hvd raises, under Horovod's names (horovod.common.exceptions)."""


class HorovodInternalError(RuntimeError):
    """A collective failed while it ran: a peer died or timed out, the ranks disagreed on an
    op (the message names the tensor, the field and the ranks), or a peer is gone (exited, was
    killed or shut hvd down: the message names it). Raised when a handle is waited on
    (synchronize, or the sync form of an op), and at submit once a peer is gone."""


class HostsUpdatedInterrupt(RuntimeError):
    """Elastic mode: hosts were added or removed. state.commit() and state.check_host_updates()
    raise it on every rank of the job at the same call, and hvd.elastic.run answers it by moving
    to the next round without restoring the last commit (hvd.torch.elastic says how).

    skip_sync is Horovod's: True there when hosts were only removed, to skip the state sync
    after the reset. hvd accepts it and always syncs (skipping it deadlocks, Horovod #3494)."""

    def __init__(self, skip_sync=False):
        super().__init__()
        self.skip_sync = skip_sync
