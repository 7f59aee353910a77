"""horovod.common.elastic is hvd's (hvd.torch.elastic.common: State, ObjectState, run_fn,
HostUpdateResult): this module replaces itself by it in sys.modules, so both names reach the
same classes."""

import sys

import hvd.torch.elastic.common

sys.modules[__name__] = hvd.torch.elastic.common
