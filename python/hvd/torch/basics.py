"""The bottom of hvd.torch, over the C ABI alone: the op constants, topology and build
queries, shutdown and the timeline (Horovod's horovod.common.basics). hvd.init() belongs to
mpi_ops, which sits above everything it starts.

Layers, leaf first (each module imports only those before it): hvd._capi (the C ABI) ->
basics -> compression, process_sets -> _engine (how ops reach the engine; the one internal
module whose underscore names others import) -> mpi_ops (the ops and init) -> functions ->
optimizer, sync_batch_norm."""

import os

from hvd import _capi

Average = _capi.AVERAGE
Sum = _capi.SUM
Min = _capi.MIN
Max = _capi.MAX
Product = _capi.PRODUCT
# Adaptive summation (allreduce of floating-point tensors only; docs/allreduce_ops.md). Like
# the others, the value is libhvd's C ABI value, not Horovod's number: scripts use the name.
Adasum = _capi.ADASUM


def check_op(op):
    """The op constant a collective accepts."""
    if op not in (Average, Sum, Min, Max, Product, Adasum):
        raise ValueError("unknown reduction op %r (use hvd.Average, hvd.Sum, hvd.Min, hvd.Max, "
                         "hvd.Product or hvd.Adasum)" % (op,))
    return op


def shutdown():
    """Leaves the job; pending ops fail. hvd.init() may be called again afterwards."""
    lib = _capi.lib()
    lib.check(lib.shutdown())


def is_initialized():
    return bool(_capi.lib().is_initialized())


def _query(fn_name):
    lib = _capi.lib()
    if not lib.is_initialized():
        raise ValueError(_capi.NOT_INITIALIZED)
    return lib.query(getattr(lib, fn_name))


def size():
    return _query("size")


def rank():
    return _query("rank")


def local_size():
    return _query("local_size")


def local_rank():
    return _query("local_rank")


def cross_size():
    return _query("cross_size")


def cross_rank():
    return _query("cross_rank")


def is_homogeneous():
    """Whether every host runs the same number of ranks. As in Horovod, init learns it from
    every rank, so asking needs no other rank. (Before init Horovod's crashes; hvd's raises
    ValueError, as the other queries do.)"""
    return bool(_query("is_homogeneous"))


def nccl_built():
    """NCCL's version code (major*10000 + minor*100 + patch, as NCCL_VERSION_CODE) when this
    libhvd has the NCCL backend and an NCCL library loads, else 0."""
    lib = _capi.lib()
    if not lib.nccl_built():
        return 0
    version = (lib.nccl_version() or b"").decode()
    parts = [int(p) for p in version.split(".") if p.isdigit()]
    if len(parts) < 3:
        return 0
    major, minor, patch = parts[:3]
    # NCCL changed its code's formula at 2.9: major*1000 + minor*100 + patch before that.
    if (major, minor) < (2, 9):
        return major * 1000 + minor * 100 + patch
    return major * 10000 + minor * 100 + patch


def cuda_built():
    return bool(_capi.lib().nccl_built())


def rocm_built():
    return False


def mpi_built():
    """True when libhvd's MPI plugin (libhvd_mpi.so) sits next to libhvd."""
    path = _capi.lib().path
    return os.path.isfile(os.path.join(os.path.dirname(os.path.realpath(path)), "libhvd_mpi.so"))


def mpi_enabled():
    """True when the collectives run over MPI (HVD_CPU_BACKEND=mpi). libhvd says which backend:
    after init the one it runs, before it the one init will read from the environment."""
    return _capi.lib().cpu_backend() == b"mpi" and mpi_built()


def mpi_threads_supported():
    """Whether MPI runs with MPI_THREAD_MULTIPLE, so that the script may use MPI itself (mpi4py)
    beside hvd. Horovod's checks, in its order and words: MPI must be enabled
    (HVD_CPU_BACKEND=mpi here; before init, the backend init will take), then hvd initialized.
    hvd's MPI backend always runs with MPI_THREAD_MULTIPLE (its init fails without it), so an
    initialized MPI backend answers True."""
    if not mpi_enabled():
        raise ValueError("Horovod MPI is not enabled; Please make sure it's installed and "
                         "enabled.")
    if not is_initialized():
        raise ValueError(_capi.NOT_INITIALIZED)
    return True


def gloo_built():
    return False


def gloo_enabled():
    return False


def nccl_enabled():
    return nccl_built() != 0


def ddl_built():
    return False


def ccl_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Starts writing the timeline (a Chrome trace, rank 0 writes it) to file_path."""
    if not file_path:
        raise ValueError("start_timeline: file_path is empty")
    lib = _capi.lib()
    lib.check(lib.start_timeline(os.fsencode(file_path), 1 if mark_cycles else 0), submit=True)


def stop_timeline():
    """Stops the timeline; returns once its file is complete."""
    lib = _capi.lib()
    lib.check(lib.stop_timeline(), submit=True)


def engine_stats():
    """hvd's own: what this rank's engine did so far (cycles, collectives, bytes, ...)."""
    lib = _capi.lib()
    stats = _capi.EngineStats()
    stats.struct_size = _capi.ctypes.sizeof(_capi.EngineStats)
    lib.check(lib.get_engine_stats(_capi.ctypes.byref(stats)), submit=True)
    return {name: getattr(stats, name) for name, _ in _capi.EngineStats._fields_[1:]}
