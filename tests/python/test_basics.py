"""Topology, build queries, op constants, init/shutdown."""

import os
import threading

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


def test_is_homogeneous_is_local_so_rank_zero_may_ask_alone():
    # Were it a collective, rank 0 would wait for the others in vain: it must answer at once.
    answers = []
    if hvd.rank() == 0:
        asking = threading.Thread(target=lambda: answers.append(hvd.is_homogeneous()), daemon=True)
        asking.start()
        asking.join(timeout=5)
        assert answers == [True], "is_homogeneous() did not answer within 5 s on rank 0 alone"
    # The job goes on: every rank's next op meets the others'.
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="after.is_homogeneous").item() == \
        hvd.size()


def test_mpi_threads_supported_raises_horovods_errors_without_mpi():
    # HVD_CPU_BACKEND is not mpi here: Horovod's first check says so, before init and after.
    with pytest.raises(ValueError, match="^Horovod MPI is not enabled; Please make sure it's "
                                         "installed and enabled.$"):
        hvd.mpi_threads_supported()


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


def test_op_constants_are_distinct_and_an_unknown_op_is_refused():
    ops = [hvd.Average, hvd.Sum, hvd.Min, hvd.Max, hvd.Product, hvd.Adasum]
    assert len(set(ops)) == 6
    with pytest.raises(ValueError, match="unknown reduction op"):
        hvd.allreduce(torch.ones(2), op=max(ops) + 1)
    # Adasum is an op like the others (test_adasum.py checks its values).
    assert hvd.allreduce(torch.zeros(2), op=hvd.Adasum).tolist() == [0.0, 0.0]


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


def launched_rank():
    return int(os.environ["HVD_RANK"])


def test_init_with_a_list_of_ranks_forms_a_job_of_them_in_the_lists_order():
    size = int(os.environ["HVD_SIZE"])
    me = launched_rank()
    hvd.shutdown()
    try:
        # Every launched rank, in reverse order: renumbered, one host, still homogeneous.
        hvd.init(comm=list(reversed(range(size))))
        assert (hvd.rank(), hvd.size()) == (size - 1 - me, size)
        assert (hvd.local_rank(), hvd.local_size()) == (size - 1 - me, size)
        assert (hvd.cross_rank(), hvd.cross_size()) == (0, 1)
        assert hvd.is_homogeneous() is True
        gathered = hvd.allgather(torch.tensor([me]), name="comm.reversed")
        assert gathered.tolist() == list(reversed(range(size)))
        assert hvd.global_process_set.ranks == list(range(size))
        hvd.shutdown()
        # Two jobs side by side: the even launched ranks and the odd ones, each listed from its
        # highest rank down.
        group = [r for r in reversed(range(size)) if r % 2 == me % 2]
        hvd.init(comm=group)
        assert (hvd.rank(), hvd.size()) == (group.index(me), len(group))
        assert hvd.local_size() == len(group)
        total = hvd.allreduce(torch.tensor([me]), op=hvd.Sum, name="comm.group")
        assert total.item() == sum(group)
        hvd.shutdown()
    finally:
        if not hvd.is_initialized():
            hvd.init()
    assert (hvd.rank(), hvd.size()) == (me, size)


def test_init_refuses_a_bad_list_of_ranks_at_once():
    size = int(os.environ["HVD_SIZE"])
    me = launched_rank()
    hvd.shutdown()
    try:
        others = [r for r in range(size) if r != me]
        with pytest.raises(ValueError, match="this process is launched rank %d, which is not in "
                                             "the list" % me):
            hvd.init(comm=others)
        with pytest.raises(ValueError, match="rank %d is listed twice" % me):
            hvd.init(comm=[me, me])
        with pytest.raises(ValueError, match="rank %d is not in the launched job" % size):
            hvd.init(comm=[me, size])
        for bad in ("01", [0.0], [True], 3):
            with pytest.raises(ValueError, match="Invalid type of argument comm"):
                hvd.init(comm=bad)
        comm_class = type("Comm", (), {"__module__": "mpi4py.MPI"})  # as mpi4py's classes are
        fake_comm = type("Intracomm", (comm_class,), {"__module__": "mpi4py.MPI"})()
        with pytest.raises(NotImplementedError, match="pass the ranks that form the job"):
            hvd.init(comm=fake_comm)
        assert not hvd.is_initialized()
        # Before init, Horovod's errors in Horovod's order: MPI first, then init.
        with pytest.raises(ValueError, match="Horovod MPI is not enabled"):
            hvd.mpi_threads_supported()
        with pytest.raises(ValueError, match="Horovod has not been initialized; use hvd.init()"):
            hvd.is_homogeneous()
        hvd.init(comm=[])  # an empty list is the whole job
        assert (hvd.rank(), hvd.size()) == (me, size)
    finally:
        if not hvd.is_initialized():
            hvd.init()


def test_horovod_torch_is_hvd_torch():
    import horovod.torch
    import horovod.torch.mpi_ops
    from horovod.common.exceptions import HorovodInternalError

    assert horovod.torch is hvd
    assert horovod.torch.mpi_ops is hvd.mpi_ops
    assert HorovodInternalError is hvd.HorovodInternalError
    assert horovod.torch.allreduce is hvd.allreduce
