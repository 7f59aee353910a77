"""Whole-model helpers of hvd.torch (Horovod's horovod.torch.functions): broadcasting a
model's parameters and an optimizer's state from one rank, and moving picklable objects. Each
takes process_set= (the global set by default): only its members call it, and root_rank is a
job rank that is a member."""

import io
import pickle

import torch

from hvd.torch._engine import _DTYPES, _set_id
from hvd.torch.basics import rank
from hvd.torch.mpi_ops import allgather, broadcast_, broadcast_async_, synchronize
from hvd.torch.process_sets import global_process_set

try:  # Horovod pickles with cloudpickle (lambdas, local classes); plain pickle otherwise
    import cloudpickle as _pickler
except ImportError:  # pragma: no cover - depends on the machine
    _pickler = pickle


def _named_tensors(params, what):
    if isinstance(params, dict):
        return sorted(params.items())
    if isinstance(params, list):
        for item in params:
            if not (isinstance(item, tuple) and len(item) == 2):
                raise ValueError("%s: invalid params of type %s: a list must hold (name, tensor) "
                                 "pairs, as model.named_parameters() gives" % (what, type(item)))
        return params
    raise ValueError("%s: invalid params of type: %s (a state_dict or a list of (name, tensor)"
                     " pairs)" % (what, type(params)))


def broadcast_parameters(params, root_rank, prefix=None, process_set=global_process_set):
    """Copies root_rank's tensors into every rank's: `params` is a state_dict
    (model.state_dict()) or a list of (name, tensor) pairs (model.named_parameters()).
    Tensors travel in place, all at once; a None entry is skipped."""
    _set_id(process_set, "broadcast_parameters")
    handles = []
    for name, p in _named_tensors(params, "broadcast_parameters"):
        if p is None:
            continue
        key = name if prefix is None else prefix + name
        # A parameter that requires grad cannot be written in place by autograd's rules, but
        # its data can: the broadcast replaces values, not the graph.
        target = p.data if isinstance(p, torch.nn.Parameter) else p
        handles.append(broadcast_async_(target, root_rank, name=key, process_set=process_set))
    for h in handles:
        synchronize(h)


def _initialise_state(optimizer):
    """A new optimizer has no state until its first step. As in Horovod, one local step on
    zero gradients creates it (Adam's moments, SGD's momentum buffers), and the zero gradients
    stay behind (a parameter that does not require grad keeps its own); the parameters' values
    are put back, since weight decay would move them even on a zero gradient."""
    values = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                values[p] = p.data.clone()
                zeros = torch.zeros_like(p.data)
                # SparseAdam accepts sparse gradients only: an empty sparse tensor is its zero.
                p.grad = zeros.to_sparse() if isinstance(optimizer, torch.optim.SparseAdam) \
                    else zeros
    # A DistributedOptimizer's own step() would allreduce: call the wrapped class's step.
    step = getattr(optimizer, "_hvd_local_step", optimizer.step)
    step()
    with torch.no_grad():
        for p, value in values.items():
            p.data.copy_(value)  # weight decay on a zero gradient must not change the model


class _Slot:
    """Stands for a state tensor of the root in the description every rank receives: the
    tensor itself travels separately, broadcast in place."""

    __slots__ = ("shape", "dtype", "on_cpu")

    def __init__(self, tensor):
        self.shape = tuple(tensor.shape)
        self.dtype = tensor.dtype
        self.on_cpu = tensor.device.type == "cpu"

    def __getstate__(self):
        return self.shape, self.dtype, self.on_cpu

    def __setstate__(self, state):
        self.shape, self.dtype, self.on_cpu = state

    def fits(self, value):
        """Whether `value` can receive the root's tensor in place."""
        return (torch.is_tensor(value) and value.layout == torch.strided
                and value.dtype == self.dtype and tuple(value.shape) == self.shape
                and (value.device.type == "cpu") == self.on_cpu)


def _travels_in_place(value):
    # Sparse tensors and dtypes the engine does not carry (bool, complex) go with the pickle.
    return torch.is_tensor(value) and value.layout == torch.strided and value.dtype in _DTYPES


