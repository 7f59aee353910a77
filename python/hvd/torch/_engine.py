"""How hvd.torch's ops reach libhvd's engine and come back: tensor checks, op names, the
submit through the C ABI, the int handles of poll() and synchronize() with what each keeps
alive, and reading the engine's outputs into tensors. mpi_ops.py builds the collectives on it.

Unnamed ops are numbered in the order this process submits unnamed ops, per process set
("allreduce.noname.7"), so ranks must submit their unnamed ops in the same order. (Horovod
numbers them by handle, counting named ops too, so a named op that only some ranks submit
shifts every later unnamed name; counting unnamed ops alone does not.)
"""

import ctypes
import itertools
import threading

import torch

from hvd import _capi
from hvd.exceptions import HorovodInternalError
from hvd.torch.basics import Average, Sum, check_op
from hvd.torch.compression import FP16Compressor
from hvd.torch.process_sets import ProcessSet, global_process_set

_DTYPES = {
    torch.uint8: _capi.UINT8,
    torch.int8: _capi.INT8,
    torch.int16: _capi.INT16,
    torch.int32: _capi.INT32,
    torch.int64: _capi.INT64,
    torch.float16: _capi.FLOAT16,
    torch.bfloat16: _capi.BFLOAT16,
    torch.float32: _capi.FLOAT32,
    torch.float64: _capi.FLOAT64,
}
_WIDE_FLOATS = (torch.float32, torch.float64)  # what the engine's fp16 compression applies to


class _Pending:
    """One Python handle: the engine handles behind it, how to turn them into the result, and
    the buffers the engine reads until they are done, with where their memory was at submit."""

    __slots__ = ("handles", "finish", "keep", "places")

    def __init__(self, handles, finish, keep):
        self.handles = handles
        self.finish = finish
        # The storages too: a tensor given another storage (set_) while its op is in flight
        # leaves the engine's memory alive with them. (A resize_ that grows a tensor
        # reallocates inside its storage; nothing outside torch can keep that memory.)
        # Cheap on purpose: this runs on every submit.
        if isinstance(keep, torch.Tensor):
            self.keep = (keep, _storage(keep))
            self.places = ((keep, keep.data_ptr(), keep.shape),)
        else:
            tensors = [t for t in keep or () if isinstance(t, torch.Tensor)]
            self.keep = (keep, [_storage(t) for t in tensors])
            self.places = [(t, t.data_ptr(), t.shape) for t in tensors]

    def moved(self):
        """A kept tensor whose memory or shape changed while the op was in flight (resize_,
        set_), or None. The engine used the memory the tensor had at submit."""
        for t, pointer, shape in self.places:
            if t.data_ptr() != pointer or t.shape != shape:
                return t
        return None


def _storage(tensor):
    # untyped_storage() from torch 2.0 on; before, _storage() is the same untyped storage
    # (storage() builds a Python TypedStorage around it, several times slower).
    get = getattr(tensor, "untyped_storage", None) or getattr(tensor, "_storage", None)
    return get() if get is not None else tensor.storage()


_lock = threading.Lock()
_pending = {}
_handle_ids = itertools.count(1)
_unnamed_ids = {}  # process set id -> the counter of its unnamed ops


def _reset():
    """Unnamed ops are numbered from 1 again after init, on every rank alike."""
    with _lock:
        _unnamed_ids.clear()


def _op_name(prefix, name, set_id=0):
    """The engine's name of an op (unnamed ops are numbered on their own: the module's
    comment says why). Each process set numbers its unnamed ops apart, since names are matched
    within a set and only its members submit its ops."""
    if not name:
        with _lock:
            counter = _unnamed_ids.setdefault(set_id, itertools.count(1))
            return "%s.noname.%d" % (prefix, next(counter))
    if not isinstance(name, str):
        raise ValueError("%s: name must be a str, got %s" % (prefix, type(name).__name__))
    if "\0" in name:
        # The C ABI ends a name at its first NUL: two different names would meet as one.
        raise ValueError("%s: name %r contains a NUL character" % (prefix, name))
    return "%s.%s" % (prefix, name)


def _dtype_code(tensor, what):
    if not isinstance(tensor, torch.Tensor):
        raise ValueError("%s: expected a torch.Tensor, got %s" % (what, type(tensor).__name__))
    code = _DTYPES.get(tensor.dtype)
    if code is None:
        raise ValueError("%s: tensor type %s is not supported (supported: %s)" % (
            what, tensor.dtype, ", ".join(str(t).replace("torch.", "") for t in _DTYPES)))
    if tensor.layout != torch.strided:
        raise ValueError("%s: %s tensors are not supported (dense tensors only)" %
                         (what, tensor.layout))
    return code


