"""Topology, build queries, op constants, init/shutdown."""

import os

import pytest
import torch

import hvd.torch as hvd


def test_topology_matches_the_environment_hvdrun_set():
    assert hvd.is_initialized()
    assert hvd.size() == int(os.environ["HVD_SIZE"])
    assert hvd.rank() == int(os.environ["HVD_RANK"])
    assert hvd.local_rank() == int(os.environ["HVD_LOCAL_RANK"])
    assert hvd.local_size() == int(os.environ["HVD_LOCAL_SIZE"])
    assert hvd.cross_rank() == int(os.environ["HVD_CROSS_RANK"])
    assert hvd.cross_size() == int(os.environ["HVD_CROSS_SIZE"])
    # One host: every rank is local.
    assert hvd.local_size() == hvd.size() and hvd.cross_size() == 1
    # Always true on one host; launch/test_homogeneous.py asks it of uneven hosts.
    assert hvd.is_homogeneous() is True


def test_ranks_are_distinct_and_cover_the_job():
    ranks = hvd.allgather(torch.tensor([hvd.rank()]), name="ranks")
    assert ranks.tolist() == list(range(hvd.size()))


def test_build_queries():
    code = hvd.nccl_built()
    assert isinstance(code, int)
    if code:
        assert code >= 20000  # major*10000 + minor*100 + patch for NCCL >= 2.9
    # A loadable NCCL is only reported by a build with the NCCL backend.
    assert not code or hvd.cuda_built()
    assert hvd.rocm_built() is False and hvd.gloo_built() is False
    assert hvd.ddl_built() is False and hvd.ccl_built() is False
    assert hvd.mpi_enabled() is False  # HVD_CPU_BACKEND is not mpi here


def test_cuda_built_says_whether_this_libhvd_has_the_nccl_backend():
    built = os.environ.get("HVD_TEST_BUILT_NCCL")  # set by tests/python/tests.cmake
    if built is None:
        pytest.skip("HVD_TEST_BUILT_NCCL is unset: run through ctest, which knows the build")
    assert hvd.cuda_built() is (built == "1")


def test_op_constants_are_distinct_and_adasum_is_refused_with_the_alternative():
    ops = [hvd.Average, hvd.Sum, hvd.Min, hvd.Max, hvd.Product, hvd.Adasum]
    assert len(set(ops)) == 6
    with pytest.raises(NotImplementedError, match="hvd.Average"):
        hvd.allreduce(torch.ones(2), op=hvd.Adasum)
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.DistributedOptimizer(torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1),
                                 op=hvd.Adasum)


def test_init_is_idempotent_and_reinit_after_shutdown_works():
    hvd.init()  # a second init is a no-op
    assert hvd.allreduce(torch.ones(3), op=hvd.Sum).tolist() == [hvd.size()] * 3
    hvd.shutdown()
    assert not hvd.is_initialized()
    with pytest.raises(ValueError, match="Horovod has not been initialized; use hvd.init()"):
        hvd.rank()
    with pytest.raises(hvd.HorovodInternalError, match="not been initialized"):
        hvd.allreduce(torch.ones(1))
    hvd.init()
    assert hvd.is_initialized()
    # The new init's ops meet, unnamed ones numbered anew on every rank.
    out = hvd.allreduce(torch.full((4,), float(hvd.rank() + 1)), op=hvd.Sum)
    assert out.tolist() == [hvd.size() * (hvd.size() + 1) / 2] * 4


def test_horovod_torch_is_hvd_torch():
    import horovod.torch
    import horovod.torch.mpi_ops
    from horovod.common.exceptions import HorovodInternalError

    assert horovod.torch is hvd
    assert horovod.torch.mpi_ops is hvd.mpi_ops
    assert HorovodInternalError is hvd.HorovodInternalError
    assert horovod.torch.allreduce is hvd.allreduce
