"""hvd: distributed training over libhvd.

The framework bindings live in subpackages (``hvd.torch``); this package itself holds only
what they share: the C ABI of libhvd (``hvd._capi``) and the exceptions.
"""

from hvd.exceptions import HorovodInternalError, HostsUpdatedInterrupt

# hvd's own version. The Horovod API level it implements is horovod.__version__ ("0.28.1").
__version__ = "0.1.0"

__all__ = ["HorovodInternalError", "HostsUpdatedInterrupt", "__version__"]
