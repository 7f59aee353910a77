"""The names Horovod 0.28.1 scripts import, where they import them from, and the autograd
Functions called by their Horovod names with Horovod's apply() arguments."""

import torch

import hvd
import hvd.torch

# What Horovod's horovod/torch/mpi_ops.py defines or imports at module level (beside the ops
# themselves, which test_basics.py checks through horovod.torch).
MPI_OPS_NAMES = [
    "init", "shutdown", "is_initialized", "start_timeline", "stop_timeline", "size",
    "local_size", "cross_size", "rank", "local_rank", "cross_rank", "mpi_threads_supported",
    "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built", "nccl_built", "ddl_built",
    "ccl_built", "cuda_built", "rocm_built", "Average", "Sum", "Adasum", "Min", "Max", "Product",
    "ProcessSet", "global_process_set", "add_process_set", "remove_process_set",
    "is_homogeneous", "HorovodInternalError", "poll", "synchronize", "join", "barrier",
]
AUTOGRAD_FUNCTIONS = [
    "HorovodAllreduce", "HorovodGroupedAllreduce", "HorovodAllgather", "HorovodGroupedAllgather",
    "HorovodBroadcast", "HorovodAlltoall", "HorovodReducescatter", "HorovodGroupedReducescatter",
]


def test_horovod_mpi_ops_offers_every_name_and_they_are_hvds_objects():
    import horovod.torch.mpi_ops as horovod_mpi_ops

    assert horovod_mpi_ops is hvd.torch.mpi_ops
    missing = [n for n in MPI_OPS_NAMES + AUTOGRAD_FUNCTIONS if not hasattr(horovod_mpi_ops, n)]
    assert not missing, missing
    # Where hvd.torch has the name too, it is one object, not a copy.
    differ = [n for n in MPI_OPS_NAMES
              if hasattr(hvd.torch, n) and getattr(hvd.torch, n) is not getattr(horovod_mpi_ops, n)]
    assert not differ, differ
    assert all(hasattr(hvd.torch, n) for n in MPI_OPS_NAMES)
    for n in AUTOGRAD_FUNCTIONS:
        assert issubclass(getattr(horovod_mpi_ops, n), torch.autograd.Function), n
    from horovod.torch.mpi_ops import HorovodAllreduce, global_process_set, is_homogeneous  # noqa
    assert global_process_set is hvd.torch.global_process_set
    assert is_homogeneous is hvd.torch.is_homogeneous


def test_horovod_version_is_the_api_level_and_hvds_own_stays_apart():
    import horovod

    assert horovod.__version__ == "0.28.1"
    assert hvd.__version__ == "0.1.0"
    assert horovod.hvd_version == hvd.__version__


def test_horovod_allreduce_apply_takes_horovods_arguments():
    HorovodAllreduce = hvd.torch.mpi_ops.HorovodAllreduce
    size, rank = hvd.torch.size(), hvd.torch.rank()
    ps = hvd.torch.global_process_set
    x = torch.full((3,), float(rank + 1), dtype=torch.float64, requires_grad=True)
    # (tensor, average, name, op, prescale_factor, postscale_factor, process_set)
    y = HorovodAllreduce.apply(x, None, "names.apply.sum", hvd.torch.Sum, 1.0, 2.0, ps)
    assert y.tolist() == [2.0 * size * (size + 1) / 2] * 3
    y.sum().backward()  # the gradient is the same reduction, scale factors included
    assert x.grad.tolist() == [2.0 * size] * 3
    # Horovod's deprecated average=True is Average, average=False Sum.
    mean = HorovodAllreduce.apply(x.detach(), True, "names.apply.avg", None, 1.0, 1.0, ps)
    assert mean.tolist() == [(size + 1) / 2] * 3
    total = HorovodAllreduce.apply(x.detach(), False, "names.apply.total", None, 1.0, 1.0, ps)
    assert total.tolist() == [size * (size + 1) / 2] * 3


def test_every_horovod_autograd_function_applies_with_horovods_arguments():
    m = hvd.torch.mpi_ops
    size, rank = m.size(), m.rank()
    ps = m.global_process_set
    mine = torch.full((size, 2), float(rank + 1), dtype=torch.float64)
    want_sum = float(size * (size + 1) // 2)
    # (average, name, op, prescale_factor, postscale_factor, process_set, *tensors)
    (a, b) = m.HorovodGroupedAllreduce.apply(None, "names.gar", m.Sum, 1.0, 1.0, ps, mine,
                                             mine[:1].clone())
    assert a.tolist() == [[want_sum] * 2] * size and b.tolist() == [[want_sum] * 2]
    # (tensor, name, process_set)
    gathered = m.HorovodAllgather.apply(mine[:1].clone(), "names.ag", ps)
    assert gathered[:, 0].tolist() == [float(r + 1) for r in range(size)]
    # (name, process_set, *tensors)
    (g,) = m.HorovodGroupedAllgather.apply("names.gag", ps, mine[:1].clone())
    assert g[:, 1].tolist() == [float(r + 1) for r in range(size)]
    # (tensor, root_rank, name, process_set)
    root = m.HorovodBroadcast.apply(mine, size - 1, "names.bc", ps)
    assert root.tolist() == [[float(size)] * 2] * size
    # (tensor, splits, name, process_set): one row to each rank
    out, received = m.HorovodAlltoall.apply(mine, None, "names.a2a", ps)
    assert out[:, 0].tolist() == [float(r + 1) for r in range(size)]
    assert received.tolist() == [1] * size
    # (tensor, name, op, process_set, prescale_factor, postscale_factor)
    share = m.HorovodReducescatter.apply(mine, "names.rs", m.Sum, ps, 1.0, 1.0)
    assert share.tolist() == [[want_sum] * 2]
    # (name, op, process_set, prescale_factor, postscale_factor, *tensors)
    (s,) = m.HorovodGroupedReducescatter.apply("names.grs", m.Sum, ps, 1.0, 0.5, mine)
    assert s.tolist() == [[want_sum / 2] * 2]
