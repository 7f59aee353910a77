"""libhvd's C ABI (hvd/hvd.h, hvd/hvd_engine.h, hvd/hvd_process_sets.h) through ctypes.

Everything framework-independent lives here: loading the library, the argument types of every
entry point, and turning a status code into the exception a binding raises. ctypes releases
the interpreter lock around each foreign call, so a thread blocked in a wait lets the others
(and torch's autograd threads) run.
"""

import ctypes
import os
import threading

from hvd.exceptions import HorovodInternalError

# Horovod's words for an op, query or process-set call before hvd.init().
NOT_INITIALIZED = "Horovod has not been initialized; use hvd.init()."

# hvd_status
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_TIMEOUT = 2
ERR_PEER = 3
ERR_BACKEND = 4
ERR_INTERNAL = 5

# hvd_datatype (values are the C ABI's)
INT8, UINT8, INT32, INT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64, INT16 = range(9)

# hvd_reduce_op
SUM, AVERAGE, MIN, MAX, PRODUCT, ADASUM = range(6)


class OpOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("op", ctypes.c_int),
        ("prescale_factor", ctypes.c_double),
        ("postscale_factor", ctypes.c_double),
        ("fp16_compression", ctypes.c_int),
        ("root", ctypes.c_int),
        ("device", ctypes.c_int),
        ("stream", ctypes.c_void_p),
        ("process_set", ctypes.c_int),
    ]


class EngineStats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t)] + [
        (name, ctypes.c_uint64)
        for name in ("cycles", "negotiations", "collectives", "fused_tensors", "cache_hits",
                     "responses", "errors", "bytes")
    ]


_Handle = ctypes.c_void_p
_Status = ctypes.c_int
_i64p = ctypes.POINTER(ctypes.c_int64)
_intp = ctypes.POINTER(ctypes.c_int)
_opts = ctypes.POINTER(OpOptions)
_handlep = ctypes.POINTER(_Handle)

# name: (restype, argtypes)
_SIGNATURES = {
    "hvd_last_error": (ctypes.c_char_p, []),
    "hvd_init": (_Status, []),
    "hvd_shutdown": (_Status, []),
    "hvd_is_initialized": (ctypes.c_int, []),
    "hvd_rank": (_Status, [_intp]),
    "hvd_size": (_Status, [_intp]),
    "hvd_local_rank": (_Status, [_intp]),
    "hvd_local_size": (_Status, [_intp]),
    "hvd_cross_rank": (_Status, [_intp]),
    "hvd_cross_size": (_Status, [_intp]),
    "hvd_is_homogeneous": (_Status, [_intp]),
    "hvd_nccl_built": (ctypes.c_int, []),
    "hvd_nccl_version": (ctypes.c_char_p, []),
    "hvd_cpu_backend": (ctypes.c_char_p, []),
    "hvd_op_options_init": (None, [_opts]),
    "hvd_allreduce_async": (_Status, [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, _i64p,
                                      ctypes.c_int, ctypes.c_int, _opts, _handlep]),
    "hvd_grouped_allreduce_async": (_Status, [
        ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_i64p), _intp, ctypes.c_int, _opts,
        _handlep]),
    "hvd_allgather_async": (_Status, [ctypes.c_char_p, ctypes.c_void_p, _i64p, ctypes.c_int,
                                      ctypes.c_int, _opts, _handlep]),
    "hvd_broadcast_async": (_Status, [ctypes.c_char_p, ctypes.c_void_p, _i64p, ctypes.c_int,
                                      ctypes.c_int, _opts, _handlep]),
    "hvd_reducescatter_async": (_Status, [ctypes.c_char_p, ctypes.c_void_p, _i64p, ctypes.c_int,
                                          ctypes.c_int, _opts, _handlep]),
    "hvd_alltoall_async": (_Status, [ctypes.c_char_p, ctypes.c_void_p, _i64p, ctypes.c_int, _i64p,
                                     ctypes.c_int, ctypes.c_int, _opts, _handlep]),
    "hvd_barrier_async": (_Status, [_handlep]),
    "hvd_process_set_barrier_async": (_Status, [ctypes.c_int, _handlep]),
    "hvd_join": (_Status, [_intp]),
    "hvd_handle_poll": (ctypes.c_int, [_Handle]),
    "hvd_handle_wait": (_Status, [_Handle]),
    "hvd_handle_wait_for": (_Status, [_Handle, ctypes.c_int64, _intp]),
    "hvd_handle_output": (_Status, [_Handle, ctypes.POINTER(ctypes.c_void_p), _i64p]),
    "hvd_handle_output_shape": (_Status, [_Handle, _i64p, ctypes.c_int, _intp]),
    "hvd_handle_received_splits": (_Status, [_Handle, _i64p, ctypes.c_int, _intp]),
    "hvd_handle_name": (ctypes.c_char_p, [_Handle]),
    "hvd_handle_release": (None, [_Handle]),
    "hvd_start_timeline": (_Status, [ctypes.c_char_p, ctypes.c_int]),
    "hvd_stop_timeline": (_Status, []),
    "hvd_get_engine_stats": (_Status, [ctypes.POINTER(EngineStats)]),
    "hvd_init_process_sets": (_Status, [_intp, _intp, ctypes.c_int, ctypes.c_int]),
    "hvd_init_members": (_Status, [_intp, ctypes.c_int, _intp, _intp, ctypes.c_int,
                                   ctypes.c_int]),
    "hvd_add_process_set": (_Status, [_intp, ctypes.c_int, _intp]),
    "hvd_remove_process_set": (_Status, [ctypes.c_int, _intp]),
    "hvd_process_set_ids": (_Status, [_intp, ctypes.c_int, _intp]),
    "hvd_process_set_ranks": (_Status, [ctypes.c_int, _intp, ctypes.c_int, _intp]),
    "hvd_process_set_size": (_Status, [ctypes.c_int, _intp]),
    "hvd_process_set_rank": (_Status, [ctypes.c_int, _intp]),
    "hvd_process_set_included": (_Status, [ctypes.c_int, _intp]),
    "hvd_elastic_enabled": (ctypes.c_int, []),
    "hvd_elastic_round": (ctypes.c_int, []),
    "hvd_elastic_pending": (_Status, [_intp, _intp]),
    "hvd_elastic_removed": (ctypes.c_int, []),
}


