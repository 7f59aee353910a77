"""Process sets (Horovod's horovod.common.process_sets): collectives over a subset of the job's
ranks, on libhvd's process sets (hvd/hvd_process_sets.h).

    even = hvd.ProcessSet([0, 2])
    hvd.init(process_sets=[even])                  # or hvd.add_process_set() in dynamic mode
    if even.included():
        hvd.allreduce(t, process_set=even)         # only the set's members submit it

A ProcessSet is its ranks (job ranks, sorted) and, once registered with libhvd, an id that
every rank agrees on. Results are as for a job of the members: an allgather concatenates the
members' inputs in set order, Average divides by the set's size, a reducescatter or alltoall
splits over the members; a broadcast's root_rank stays a job rank (hvd.rank()), which must be a
member. Ops of different sets run independently, each set negotiating on its own.

Sets are registered at init (hvd.init(process_sets=[...]), or HVD_PROCESS_SETS="0,1;2,3" in
the environment), or — in dynamic mode (hvd.init(process_sets="dynamic"), or
HOROVOD_DYNAMIC_PROCESS_SETS=1 / HVD_DYNAMIC_PROCESS_SETS=1) — added and removed at run time
by every rank of the job together, in the same order.
"""

import ctypes
import weakref

from hvd import _capi
from hvd.exceptions import HorovodInternalError
from hvd.torch.basics import rank
_BAD_ARGUMENT = ("ProcessSet should be initialized with a list of process ranks or an mpi4py "
                 "Comm object")


def _is_mpi_comm(obj):
    """An mpi4py communicator, recognised without importing mpi4py (which initialises MPI)."""
    return any(c.__module__.split(".")[0] == "mpi4py" and c.__name__.endswith("Comm")
               for c in type(obj).__mro__)


class ProcessSet:
    """A set of the job's ranks that runs collectives together. Build it from a list of ranks,
    then register it: pass it to hvd.init(process_sets=[...]) or to hvd.add_process_set().
    process_set_id is None until it is registered, and again after hvd.remove_process_set()."""

    process_set_id = None
    ranks = None
    mpi_comm = None  # hvd has no sets defined by an MPI communicator: always None

    def __init__(self, ranks_or_comm):
        if _is_mpi_comm(ranks_or_comm):
            raise ValueError(
                "hvd has no process sets defined by an MPI communicator (hvd does not run on "
                "MPI communicators); build the ProcessSet from a list of job ranks instead, "
                "e.g. hvd.ProcessSet(comm.allgather(hvd.rank()))")
        try:
            ranks = list(ranks_or_comm)
        except TypeError:
            raise ValueError(_BAD_ARGUMENT) from None
        if any(isinstance(r, bool) or not isinstance(r, int) for r in ranks):
            raise ValueError(_BAD_ARGUMENT)
        self.ranks = sorted(ranks)

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """The number of ranks in the set, or None if it is not registered."""
        if self.process_set_id is None:
            return None
        return _query("process_set_size", self.process_set_id)

    def rank(self):
        """This process's index in the set (its rank among the members), or None if the set is
        not registered. Ops such as broadcast still name ranks by hvd.rank(), not by this."""
        if self.process_set_id is None:
            return None
        if not _query("process_set_included", self.process_set_id):
            raise ValueError("Process is not part of provided process set.")
        return _query("process_set_rank", self.process_set_id)

    def included(self):
        """Whether this process is a member of the set (None if it has no ranks)."""
        if self.ranks is None:
            return None
        return rank() in self.ranks

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=%s)" % (
            self.process_set_id, self.ranks, self.mpi_comm)

    __repr__ = __str__


# Every rank: its ranks are filled in by hvd.init().
global_process_set = ProcessSet([])
global_process_set.process_set_id = 0

# The sets registered through this module since the last init (global_process_set aside): a
# new init starts a new table of sets, so they are invalidated then.
_registered = weakref.WeakSet()


def _initialized_lib():
    lib = _capi.lib()
    if not lib.is_initialized():
        raise ValueError(_capi.NOT_INITIALIZED)
    return lib


def _raise(lib, status):
    """The exception of a failed process-set call: an invalid argument (a set that does not
    exist, a rank outside the job, dynamic mode off, ...) is a ValueError."""
    message = lib.error()
    if status == _capi.ERR_INVALID_ARGUMENT:
        raise ValueError(message)
    raise HorovodInternalError(message)