def _describe(optimizer, params):
    """The root's optimizer as one picklable object: every param group's options, and every
    parameter's state with its tensors replaced by _Slots."""
    groups = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    sizes = [len(g["params"]) for g in optimizer.param_groups]
    state = []
    for index, p in enumerate(params):
        if p in optimizer.state:
            entries = optimizer.state[p]
            state.append((index, {key: _Slot(value) if _travels_in_place(value) else value
                                  for key, value in entries.items()}))
    return {"groups": groups, "sizes": sizes, "state": state}


def broadcast_optimizer_state(optimizer, root_rank, prefix="Parameter.",
                              process_set=global_process_set):
    """Copies root_rank's optimizer state into every member's optimizer: each param group's
    options (lr, momentum, betas, ...) and each parameter's state entries, with their types.
    A new optimizer first takes one local step on zero gradients to create its state (the
    zero gradients stay, the parameters do not move).

    The root's options and non-tensor state (None, numbers, ...) travel in one pickled
    object, together with a description of its state tensors; those are then broadcast in
    place, so every rank submits the same collectives whatever its own state looks like."""
    _set_id(process_set, "broadcast_optimizer_state")
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    if len(optimizer.state) == 0:
        _initialise_state(optimizer)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    layout = _describe(optimizer, params) if rank() == root_rank else None
    layout = broadcast_object(layout, root_rank, name="%sstate" % prefix,
                              process_set=process_set)

    mismatch = None
    if layout["sizes"] != [len(g["params"]) for g in optimizer.param_groups]:
        mismatch = ("broadcast_optimizer_state: the root's optimizer has param groups of %s "
                    "parameters, this rank's of %s" %
                    (layout["sizes"], [len(g["params"]) for g in optimizer.param_groups]))

    # Every rank broadcasts one tensor per slot of the root's description, in its order: its
    # own state tensor where it fits, a new one otherwise.
    tensors = []
    received = []
    for index, entries in layout["state"]:
        p = params[index] if mismatch is None else None
        own = optimizer.state.get(p, {}) if p is not None else {}
        values = {}
        for key, value in entries.items():
            if isinstance(value, _Slot):
                current = own.get(key)
                if not value.fits(current):
                    device = "cpu" if value.on_cpu or p is None else p.device
                    current = torch.empty(value.shape, dtype=value.dtype, device=device)
                tensors.append(("%s%d.%s" % (prefix, index, key), current.detach()))
                value = current
            values[key] = value
        received.append((p, values))
    broadcast_parameters(tensors, root_rank, process_set=process_set)
    if mismatch is not None:
        raise ValueError(mismatch)

    for group, options in zip(optimizer.param_groups, layout["groups"]):
        for key in [k for k in group if k != "params" and k not in options]:
            del group[key]
        group.update(options)
    for p, values in received:
        entries = optimizer.state.setdefault(p, {})
        entries.clear()
        entries.update(values)
    kept = {id(p) for p, _ in received}
    for p in [p for p in optimizer.state if id(p) not in kept]:
        del optimizer.state[p]  # no state on the root: none here either


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's `obj` (anything picklable), on every member (root_rank: a job rank)."""
    _set_id(process_set, "broadcast_object")
    name = name or type(obj).__name__
    if rank() == root_rank:
        buffer = io.BytesIO()
        _pickler.dump(obj, buffer)
        payload = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    broadcast_(length, root_rank, name="%s.sz" % name, process_set=process_set)
    if rank() != root_rank:
        payload = torch.zeros(int(length.item()), dtype=torch.uint8)
    broadcast_(payload, root_rank, name="%s.t" % name, process_set=process_set)
    if rank() == root_rank:
        return obj
    return _pickler.loads(payload.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """A list of every member's `obj` (anything picklable), in the set's rank order."""
    _set_id(process_set, "allgather_object")
    name = name or type(obj).__name__
    payload = torch.frombuffer(bytearray(_pickler.dumps(obj)), dtype=torch.uint8)
    lengths = allgather(torch.tensor([payload.numel()], dtype=torch.int64),
                        name="%s.sz" % name, process_set=process_set)
    gathered = allgather(payload, name="%s.t" % name, process_set=process_set).numpy().tobytes()
    objects = []
    offset = 0
    for n in lengths.tolist():
        objects.append(_pickler.loads(gathered[offset:offset + n]))
        offset += n
    return objects


__all__ = ["broadcast_parameters", "broadcast_optimizer_state", "broadcast_object",
           "allgather_object"]
