"""horovod.torch is hvd.torch: this module replaces itself, and its submodules, by hvd's in
sys.modules, so both names reach one module with one state (handles, counters)."""

import sys

import hvd.torch
import hvd.torch.compression
import hvd.torch.functions
import hvd.torch.mpi_ops
import hvd.torch.optimizer
import hvd.torch.sync_batch_norm

for _sub in ("compression", "functions", "mpi_ops", "optimizer", "sync_batch_norm"):
    sys.modules[__name__ + "." + _sub] = sys.modules["hvd.torch." + _sub]
sys.modules[__name__] = hvd.torch
