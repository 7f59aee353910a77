"""The exceptions hvd raises, under Horovod's names (horovod.common.exceptions)."""


class HorovodInternalError(RuntimeError):
    """A collective failed while it ran: a peer died or timed out, the ranks disagreed on an
    op (the message names the tensor, the field and the ranks), or hvd was shut down. Raised
    when a handle is waited on (synchronize, or the sync form of an op)."""


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod's elastic mode raises this when hosts change; hvd has no elastic mode, so it is
    never raised, but scripts that catch it import it."""

    def __init__(self, skip_sync=False):
        super().__init__()
        self.skip_sync = skip_sync