class SubmitError(ValueError):
    """An op refused at submit for an argument wrong on this rank (Horovod: ValueError)."""


def _library_path():
    explicit = os.environ.get("HVD_LIBRARY")
    if explicit:
        return explicit
    try:
        from hvd import _library  # written by the build and by cmake --install
        return _library.PATH
    except ImportError:
        return "libhvd.so.0"  # the loader's search (LD_LIBRARY_PATH, ldconfig)


class Library:
    """The loaded libhvd with typed entry points; one per process (``lib()``)."""

    def __init__(self, path):
        try:
            self._dll = ctypes.CDLL(path)
        except OSError as e:
            raise ImportError(
                "hvd: cannot load libhvd from %r (%s); build hvd (scripts/demo.sh) and put "
                "<build>/python on PYTHONPATH, or set HVD_LIBRARY to libhvd.so" % (path, e)
            ) from None
        self.path = path
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(self._dll, name)
            fn.restype = restype
            fn.argtypes = argtypes
            setattr(self, name[4:], fn)  # hvd_allreduce_async -> allreduce_async

    def error(self):
        message = self.last_error()
        return message.decode("utf-8", "replace") if message else "unknown error"

    def check(self, status, submit=False):
        """Raises for a failed status: at submit an invalid argument is a ValueError and
        anything else (the engine had already failed) a HorovodInternalError; at wait
        (submit=False) every failure is a HorovodInternalError, as in Horovod."""
        if status == OK:
            return
        message = self.error()
        if submit and status == ERR_INVALID_ARGUMENT:
            raise SubmitError(message)
        raise HorovodInternalError(message)

    def query(self, fn):
        out = ctypes.c_int()
        self.check(fn(ctypes.byref(out)), submit=True)
        return out.value


_lock = threading.Lock()
_instance = None


def lib():
    global _instance
    if _instance is None:
        with _lock:
            if _instance is None:
                _instance = Library(_library_path())
    return _instance


def shape_array(shape):
    n = len(shape)
    return (ctypes.c_int64 * max(n, 1))(*shape), n


def options(op=AVERAGE, prescale=1.0, postscale=1.0, fp16=False, root=0, device=-1,
            stream=None, process_set=0):
    o = OpOptions()
    o.struct_size = ctypes.sizeof(OpOptions)
    o.op = op
    o.prescale_factor = prescale
    o.postscale_factor = postscale
    o.fp16_compression = 1 if fp16 else 0
    o.root = root
    o.device = device
    o.stream = stream
    o.process_set = process_set
    return o
