"""The collectives of hvd.torch (Horovod's horovod.torch.mpi_ops) over libhvd's engine.

Every op is a named engine op: the engine matches it across ranks by name, checks that type,
shape, op and root agree (a mismatch fails the op on every rank, naming the tensor and the
ranks), fuses small tensors and runs them in the background. A name given by the caller is
prefixed by the op ("allreduce.fc1.weight"); unnamed ops are numbered (_engine.py says how),
so ranks must submit their unnamed ops in the same order.

The *_async forms return an int handle for poll() and synchronize(); synchronize returns the
op's output (the tensor itself for the in-place forms, a tuple for grouped ops, (output,
received_splits) for alltoall). Arguments that are wrong on this rank raise ValueError at
submit; failures while the op runs (peers, mismatches, shutdown) raise HorovodInternalError
from synchronize. Tensors stay the caller's and must not be modified until the op is done.
CUDA tensors go to libhvd's GPU backend (NCCL, or staged through host memory), ordered after
torch's current stream.

Every op takes process_set= (hvd.global_process_set by default, see process_sets.py): only the
set's members submit it, and it runs as in a job of those ranks. A set that is not registered,
or that this rank is not in, is a ValueError at submit. The gradients of the differentiable
forms travel within the same set.
"""

import ctypes

import torch

from hvd import _capi
from hvd.torch._engine import (_WIDE_FLOATS, _abandon, _allreduce_async, _contiguous, _device_of,
                               _dtype_code, _engine_output, _gathered, _is_fp16, _mark_modified,
                               _member_names, _op_name, _received_splits,
                               _reducescatter_grad_scale, _reducescatter_op, _register,
                               _register_result, _reset,
                               _resolve_op, _set_id, _splits_list, _submit)
# Horovod's mpi_ops offers these too: they live with the handles they work on.
from hvd.torch._engine import barrier, join, poll, synchronize  # noqa: F401
from hvd.torch.basics import Average, Sum, check_op, local_size, rank
from hvd.torch.compression import Compression
from hvd.torch.process_sets import global_process_set, init_process_sets
# Horovod's horovod.torch.mpi_ops offers the basics and the process sets too, and scripts import
# them from there: the same objects as hvd.torch's.
from hvd.exceptions import HorovodInternalError  # noqa: F401
from hvd.torch.basics import (Adasum, Max, Min, Product, ccl_built, cross_rank,  # noqa: F401
                              cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled,
                              is_homogeneous, is_initialized, local_rank, mpi_built,
                              mpi_enabled, mpi_threads_supported, nccl_built, rocm_built,
                              shutdown, size, start_timeline, stop_timeline)
from hvd.torch.process_sets import (ProcessSet, add_process_set,  # noqa: F401
                                    remove_process_set)


def init(comm=None, process_sets=None):
    """Joins the job: reads the worker environment hvdrun (or srun, mpirun) set and connects to
    the other ranks. Idempotent.

    comm: None (or []) for every launched rank; or, as Horovod's list of ranks relative to
    MPI_COMM_WORLD, a list of launched ranks (hvd.init() ranks, as the launcher numbered them)
    that form the job alone, renumbered in the list's order: hvd.rank() is this rank's index in
    the list, hvd.size() its length, and local and cross ranks count the members on their
    hosts. Only the listed ranks call init with it, each with the same list; the others may form
    a job of their own with another list (or not call init). A list without this rank, a rank
    outside the launched job or listed twice raise ValueError at once; so do elastic mode and
    MPI's rendezvous or HVD_CPU_BACKEND=mpi, which take every launched rank. An MPI
    communicator (mpi4py) raises NotImplementedError.

    process_sets: None (only the global set, and those HVD_PROCESS_SETS defines), a list of
    hvd.ProcessSet to register (each gets its process_set_id; a duplicate entry raises
    ValueError after init, as in Horovod), or "dynamic" (sets added and removed later with
    hvd.add_process_set / hvd.remove_process_set). With comm, their ranks are the new job's."""
    try:
        init_process_sets(process_sets, comm)
    finally:
        _reset()  # the per-init naming counters start anew, on every rank alike

# --- allreduce ------------------------------------------------------------------------------