def _query(fn_name, set_id):
    lib = _initialized_lib()
    out = ctypes.c_int()
    status = getattr(lib, fn_name)(set_id, ctypes.byref(out))
    if status != _capi.OK:
        _raise(lib, status)
    return out.value


def _int_list(fn, *args):
    """A list filled by a call like hvd_process_set_ids(..., values, capacity, &count)."""
    lib = _initialized_lib()
    count = ctypes.c_int()
    while True:
        capacity = count.value
        values = (ctypes.c_int * max(capacity, 1))()
        status = fn(*args, values, capacity, ctypes.byref(count))
        if status != _capi.OK:
            _raise(lib, status)
        if count.value <= capacity:  # else the table grew meanwhile (dynamic mode): again
            return list(values[:count.value])


def _table():
    """{set id: its ranks} of the sets that exist now."""
    lib = _initialized_lib()
    return {i: _int_list(lib.process_set_ranks, i) for i in _int_list(lib.process_set_ids)}


def _id_of(ranks):
    for set_id, members in _table().items():
        if members == ranks:
            return set_id
    return None


# Whether the last hvd.init() asked for dynamic process sets: an elastic reset initialises
# again in the same mode, so that a reset callback can declare the new round's sets.
_dynamic_requested = False


def dynamic_requested():
    return _dynamic_requested


def _parse_init_argument(process_sets):
    """hvd.init()'s process_sets: (the ProcessSets to register, dynamic mode)."""
    if process_sets is None:
        return [], False
    if isinstance(process_sets, str):
        if process_sets.lower() != "dynamic":
            raise ValueError("hvd.init(process_sets=%r): expected a list of hvd.ProcessSet, "
                             "\"dynamic\" or None" % (process_sets,))
        return [], True
    try:
        sets = list(process_sets)
    except TypeError:
        raise ValueError("hvd.init(process_sets=...): expected a list of hvd.ProcessSet, "
                         "\"dynamic\" or None, got %s" % type(process_sets).__name__) from None
    for ps in sets:
        if not isinstance(ps, ProcessSet) or ps.ranks is None:
            raise ValueError("hvd.init(process_sets=...): every entry must be an hvd.ProcessSet "
                             "built from a list of ranks, got %r" % (ps,))
    return sets, False


_BAD_COMM = ("Invalid type of argument comm. Expected list of rank integers or mpi4py.MPI.Comm "
             "object.")


def _parse_comm(comm):
    """hvd.init()'s comm: the launched ranks that form the job, in its rank order ([] for all
    of them, as None)."""
    if comm is None:
        return []
    if _is_mpi_comm(comm):
        raise NotImplementedError(
            "hvd.init(comm=<MPI communicator>): hvd does not run on a caller's MPI communicator; "
            "pass the ranks that form the job as a list instead (hvd.init(comm=[0, 2, ...]), "
            "ranks as launched: MPI_COMM_WORLD's under mpirun), or call hvd.init() for them all")
    try:
        ranks = list(comm)
    except TypeError:
        raise ValueError(_BAD_COMM) from None
    if any(isinstance(r, bool) or not isinstance(r, int) for r in ranks):
        raise ValueError(_BAD_COMM)
    return ranks


