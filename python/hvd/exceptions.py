"""The exceptions hvd raises, under Horovod's names (horovod.common.exceptions)."""


class HorovodInternalError(RuntimeError):
    """A collective failed while it ran: a peer died or timed out, the ranks disagreed on an
    op (the message names the tensor, the field and the ranks), or a peer is gone (exited, was
    killed or shut hvd down: the message names it). Raised when a handle is waited on
    (synchronize, or the sync form of an op), and at submit once a peer is gone."""


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod's elastic mode raises this when hosts change; hvd has no elastic mode, so it is
    never raised, but scripts that catch it import it."""

    def __init__(self, skip_sync=False):
        super().__init__()
        self.skip_sync = skip_sync
