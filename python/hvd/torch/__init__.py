"""hvd.torch: Horovod's PyTorch API over libhvd, in pure Python.

    import hvd.torch as hvd          # or: import horovod.torch as hvd
    hvd.init()
    torch.cuda.set_device(hvd.local_rank())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

Process sets (Horovod's): hvd.init(process_sets=[hvd.ProcessSet([0, 1]), ...]) registers sets
of ranks, and every op, DistributedOptimizer and the broadcast helpers take process_set= to run
among a set's members only (see process_sets.py).

Nothing here is compiled against torch: tensors reach libhvd's C ABI as pointers
(tensor.data_ptr()) through ctypes, so one installation serves every torch version. Run the
script under hvdrun (or srun, mpirun), which sets the environment hvd.init() reads.
"""

from hvd.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from hvd.torch import elastic
from hvd.torch.basics import (Adasum, Average, Max, Min, Product, Sum, ccl_built, cuda_built,
                              cross_rank, cross_size, ddl_built, engine_stats, gloo_built,
                              gloo_enabled, is_initialized, local_rank, local_size, mpi_built,
                              mpi_enabled, mpi_threads_supported, nccl_built, rank, rocm_built,
                              shutdown, size, start_timeline, stop_timeline)
from hvd.torch.compression import Compression
from hvd.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                 broadcast_parameters)
from hvd.torch.mpi_ops import (allgather, allgather_async, allreduce, allreduce_,
                               allreduce_async, allreduce_async_, alltoall, alltoall_async,
                               barrier, broadcast, broadcast_, broadcast_async,
                               broadcast_async_, grouped_allgather, grouped_allgather_async,
                               grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
                               grouped_allreduce_async_, grouped_reducescatter,
                               grouped_reducescatter_async, init, is_homogeneous, join, poll,
                               reducescatter, reducescatter_async, sparse_allreduce_async,
                               synchronize)
from hvd.torch.optimizer import DistributedOptimizer
from hvd.torch.process_sets import (ProcessSet, add_process_set, global_process_set,
                                    process_set_by_id, remove_process_set)
from hvd.torch.sync_batch_norm import SyncBatchNorm