def init_process_sets(process_sets, comm=None):
    """hvd.init()'s work: starts libhvd (with the given sets, or HVD_PROCESS_SETS from the
    environment when there are none; among the launched ranks `comm` lists, or all), then gives
    each ProcessSet object its id. As in Horovod, an entry whose ranks equal an earlier entry's
    (or every rank: the global set) is invalidated and makes init raise ValueError, naming it,
    once libhvd is up."""
    global _dynamic_requested
    members = _parse_comm(comm)
    sets, dynamic = _parse_init_argument(process_sets)
    _dynamic_requested = dynamic
    lib = _capi.lib()
    was_initialized = bool(lib.is_initialized())
    flat = [r for ps in sets for r in ps.ranks]
    ranks = (ctypes.c_int * max(len(flat), 1))(*flat)
    sizes = (ctypes.c_int * max(len(sets), 1))(*[len(ps.ranks) for ps in sets])
    if members:
        listed = (ctypes.c_int * len(members))(*members)
        lib.check(lib.init_members(listed, len(members), ranks, sizes, len(sets),
                                   1 if dynamic else 0), submit=True)
    elif sets or dynamic:
        lib.check(lib.init_process_sets(ranks, sizes, len(sets), 1 if dynamic else 0),
                  submit=True)
    else:
        lib.check(lib.init(), submit=True)
    if not was_initialized:
        # A new table of sets: the ids of the objects registered before mean nothing now.
        for ps in list(_registered):
            ps._invalidate()
        _registered.clear()
    table = _table()
    global_process_set.ranks = table[0]
    global_process_set.process_set_id = 0
    by_ranks = {tuple(members): set_id for set_id, members in table.items()}
    seen = {0}
    for ps in sets:
        set_id = by_ranks.get(tuple(ps.ranks))
        if set_id is None:  # only when hvd was initialized already, without this set
            raise ValueError(
                "hvd.init(process_sets=...): hvd is initialized already and has no process set "
                "with ranks %s; call hvd.shutdown() first, or hvd.add_process_set() in dynamic "
                "mode" % (ps.ranks,))
        if set_id in seen:
            ps._invalidate()
        else:
            seen.add(set_id)
            ps.process_set_id = set_id
            _registered.add(ps)
    for index, ps in enumerate(sets):
        if ps.process_set_id is None:
            raise ValueError("Horovod could not be initialized because process_sets entry number "
                             "%d is a duplicate: %s" % (index, ps))


def add_process_set(process_set):
    """Registers a new set (a ProcessSet, or a list of ranks) and returns its ProcessSet.
    Dynamic mode only; every rank of the job must call it, with the same sets in the same
    order. A set whose ranks are registered already raises ValueError."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.ranks is None:
        raise ValueError("add_process_set: %s has no ranks" % (process_set,))
    lib = _initialized_lib()
    n = len(process_set.ranks)
    ranks = (ctypes.c_int * max(n, 1))(*process_set.ranks)
    set_id = ctypes.c_int()
    status = lib.add_process_set(ranks, n, ctypes.byref(set_id))
    if status != _capi.OK:
        message = lib.error()
        if status == _capi.ERR_INVALID_ARGUMENT and _id_of(process_set.ranks) is not None:
            raise ValueError("Attempted to add a duplicate process set: %s (%s)" %
                             (process_set, message))
        if status == _capi.ERR_INVALID_ARGUMENT:
            raise ValueError(message)
        raise HorovodInternalError(message)
    process_set.process_set_id = set_id.value
    _registered.add(process_set)
    return process_set


def remove_process_set(process_set):
    """Removes a set registered before; True if it was removed. False for the global set and
    for a set that is not registered. Dynamic mode only; every rank of the job must call it.
    Once removed, the ProcessSet object is invalidated (process_set_id None); ops of the set
    still pending fail."""
    if not isinstance(process_set, ProcessSet):
        raise ValueError("remove_process_set: expected an hvd.ProcessSet, got %r" %
                         (process_set,))
    set_id = process_set.process_set_id
    if set_id is None or set_id == 0:
        return False
    lib = _initialized_lib()
    removed = ctypes.c_int()
    status = lib.remove_process_set(set_id, ctypes.byref(removed))
    if status != _capi.OK:
        _raise(lib, status)  # e.g. not in dynamic mode: the set stays, and so does the object
    process_set._invalidate()
    _registered.discard(process_set)
    return bool(removed.value)


def process_set_by_id(process_set_id):
    """The ProcessSet of a registered id (e.g. of a set HVD_PROCESS_SETS defined)."""
    table = _table()
    if process_set_id not in table:
        raise ValueError("No known process set with id %r" % (process_set_id,))
    return _object_for(process_set_id, table[process_set_id])


def process_sets():
    """A ProcessSet for each registered id, ascending (global_process_set first)."""
    return [_object_for(set_id, members) for set_id, members in sorted(_table().items())]


def _object_for(set_id, members):
    if set_id == 0:
        return global_process_set
    for ps in list(_registered):
        if ps.process_set_id == set_id:
            return ps
    ps = ProcessSet(members)
    ps.process_set_id = set_id
    _registered.add(ps)
    return ps
