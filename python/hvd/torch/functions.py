"""Whole-model helpers of hvd.torch (Horovod's horovod.torch.functions): broadcasting a
model's parameters and an optimizer's state from one rank, and moving picklable objects. Each
takes process_set= (the global set by default): only its members call it, and root_rank is a
job rank that is a member."""

import io
import pickle

import torch

from hvd.torch.mpi_ops import allgather, broadcast_, broadcast_async_, synchronize
from hvd.torch.process_sets import _set_id, global_process_set

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
    """A new optimizer has no state until its first step, and every rank needs the same state
    entries before they can be broadcast. One local step on zero gradients creates them (Adam's
    moments, SGD's momentum buffers); the parameters are put back afterwards, since weight
    decay would move them even on a zero gradient."""
    saved = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                saved[p] = p.grad
                p.grad = torch.zeros_like(p.data)
                if isinstance(optimizer, torch.optim.SparseAdam):
                    p.grad = p.grad.to_sparse()
    values = {p: p.data.clone() for p in saved}
    # A DistributedOptimizer's own step() would allreduce: call the wrapped class's step.
    step = getattr(optimizer, "_hvd_local_step", optimizer.step)
    step()
    for p, grad in saved.items():
        p.data.copy_(values[p])  # weight decay on a zero gradient must not change the model
        p.grad = grad


def broadcast_optimizer_state(optimizer, root_rank, prefix="Parameter.",
                              process_set=global_process_set):
    """Copies root_rank's optimizer state (per-parameter buffers and the param groups'
    options, such as lr) into every member's optimizer."""
    _set_id(process_set, "broadcast_optimizer_state")
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    if len(optimizer.state_dict()["state"]) == 0:
        _initialise_state(optimizer)
    state_dict = optimizer.state_dict()
    if len(state_dict["state"]) == 0:
        return  # a stateless optimizer (plain SGD): only the options below

    # Tensors in place, keyed by the parameter's position and the state's name, so every rank
    # submits the same names; scalars (Adam's step in torch < 1.12) travel as float64 tensors.
    tensors = []
    scalars = []
    for index, group in enumerate(state_dict["param_groups"]):
        for pid in group["params"]:
            if pid not in state_dict["state"]:
                continue
            for key, value in sorted(state_dict["state"][pid].items()):
                name = "%s%d.%d.%s" % (prefix, index, pid, key)
                if torch.is_tensor(value):
                    tensors.append((name, value))
                else:
                    holder = torch.tensor([float(value)], dtype=torch.float64)
                    tensors.append((name, holder))
                    scalars.append((pid, key, type(value), holder))
    broadcast_parameters(tensors, root_rank, process_set=process_set)
    options = broadcast_object([{k: v for k, v in g.items() if k != "params"}
                                for g in state_dict["param_groups"]], root_rank,
                               name="%soptions" % prefix, process_set=process_set)
    for group, root_options in zip(state_dict["param_groups"], options):
        group.update(root_options)
    for pid, key, kind, holder in scalars:
        state_dict["state"][pid][key] = kind(holder.item())
    optimizer.load_state_dict(state_dict)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's `obj` (anything picklable), on every member (root_rank: a job rank)."""
    _set_id(process_set, "broadcast_object")
    from hvd.torch.basics import rank
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