def _device_of(tensor, what):
    """(device index, stream) for the C ABI: -1 for host memory."""
    device = tensor.device
    if device.type == "cpu":
        return -1, None
    if device.type != "cuda":
        raise ValueError("%s: tensors on %s are not supported (cpu or cuda)" % (what, device))
    stream = torch.cuda.current_stream(device).cuda_stream
    return device.index, (stream or None)


def _contiguous(tensor):
    return tensor if tensor.is_contiguous() else tensor.contiguous()


def _mark_modified(tensor):
    """An in-place op changes `tensor` as torch's own in-place ops do: its autograd version
    moves on at submit, so a backward pass that saved the old values raises instead of
    computing a wrong gradient. (copy_ of a tensor onto itself moves no data: ATen returns at
    once, after autograd has counted the write.)"""
    if tensor.is_inference():
        return  # outside inference mode it cannot be written by torch at all, nor versioned
    if not tensor.requires_grad:
        tensor.copy_(tensor)  # records nothing: the common case (gradients), kept cheap
        return
    with torch.no_grad():  # a leaf that requires grad may not be written in grad mode
        tensor.copy_(tensor)


def _set_id(process_set, what):
    """The id an op runs on: ValueError unless `process_set` is a registered ProcessSet."""
    if not isinstance(process_set, ProcessSet):
        raise ValueError("%s: process_set must be an hvd.ProcessSet (hvd.global_process_set by "
                         "default), got %r" % (what, process_set))
    set_id = process_set.process_set_id
    if set_id is None:
        raise ValueError("%s: %s is not registered: pass it to hvd.init(process_sets=[...]) or "
                         "hvd.add_process_set() first (a removed set cannot be used)" %
                         (what, process_set))
    return set_id


def _submit(fn, *args):
    handle = ctypes.c_void_p()
    lib = _capi.lib()
    status = fn(*args, ctypes.byref(handle))
    if status != _capi.OK:
        if not lib.is_initialized():
            raise HorovodInternalError(_capi.NOT_INITIALIZED)  # Horovod's error for ops before init
        lib.check(status, submit=True)
    return handle


def _register(handles, finish, keep=None):
    """The int handle of submitted engine handles, for poll() and synchronize()."""
    with _lock:
        hid = next(_handle_ids)
        _pending[hid] = _Pending(handles, finish, keep)
    return hid


def _register_result(handles, tensor, target, in_place, keep):
    """_register for an op whose result is `target`: in place, the caller's `tensor` (marked
    modified now, and given the result when the engine worked on a contiguous copy)."""
    if in_place:
        _mark_modified(tensor)

    def finish(_handles):
        if in_place and target is not tensor:
            tensor.copy_(target)
            return tensor
        return target

    return _register(handles, finish, keep)


def _abandon(handles):
    """A multi-part submit failed part-way: the parts already queued still read their buffers,
    so wait for them (they fail or finish) before the buffers can go."""
    lib = _capi.lib()
    for h in handles:
        lib.handle_wait(h)
        lib.handle_release(h)


def _engine_output(handle, dtype, device):
    """The engine-allocated result of an op, as a tensor of `dtype` on `device`."""
    lib = _capi.lib()
    ndim = ctypes.c_int()
    lib.check(lib.handle_output_shape(handle, None, 0, ctypes.byref(ndim)))
    dims = (ctypes.c_int64 * max(ndim.value, 1))()
    lib.check(lib.handle_output_shape(handle, dims, ndim.value, ctypes.byref(ndim)))
    data = ctypes.c_void_p()
    nbytes = ctypes.c_int64()
    lib.check(lib.handle_output(handle, ctypes.byref(data), ctypes.byref(nbytes)))
    out = torch.empty(tuple(dims[:ndim.value]), dtype=dtype)
    if nbytes.value:
        ctypes.memmove(out.data_ptr(), data.value, nbytes.value)
    return out if device.type == "cpu" else out.to(device)


def _received_splits(handle, like):
    lib = _capi.lib()
    count = ctypes.c_int()
    lib.check(lib.handle_received_splits(handle, None, 0, ctypes.byref(count)))
    splits = (ctypes.c_int64 * max(count.value, 1))()
    lib.check(lib.handle_received_splits(handle, splits, count.value, ctypes.byref(count)))
    if like is not None:  # Horovod: the received splits take the given splits' type and place
        return torch.tensor(splits[:count.value], dtype=like.dtype, device=like.device)
    return torch.tensor(splits[:count.value], dtype=torch.int32)