def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce of `tensor` into a new tensor; synchronize() returns it."""
    set_id = _set_id(process_set, "allreduce_async")
    op = _resolve_op(op, average, "allreduce_async")
    return _allreduce_async(tensor, False, name, op, prescale_factor, postscale_factor,
                            set_id=set_id)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an in-place allreduce of `tensor`; synchronize() returns the tensor."""
    set_id = _set_id(process_set, "allreduce_async_")
    op = _resolve_op(op, average, "allreduce_async_")
    return _allreduce_async(tensor, True, name, op, prescale_factor, postscale_factor,
                            set_id=set_id)


# The autograd Functions carry Horovod's names and apply() arguments (scripts call
# HorovodAllreduce.apply(tensor, average, name, op, prescale_factor, postscale_factor,
# process_set) themselves). Each _Fp16 subclass is the same op with Compression.fp16 done by
# the engine, which casts to float16 on the wire and back: the same bytes sent, no copies.

def _allreduce_forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor,
                       process_set, fp16):
    op = _resolve_op(op, average, "allreduce")
    ctx.op, ctx.prescale, ctx.postscale = op, prescale_factor, postscale_factor
    ctx.process_set = process_set
    return synchronize(_allreduce_async(tensor, False, name, op, prescale_factor,
                                        postscale_factor, fp16,
                                        _set_id(process_set, "allreduce")))


class HorovodAllreduce(torch.autograd.Function):
    """y = reduce over the set's ranks of x: the gradient is the same reduction of the
    gradients, in the same set."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor, process_set):
        return _allreduce_forward(ctx, tensor, average, name, op, prescale_factor,
                                  postscale_factor, process_set, False)

    @staticmethod
    def backward(ctx, grad):
        return (allreduce(grad, op=ctx.op, prescale_factor=ctx.prescale,
                          postscale_factor=ctx.postscale, process_set=ctx.process_set),
                None, None, None, None, None, None)


class _Fp16Allreduce(HorovodAllreduce):
    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor, process_set):
        return _allreduce_forward(ctx, tensor, average, name, op, prescale_factor,
                                  postscale_factor, process_set, True)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """The reduction of `tensor` over the set's ranks (Average by default), as a new tensor.
    Differentiable."""
    _set_id(process_set, "allreduce")
    op = _resolve_op(op, average, "allreduce")
    if _is_fp16(compression) and tensor.dtype in _WIDE_FLOATS:
        return _Fp16Allreduce.apply(tensor, None, name, op, prescale_factor, postscale_factor,
                                    process_set)
    compressed, cctx = compression.compress(tensor)
    out = HorovodAllreduce.apply(compressed, None, name, op, prescale_factor, postscale_factor,
                                 process_set)
    return compression.decompress(out, cctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce; returns `tensor`."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


# --- grouped allreduce ------------------------------------------------------------------------

def _grouped_allreduce_async(tensors, in_place, name, op, prescale, postscale, fp16=False,
                             set_id=0):
    """The members are negotiated and reduced as one; the engine groups tensors of one type and
    device, so mixed lists become one engine group per (type, device), all under one handle."""
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise ValueError("grouped_allreduce: expected a non-empty list of tensors")
    names = _member_names("grouped_allreduce", name, len(tensors), set_id)
    works = [_contiguous(t) for t in tensors]
    targets = works if in_place else [
        torch.empty_like(w, memory_format=torch.contiguous_format) for w in works]
    by_kind = {}
    for i, t in enumerate(works):
        key = (_dtype_code(t, "grouped_allreduce"), _device_of(t, "grouped_allreduce"))
        by_kind.setdefault(key, []).append(i)
    lib = _capi.lib()
    handles = []
    try:
        for (dtype, (device, stream)), members in by_kind.items():
            n = len(members)
            c_names = (ctypes.c_char_p * n)(*[names[i].encode() for i in members])
            ins = (ctypes.c_void_p * n)(*[works[i].data_ptr() for i in members])
            outs = (ctypes.c_void_p * n)(*[targets[i].data_ptr() for i in members])
            shape_arrays = [_capi.shape_array(works[i].shape) for i in members]
            shapes = (ctypes.POINTER(ctypes.c_int64) * n)(
                *[ctypes.cast(a, ctypes.POINTER(ctypes.c_int64)) for a, _ in shape_arrays])
            ndims = (ctypes.c_int * n)(*[d for _, d in shape_arrays])
            o = _capi.options(op=op, prescale=prescale, postscale=postscale, fp16=fp16,
                              device=device, stream=stream, process_set=set_id)
            handles.append(_submit(lib.grouped_allreduce_async, n, c_names, ins, outs, shapes,
                                   ndims, dtype, ctypes.byref(o)))
    except Exception:
        _abandon(handles)
        raise
    if in_place:
        for t in tensors:
            _mark_modified(t)

    def finish(_handles):
        if not in_place:
            return tuple(targets)
        for t, w in zip(tensors, works):
            if w is not t:
                t.copy_(w)
        return tuple(tensors)

    return _register(handles, finish, keep=works)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts a grouped allreduce into new tensors; synchronize() returns them (a tuple)."""
    set_id = _set_id(process_set, "grouped_allreduce_async")
    op = _resolve_op(op, average, "grouped_allreduce_async")
    return _grouped_allreduce_async(tensors, False, name, op, prescale_factor, postscale_factor,
                                    set_id=set_id)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """Starts a grouped allreduce in place; synchronize() returns the tensors (a tuple)."""
    set_id = _set_id(process_set, "grouped_allreduce_async_")
    op = _resolve_op(op, average, "grouped_allreduce_async_")
    return _grouped_allreduce_async(tensors, True, name, op, prescale_factor, postscale_factor,
                                    set_id=set_id)


