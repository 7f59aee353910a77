"""horovod.common.exceptions: hvd's exception classes under Horovod's module name."""

from hvd.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