def _resolve_op(op, average, what):
    if op is not None and average is not None:
        raise ValueError("%s: the op parameter supersedes average. Please provide only one of "
                         "them." % what)
    if op is None:
        op = Average if average is None or average else Sum
    return check_op(op)


def _is_fp16(compression):
    return compression is FP16Compressor or isinstance(compression, FP16Compressor)


def _splits_list(splits):
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        if splits.dim() != 1 or splits.dtype.is_floating_point or splits.dtype == torch.bool:
            raise ValueError("alltoall: splits must be a 1-D integer tensor or a list of ints")
        return [int(s) for s in splits.tolist()]
    try:
        return [int(s) for s in splits]
    except (TypeError, ValueError):
        raise ValueError("alltoall: splits must be a 1-D integer tensor or a list of ints, got "
                         "%r" % (splits,)) from None


def _reducescatter_op(op):
    op = check_op(op)
    if op not in (Average, Sum):
        raise ValueError("reducescatter: op must be hvd.Average or hvd.Sum")
    return op


def _reducescatter_grad_scale(op, prescale, postscale, process_set):
    # Horovod's backward: the gathered gradients times the set's size for Sum, as they are for
    # Average; the scale factors apply to the gradient as they did to the input.
    return (process_set.size() if op == Sum else 1) * prescale * postscale


def _member_names(prefix, name, n, set_id=0):
    base = _op_name(prefix, name, set_id)
    return ["%s_%dof%d" % (base, i + 1, n) for i in range(n)]


def _gathered(handles, tensors):
    return tuple(_engine_output(h, t.dtype, t.device) for h, t in zip(handles, tensors))


# --- barrier, join, handles --------------------------------------------------------------------

def _allreduce_async(tensor, in_place, name, op, prescale, postscale, fp16=False, set_id=0):
    what = "allreduce"
    dtype = _dtype_code(tensor, what)
    device, stream = _device_of(tensor, what)
    work = _contiguous(tensor)
    target = work if in_place else torch.empty_like(work, memory_format=torch.contiguous_format)
    shape, ndim = _capi.shape_array(work.shape)
    o = _capi.options(op=op, prescale=prescale, postscale=postscale, fp16=fp16, device=device,
                      stream=stream, process_set=set_id)
    h = _submit(_capi.lib().allreduce_async, _op_name("allreduce", name, set_id).encode(),
                work.data_ptr(), target.data_ptr(), shape, ndim, dtype, ctypes.byref(o))
    return _register_result([h], tensor, target, in_place, keep=work)


def barrier(process_set=global_process_set):
    """Returns once every member of the set has called barrier() on it."""
    set_id = _set_id(process_set, "barrier")
    synchronize(_register([_submit(_capi.lib().process_set_barrier_async, set_id)],
                          lambda _: None))


def join(device=-1):
    """This rank has no more data: until every rank has joined it takes part in the others'
    allreduces with zeros. Returns the rank that joined last, the same on every rank."""
    lib = _capi.lib()
    last = ctypes.c_int()
    status = lib.join(ctypes.byref(last))
    if status != _capi.OK:
        raise HorovodInternalError(_capi.NOT_INITIALIZED if not lib.is_initialized() else lib.error())
    return last.value


def poll(handle):
    """True once the op of `handle` finished (its synchronize will not block)."""
    with _lock:
        pending = _pending.get(handle)
    if pending is None:
        raise ValueError("Handle %r was not created or has been cleared." % (handle,))
    lib = _capi.lib()
    return all(lib.handle_poll(h) for h in pending.handles)


def synchronize(handle):
    """Waits for the op of `handle` and returns its output; raises HorovodInternalError if it
    failed. An unknown handle (already synchronized) gives None, as in Horovod."""
    with _lock:
        pending = _pending.pop(handle, None)
    if pending is None:
        return None
    lib = _capi.lib()
    try:
        failure = None
        for h in pending.handles:
            if lib.handle_wait(h) != _capi.OK and failure is None:
                failure = lib.error()
        if failure is not None:
            raise HorovodInternalError(failure)
        moved = pending.moved()
        if moved is not None:
            # Its result went to (or its input came from) memory the tensor no longer owns:
            # fail the op rather than return values that are not the collective's.
            name = lib.handle_name(pending.handles[0])
            raise HorovodInternalError(
                "%s: the tensor was resized or given new storage while its op was in flight "
                "(now %s); the op used the memory it had at submit, so its result is lost. "
                "Synchronize an op before changing its tensor." % (
                    (name or b"op").decode("utf-8", "replace"), list(moved.shape)))
        return pending.finish(pending.handles)
    finally:
        for h in pending.handles:
            lib.handle_release(h)