def _grouped_allreduce_forward(ctx, average, name, op, prescale_factor, postscale_factor,
                               process_set, tensors, fp16):
    op = _resolve_op(op, average, "grouped_allreduce")
    ctx.op, ctx.prescale, ctx.postscale = op, prescale_factor, postscale_factor
    ctx.process_set = process_set
    return synchronize(_grouped_allreduce_async(list(tensors), False, name, op, prescale_factor,
                                                postscale_factor, fp16,
                                                _set_id(process_set, "grouped_allreduce")))


class HorovodGroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set,
                *tensors):
        return _grouped_allreduce_forward(ctx, average, name, op, prescale_factor,
                                          postscale_factor, process_set, tensors, False)

    @staticmethod
    def backward(ctx, *grads):
        reduced = grouped_allreduce(list(grads), op=ctx.op, prescale_factor=ctx.prescale,
                                    postscale_factor=ctx.postscale, process_set=ctx.process_set)
        return (None, None, None, None, None, None) + tuple(reduced)


class _Fp16GroupedAllreduce(HorovodGroupedAllreduce):
    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set,
                *tensors):
        return _grouped_allreduce_forward(ctx, average, name, op, prescale_factor,
                                          postscale_factor, process_set, tensors, True)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """The reductions of `tensors`, negotiated and reduced as one; a list of new tensors.
    Differentiable."""
    _set_id(process_set, "grouped_allreduce")
    op = _resolve_op(op, average, "grouped_allreduce")
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise ValueError("grouped_allreduce: expected a non-empty list of tensors")
    if _is_fp16(compression) and all(t.dtype in _WIDE_FLOATS for t in tensors):
        return list(_Fp16GroupedAllreduce.apply(None, name, op, prescale_factor,
                                                postscale_factor, process_set, *tensors))
    pairs = [compression.compress(t) for t in tensors]
    outs = HorovodGroupedAllreduce.apply(None, name, op, prescale_factor, postscale_factor,
                                         process_set, *[c for c, _ in pairs])
    return [compression.decompress(o, c) for o, (_, c) in zip(outs, pairs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    """In-place grouped allreduce; returns the tensors (a tuple)."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


# --- allgather ---------------------------------------------------------------------------------

def _allgather_submit(tensor, op_name, set_id=0):
    """Submits one allgather; returns (engine handle, the input the engine reads)."""
    what = "allgather"
    dtype = _dtype_code(tensor, what)
    if tensor.dim() == 0:
        raise ValueError("allgather: a scalar (0-dim) tensor has no dimension to gather along; "
                         "reshape it to [1]")
    device, stream = _device_of(tensor, what)
    work = _contiguous(tensor)
    shape, ndim = _capi.shape_array(work.shape)
    o = _capi.options(device=device, stream=stream, process_set=set_id)
    h = _submit(_capi.lib().allgather_async, op_name.encode(), work.data_ptr(), shape, ndim,
                dtype, ctypes.byref(o))
    return h, work


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts gathering every member's `tensor` along dimension 0 (which may differ across
    ranks, the other dimensions may not), in the set's order."""
    set_id = _set_id(process_set, "allgather_async")
    h, work = _allgather_submit(tensor, _op_name("allgather", name, set_id), set_id)
    return _register([h], lambda hs: _gathered(hs, [tensor])[0], keep=work)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts an allgather of each of `tensors`; synchronize() returns the results (a tuple)."""
    set_id = _set_id(process_set, "grouped_allgather_async")
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise ValueError("grouped_allgather: expected a non-empty list of tensors")
    submitted = []
    try:
        for t, n in zip(tensors, _member_names("grouped_allgather", name, len(tensors),
                                               set_id)):
            submitted.append(_allgather_submit(t, n, set_id))
    except Exception:
        _abandon([h for h, _ in submitted])
        raise
    return _register([h for h, _ in submitted], lambda hs: _gathered(hs, tensors),
                     keep=[w for _, w in submitted])


def _rows_offset(rows, process_set):
    """This rank's first row in the concatenation of every member's `rows` rows (set order)."""
    every = allgather(torch.tensor([rows], dtype=torch.int32), process_set=process_set)
    return int(every[:process_set.rank()].sum())


class HorovodAllgather(torch.autograd.Function):
    """y = concat over the members of x_r. Horovod's gradient of x_r: this rank's rows of the
    average over the members of y's gradients."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 0
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        averaged = allreduce(grad, op=Average, process_set=ctx.process_set)
        offset = _rows_offset(ctx.rows, ctx.process_set)
        return averaged.narrow(0, offset, ctx.rows), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Every member's `tensor` concatenated along dimension 0, in the set's rank order.
    Differentiable."""
    _set_id(process_set, "allgather")
    return HorovodAllgather.apply(tensor, name, process_set)


class HorovodGroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [t.shape[0] if t.dim() > 0 else 0 for t in tensors]
        ctx.process_set = process_set
        return synchronize(grouped_allgather_async(list(tensors), name, process_set))

    @staticmethod
    def backward(ctx, *grads):
        averaged = grouped_allreduce(list(grads), op=Average, process_set=ctx.process_set)
        offsets = [_rows_offset(r, ctx.process_set) for r in ctx.rows]
        return (None, None) + tuple(g.narrow(0, o, r)
                                    for g, o, r in zip(averaged, offsets, ctx.rows))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """The allgather of each of `tensors` (a list). Differentiable."""
    _set_id(process_set, "grouped_allgather")
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise ValueError("grouped_allgather: expected a non-empty list of tensors")
    return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))


# --- broadcast ---------------------------------------------------------------------------------

def _broadcast_async(tensor, root_rank, name, in_place, set_id=0):
    what = "broadcast"
    dtype = _dtype_code(tensor, what)
    if isinstance(root_rank, bool) or not isinstance(root_rank, int):
        raise ValueError("broadcast: root_rank must be an int, got %r" % (root_rank,))
    device, stream = _device_of(tensor, what)
    target = _contiguous(tensor) if in_place else tensor.clone(
        memory_format=torch.contiguous_format)
    shape, ndim = _capi.shape_array(target.shape)
    o = _capi.options(root=root_rank, device=device, stream=stream, process_set=set_id)
    h = _submit(_capi.lib().broadcast_async, _op_name("broadcast", name, set_id).encode(),
                target.data_ptr(), shape, ndim, dtype, ctypes.byref(o))
    return _register_result([h], tensor, target, in_place, keep=target)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts broadcasting root_rank's `tensor` into a new tensor on every member (root_rank
    is a job rank, a member of the set)."""
    set_id = _set_id(process_set, "broadcast_async")
    return _broadcast_async(tensor, root_rank, name, False, set_id)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts broadcasting root_rank's `tensor` into `tensor` on every member."""
    set_id = _set_id(process_set, "broadcast_async_")
    return _broadcast_async(tensor, root_rank, name, True, set_id)


class HorovodBroadcast(torch.autograd.Function):
    """Horovod's definition: the root's gradient is the average over the members of the
    output's gradients; the other members' inputs reach no output, so theirs is zero."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(_broadcast_async(tensor, root_rank, name, False,
                                            _set_id(process_set, "broadcast")))

    @staticmethod
    def backward(ctx, grad):
        averaged = allreduce(grad, op=Average, process_set=ctx.process_set)
        if rank() != ctx.root_rank:  # root_rank is a job rank
            averaged = torch.zeros_like(averaged)
        return averaged, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's `tensor`, as a new tensor on every member. Differentiable."""
    _set_id(process_set, "broadcast")
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's `tensor` copied into `tensor` on every rank; returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# --- alltoall ----------------------------------------------------------------------------------

def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall; synchronize() returns (output, received_splits). splits has one
    entry per member of the set, in the set's order."""
    set_id = _set_id(process_set, "alltoall_async")
    what = "alltoall"
    dtype = _dtype_code(tensor, what)
    if tensor.dim() == 0:
        raise ValueError("alltoall: a scalar (0-dim) tensor has no dimension to split")
    values = _splits_list(splits)
    if any(s < 0 for s in values):
        raise ValueError("alltoall: splits must not be negative (got %s)" % values)
    device, stream = _device_of(tensor, what)
    work = _contiguous(tensor)
    shape, ndim = _capi.shape_array(work.shape)
    split_array = (ctypes.c_int64 * max(len(values), 1))(*values)
    o = _capi.options(device=device, stream=stream, process_set=set_id)
    h = _submit(_capi.lib().alltoall_async, _op_name("alltoall", name, set_id).encode(),
                work.data_ptr(), shape, ndim, split_array, len(values), dtype, ctypes.byref(o))
    like = splits if isinstance(splits, torch.Tensor) else None

    def finish(handles):
        return (_engine_output(handles[0], tensor.dtype, tensor.device),
                _received_splits(handles[0], like))

    return _register([h], finish, keep=work)


class HorovodAlltoall(torch.autograd.Function):
    """Rows travel from rank p to rank q; their gradients travel back the same way."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received = received
        ctx.process_set = process_set
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad, _unused):
        back, _ = synchronize(alltoall_async(grad.contiguous(), ctx.received,
                                             process_set=ctx.process_set))
        return back, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[p] rows of `tensor` (dimension 0, in order) to the set's p-th member (an
    equal split when splits is None) and returns the rows received, in the set's order; with
    splits given, returns (output, received_splits). Differentiable."""
    _set_id(process_set, "alltoall")
    output, received = HorovodAlltoall.apply(tensor, splits, name, process_set)
    return output if splits is None else (output, received)


# --- reducescatter -----------------------------------------------------------------------------

def _reducescatter_submit(tensor, op_name, op, prescale, postscale, fp16=False, set_id=0):
    """Submits one reducescatter; returns (engine handle, the input the engine reads)."""
    what = "reducescatter"
    dtype = _dtype_code(tensor, what)
    if tensor.dim() == 0:
        raise ValueError("reducescatter: a scalar (0-dim) tensor has no dimension to scatter")
    device, stream = _device_of(tensor, what)
    work = _contiguous(tensor)
    shape, ndim = _capi.shape_array(work.shape)
    o = _capi.options(op=op, prescale=prescale, postscale=postscale, fp16=fp16, device=device,
                      stream=stream, process_set=set_id)
    h = _submit(_capi.lib().reducescatter_async, op_name.encode(), work.data_ptr(), shape, ndim,
                dtype, ctypes.byref(o))
    return h, work


def _reducescatter_async(tensor, name, op, prescale, postscale, fp16=False, set_id=0):
    h, work = _reducescatter_submit(tensor, _op_name("reducescatter", name, set_id), op,
                                    prescale, postscale, fp16, set_id)
    return _register([h], lambda hs: _gathered(hs, [tensor])[0], keep=work)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reduction of `tensor` over the set's ranks that leaves each member its share
    of dimension 0 (the first rows % size members get one row more)."""
    set_id = _set_id(process_set, "reducescatter_async")
    return _reducescatter_async(tensor, name, _reducescatter_op(op), prescale_factor,
                                postscale_factor, set_id=set_id)


def _reducescatter_forward(ctx, tensor, name, op, process_set, prescale_factor,
                           postscale_factor, fp16):
    set_id = _set_id(process_set, "reducescatter")
    op = _reducescatter_op(op)
    ctx.scale = _reducescatter_grad_scale(op, prescale_factor, postscale_factor, process_set)
    ctx.process_set = process_set
    return synchronize(_reducescatter_async(tensor, name, op, prescale_factor, postscale_factor,
                                            fp16, set_id))


class HorovodReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        return _reducescatter_forward(ctx, tensor, name, op, process_set, prescale_factor,
                                      postscale_factor, False)

    @staticmethod
    def backward(ctx, grad):
        gathered = allgather(grad, process_set=ctx.process_set)
        return (gathered * ctx.scale if ctx.scale != 1 else gathered), None, None, None, None, \
            None


class _Fp16Reducescatter(HorovodReducescatter):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        return _reducescatter_forward(ctx, tensor, name, op, process_set, prescale_factor,
                                      postscale_factor, True)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """This rank's share of the reduction of `tensor` over the set's ranks. Differentiable."""
    _set_id(process_set, "reducescatter")
    op = _reducescatter_op(op)
    if _is_fp16(compression) and tensor.dtype in _WIDE_FLOATS:
        return _Fp16Reducescatter.apply(tensor, name, op, process_set, prescale_factor,
                                        postscale_factor)
    compressed, cctx = compression.compress(tensor)
    out = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                     postscale_factor)
    return compression.decompress(out, cctx)


def grouped_reducescatter_async(tensors, name=None, op=Average,
                                process_set=global_process_set, prescale_factor=1.0,
                                postscale_factor=1.0):
    """Starts a reducescatter of each of `tensors`; synchronize() returns the shares (a
    tuple)."""
    set_id = _set_id(process_set, "grouped_reducescatter_async")
    op = _reducescatter_op(op)
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise ValueError("grouped_reducescatter: expected a non-empty list of tensors")
    submitted = []
    try:
        for t, n in zip(tensors, _member_names("grouped_reducescatter", name, len(tensors),
                                               set_id)):
            submitted.append(_reducescatter_submit(t, n, op, prescale_factor, postscale_factor,
                                                   set_id=set_id))
    except Exception:
        _abandon([h for h, _ in submitted])
        raise
    return _register([h for h, _ in submitted], lambda hs: _gathered(hs, tensors),
                     keep=[w for _, w in submitted])


class HorovodGroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        op = _reducescatter_op(op)
        ctx.scale = _reducescatter_grad_scale(op, prescale_factor, postscale_factor, process_set)
        ctx.process_set = process_set
        return synchronize(grouped_reducescatter_async(list(tensors), name, op, process_set,
                                                       prescale_factor=prescale_factor,
                                                       postscale_factor=postscale_factor))

    @staticmethod
    def backward(ctx, *grads):
        gathered = grouped_allgather(list(grads), process_set=ctx.process_set)
        if ctx.scale != 1:
            gathered = [g * ctx.scale for g in gathered]
        return (None, None, None, None, None) + tuple(gathered)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """This rank's share of the reduction of each of `tensors` (a list). Differentiable."""
    _set_id(process_set, "grouped_reducescatter")
    op = _reducescatter_op(op)
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise ValueError("grouped_reducescatter: expected a non-empty list of tensors")
    pairs = [compression.compress(t) for t in tensors]
    outs = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                             postscale_factor, *[c for c, _ in pairs])
    return [compression.decompress(o, c) for o, (_, c) in zip(outs, pairs)]


# --- sparse gradients ---------------------------------------------------------------------------

def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Horovod's reduction of a sparse COO tensor: every member's indices and values are
    gathered (two allgathers, "<name>.indices" and "<name>.values"; the members' counts of
    entries may differ, and may be zero), values divided by the set's size for Average. Returns
    a callable that waits and gives the result: a sparse tensor of `tensor`'s size holding every
    member's entries in set order, uncoalesced (an index held by several members, or several
    times by one, appears that often; coalesce() sums them). Calling it again gives the same
    tensor. Every member must give the same sparse_dim, dense sizes and dtype."""
    _set_id(process_set, "sparse_allreduce_async")
    if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.sparse_coo:
        raise ValueError("sparse_allreduce_async: expected a sparse COO tensor, got %s" % (
            tensor.layout if isinstance(tensor, torch.Tensor) else type(tensor).__name__))
    op = check_op(op)
    if op not in (Average, Sum):
        raise ValueError("sparse allreduce: op must be hvd.Average or hvd.Sum")
    divisor = process_set.size() if op == Average else 1
    size = tensor.size()
    # Allgather concatenates along dimension 0: the indices travel as [nnz, sparse_dim].
    # Unnamed, each part is numbered like any unnamed op (the same order on every rank).
    indices = allgather_async(tensor._indices().transpose(0, 1).contiguous(),
                              name=None if name is None else "%s.indices" % name,
                              process_set=process_set)
    values = allgather_async(tensor._values(),
                             name=None if name is None else "%s.values" % name,
                             process_set=process_set)
    done = []

    def result():
        if not done:
            gathered_indices = synchronize(indices)
            gathered_values = synchronize(values)
            if op == Average:
                gathered_values = gathered_values / divisor
            done.append(torch.sparse_coo_tensor(gathered_indices.transpose(0, 1),
                                                gathered_values, size))
        return done[0]

    return result
