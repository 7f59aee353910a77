"""DistributedOptimizer (Horovod's horovod.torch.optimizer): wraps a torch optimizer so that
every gradient is averaged over the ranks (of its process set) before step() applies it.

Each parameter's gradient accumulator gets a hook: the moment the backward pass has produced
the gradient (after backward_passes_per_step passes), its allreduce is submitted to the engine,
so communication overlaps the rest of the backward pass. step() (or synchronize()) waits for
them all; a parameter whose gradient this rank did not compute this step is reduced with zeros,
so the ranks that did compute it do not stall. With a process set, the gradients are averaged
over its members only; on a rank outside the set the optimizer reduces nothing (Horovod: no
hooks, synchronize() returns at once) and step() applies the local gradients.

Sparse gradients (nn.Embedding(sparse=True)) stay sparse, so sparse optimizers (SparseAdam)
work: by default every member's rows are gathered (sparse_allreduce_async) and the parameter
gets their average, coalesced; with sparse_as_dense=True a dense copy is allreduced and the
parameter gets the result back sparse (its rows with a nonzero entry), as in Horovod; members
of a group are reduced densely that way too. They travel as row-sparse tensors (sparse_dim 1),
whatever layout this rank's gradient has (an accumulation into a zeroed gradient has sparse_dim
2), so that every rank's allgathers agree. A rank whose backward pass did not reach a sparse
parameter takes part with no rows if it saw a sparse gradient of it at an earlier step (a
tensor hook sees each parameter's first gradient); before that it cannot know the gradient
would be sparse and, as Horovod does, takes part with dense zeros, which only matches the other
ranks under sparse_as_dense=True (and gives it a dense gradient that step).

With op=hvd.Adasum the optimizer is Horovod's delta optimizer instead (_DistributedAdasumMixin):
Adasum combines the updates each rank's optimizer makes, not the gradients.
"""

import contextlib
import warnings

import torch

from hvd.torch.basics import Adasum, Average, Sum, check_op, size
from hvd.torch.compression import Compression
from hvd.torch._engine import _WIDE_FLOATS, _allreduce_async, _is_fp16, _set_id
from hvd.torch.mpi_ops import (allreduce_async_, grouped_allreduce_async_, sparse_allreduce_async,
                               synchronize)
from hvd.torch.process_sets import global_process_set


def _row_sparse(grad):
    """(row indices [n], rows [n, *grad.shape[1:]]) of a gradient, each row once: the form
    in which sparse gradients travel. The layout of a sparse gradient depends on how it came
    about (an Embedding's has sparse_dim 1, a zeroed one sparse_dim = ndim, and accumulating
    an empty batch's gradient into that keeps it), while the ranks' allgathers must agree."""
    if not grad.is_sparse:
        grad = grad.to_sparse(1)
    grad = grad.coalesce()
    indices, values = grad._indices(), grad._values()
    if grad.sparse_dim() == 1:
        return indices[0], values
    rows, inverse = torch.unique(indices[0], sorted=True, return_inverse=True)
    dense_rows = values.new_zeros((rows.numel(),) + tuple(grad.shape[1:]))
    dense_rows.index_put_((inverse,) + tuple(indices[1:]), values, accumulate=True)
    return rows, dense_rows


def _split(items, parts):
    """`items` in `parts` consecutive groups whose sizes differ by at most one."""
    base, extra = divmod(len(items), parts)
    groups, start = [], 0
    for i in range(parts):
        end = start + base + (1 if i < extra else 0)
        if end > start:
            groups.append(items[start:end])
        start = end
    return groups


def _parameter_names(param_groups, named_parameters):
    """{parameter: name} from named_parameters (checked as Horovod checks them), or generated
    names when it is None."""
    if named_parameters is not None:
        named_parameters = list(named_parameters)
    else:
        named_parameters = [("allreduce.noname.%d.%d" % (i, j), p)
                            for i, group in enumerate(param_groups)
                            for j, p in enumerate(group["params"])]
    if any(not isinstance(item, tuple) for item in named_parameters):
        raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                         "usually produced by model.named_parameters().")
    seen, duplicates = set(), []
    for name, _ in named_parameters:
        if name in seen and name not in duplicates:
            duplicates.append(name)
        seen.add(name)
    if duplicates:
        raise ValueError("Parameter names in named_parameters must be unique. Found "
                         "duplicates: %s" % ", ".join(duplicates))
    named_ids = {id(p) for _, p in named_parameters}
    unnamed = [id(p) for g in param_groups for p in g["params"] if id(p) not in named_ids]
    if unnamed:
        raise ValueError("named_parameters was specified, but one or more model parameters "
                         "were not named. Python object ids: %s" %
                         ", ".join(str(i) for i in unnamed))
    return {p: name for name, p in named_parameters}


class _HandlesMixin:
    """What both distributed optimizers share: reductions in flight in self._handles, and a
    countdown of backward passes per parameter in self._allreduce_delay."""

    def _hvd_local_step(self, closure=None):
        """The wrapped optimizer's own step, with no reduction (broadcast_optimizer_state)."""
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError(
                "optimizer.zero_grad() was called after loss.backward() but before "
                "optimizer.step() or optimizer.synchronize(). This is prohibited as it can "
                "cause a race condition.")
        return super().zero_grad(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _backward_pass_done(self, p):
        """Counts a backward pass that produced p's gradient; True when it was the last one
        before step(), so that p's reduction starts now."""
        if self._allreduce_delay[p] <= 0:
            raise AssertionError(
                "Gradients were computed more than backward_passes_per_step times before "
                "call to step(). Increase backward_passes_per_step to accumulate gradients "
                "locally.")
        assert not p.grad.requires_grad
        self._allreduce_delay[p] -= 1
        if self._allreduce_delay[p] > 0:
            self._handles.setdefault(p, (None, None))
            return False
        return True


class _DistributedMixin(_HandlesMixin):
    """Placed before the wrapped optimizer's class in a class made for it, so that isinstance
    checks against the original class still hold and super() reaches its step()."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, groups, sparse_as_dense, process_set):
        super().__init__(params)
        self.process_set = process_set
        self._compression = compression
        self.backward_passes_per_step = backward_passes_per_step
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self._parameter_names = _parameter_names(self.param_groups, named_parameters)
        self._requires_update = [p for g in self.param_groups for p in g["params"]
                                 if p.requires_grad]
        self._groups = self._make_groups(groups)
        self._group_of = {p: g for g in self._groups for p in g}
        self._allreduce_delay = {p: backward_passes_per_step for p in self._requires_update}
        self._handles = {}  # parameter (or group tuple) -> (handle, compression context)
        self._ready = {}    # group -> parameters of it whose gradients are ready
        self._sparse = set()  # parameters this rank has seen a sparse gradient of
        self._probes = {}     # parameter -> its probe's handle, until the probe has seen one
        self._probed = set()  # parameters whose probe has seen a gradient
        self._synchronized = False
        self._should_synchronize = True
        self._grad_accs = []
        self._hooked = False
        if self._reduces():
            self._register_hooks()

    def _reduces(self):
        """Whether this rank takes part in the reductions: a member of the set, in a job of
        more than one rank (Horovod's condition for registering the hooks)."""
        return size() > 1 and bool(self.process_set.included())

    # --- groups ---------------------------------------------------------------------------

    def _make_groups(self, groups):
        """Tuples of parameters reduced together in one grouped allreduce; None: each alone."""
        if groups is None:
            return []
        if isinstance(groups, list):
            chosen, taken = [], set()
            for group in groups:
                for p in group:
                    if not isinstance(p, torch.Tensor):
                        raise ValueError("groups must consist of torch.Tensor.")
                    if p in taken:
                        raise ValueError("A parameter can only appear once in groups.")
                    taken.add(p)
                members = tuple(p for p in group if p.requires_grad)
                if members:
                    chosen.append(members)
            return chosen
        if isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0:
            raise ValueError("groups should be a non-negative integer or a list of list of "
                             "torch.Tensor.")
        return [tuple(g) for g in _split(self._requires_update, groups)]

    # --- hooks -----------------------------------------------------------------------------

    def _register_hooks(self):
        self._hooked = True
        for p in self._requires_update:
            if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1
                self._grad_accs.append(p.register_post_accumulate_grad_hook(self._make_hook(p)))
            else:
                accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                accumulator.register_hook(self._make_hook(p))
                self._grad_accs.append(accumulator)  # it would be freed, and the hook with it
            self._probes[p] = p.register_hook(self._make_probe(p))

    def _make_probe(self, p):
        """Sees p's first gradient before it is accumulated, to tell whether p's gradients
        are sparse even when p.grad is dense (a sparse gradient added to a dense p.grad, such
        as the dense zeros a rank reduced for it before it knew, stays dense)."""
        def probe(grad):
            self._probed.add(p)
            if grad.is_sparse:
                self._sparse.add(p)
        return probe

    def _make_hook(self, p):
        def hook(*_ignored):
            # An elastic job's size changes under the optimizer: at size 1 (or outside the set)
            # this step reduces nothing, and step() applies the local gradient.
            if not self._reduces():
                return
            if not self._backward_pass_done(p):
                return
            group = self._group_of.get(p)
            if group is None:
                self._handles[p] = self._allreduce_grad_async(p)
                return
            ready = self._ready.setdefault(group, set())
            ready.add(p)
            if len(ready) == len(group):
                self._handles[group] = self._grouped_allreduce_async(group)
        return hook

    # --- reduction -------------------------------------------------------------------------

    def _scale_factors(self):
        if self.op == Average:
            # The engine's Average divides by the set's size after the postscale factor.
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _is_sparse(self, p):
        """Whether p's gradients are sparse: this one, or one at an earlier step."""
        if p.grad is not None and p.grad.is_sparse:
            self._sparse.add(p)
        return p in self._sparse

    def _dense_grad(self, p):
        """The dense tensor to reduce for p: p.grad itself when it is dense (reduced in
        place); a dense copy of a sparse gradient, which stays; zeros where this rank did not
        compute it (another rank may have), which become p.grad unless p's are sparse."""
        if p.grad is None:
            zeros = torch.zeros_like(p.data)
            if p not in self._sparse:
                p.grad = zeros
            return zeros
        if p.grad.is_sparse:
            return p.grad.to_dense()
        return p.grad

    def _allreduce_grad_async(self, p):
        name = self._parameter_names.get(p)
        prescale, postscale = self._scale_factors()
        if self._is_sparse(p) and not self.sparse_as_dense:
            return self._sparse_allreduce_grad_async(p, name, prescale, postscale), None
        tensor = self._dense_grad(p)
        if _is_fp16(self._compression) and tensor.dtype in _WIDE_FLOATS:
            # The engine casts to float16 and back in place: no compressed copy of the grad.
            set_id = _set_id(self.process_set, "DistributedOptimizer")
            return _allreduce_async(tensor, True, name, self.op, prescale, postscale, fp16=True,
                                    set_id=set_id), None
        compressed, ctx = self._compression.compress(tensor)
        handle = allreduce_async_(compressed, name=name, op=self.op, prescale_factor=prescale,
                                  postscale_factor=postscale, process_set=self.process_set)
        return handle, (compressed, ctx)

    def _sparse_allreduce_grad_async(self, p, name, prescale, postscale):
        """Gathers every member's rows of p's gradient (none where this rank did not compute
        it); the callable returned gives their sum, or for Average their average with the
        dense path's pre- and postscale factors, as a coalesced sparse tensor."""
        if self.op not in (Average, Sum):
            raise ValueError("sparse gradients are reduced with op=hvd.Average or hvd.Sum only "
                             "(or sparse_as_dense=True); got op=%r for %s" % (self.op, name))
        if p.grad is None:
            rows = torch.zeros(0, dtype=torch.long, device=p.device)
            values = p.data.new_zeros((0,) + tuple(p.shape[1:]))
        else:
            rows, values = _row_sparse(p.grad)
        if prescale != 1.0:
            values = values * prescale
        compressed, ctx = self._compression.compress(values)
        gather = sparse_allreduce_async(
            torch.sparse_coo_tensor(rows.unsqueeze(0), compressed, p.shape), name=name, op=Sum,
            process_set=self.process_set)
        divisor = self.process_set.size() / postscale if self.op == Average else None

        def handle():
            total = gather()
            values = self._compression.decompress(total._values(), ctx)
            if divisor is not None:
                values = values / divisor
            return torch.sparse_coo_tensor(total._indices(), values, p.shape).coalesce()

        return handle

    def _grouped_allreduce_async(self, group):
        # Grouped reductions are dense: a sparse member is reduced as a dense copy and given
        # back sparse.
        tensors = []
        for p in group:
            self._is_sparse(p)
            tensors.append(self._dense_grad(p))
        pairs = [self._compression.compress(t) for t in tensors]
        prescale, postscale = self._scale_factors()
        handle = grouped_allreduce_async_([c for c, _ in pairs],
                                          name=self._parameter_names.get(group[0]), op=self.op,
                                          prescale_factor=prescale, postscale_factor=postscale,
                                          process_set=self.process_set)
        return handle, pairs

    def _write_back(self, key, handle, ctx):
        output = handle() if callable(handle) else synchronize(handle)
        if isinstance(key, tuple):
            for p, out, (_, c) in zip(key, output, ctx):
                self._assign(p, self._compression.decompress(out, c))
                self._allreduce_delay[p] = self.backward_passes_per_step
            self._ready.pop(key, None)
            return
        if ctx is not None:
            output = self._compression.decompress(output, ctx[1])
        self._assign(key, output)
        self._allreduce_delay[key] = self.backward_passes_per_step

    def _assign(self, p, value):
        if p in self._sparse:
            # Sparse gradients are given back sparse (sparse optimizers take no others),
            # whichever way they were reduced.
            p.grad = value if value.is_sparse else value.to_sparse(1)
        elif p.grad is None or p.grad.is_sparse or value.is_sparse:
            p.grad = value
        elif value is not p.grad:
            p.grad.copy_(value)

    def synchronize(self):
        """Waits for every gradient's allreduce (submitting, with zeros where needed, those
        this rank's backward pass did not reach) and writes the results into p.grad. On a rank
        outside the process set there is nothing to wait for."""
        if self._reduces():
            for p in self._requires_update:
                group = self._group_of.get(p)
                if group is not None:
                    if group not in self._handles or self._handles[group][0] is None:
                        self._handles[group] = self._grouped_allreduce_async(group)
                elif p not in self._handles or self._handles[p][0] is None:
                    self._handles[p] = self._allreduce_grad_async(p)
        # Every op a hook submitted is waited for, so that its name is free for the next step.
        for key, (handle, ctx) in list(self._handles.items()):
            if handle is not None:
                self._write_back(key, handle, ctx)
        for p in self._probed:  # one gradient tells (not removed from within the hook)
            handle = self._probes.pop(p, None)
            if handle is not None:
                handle.remove()
        self._probed.clear()
        self._handles.clear()
        self._ready.clear()
        for p in self._requires_update:
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """For a step() after an explicit synchronize() (e.g. to clip the reduced gradients):
        step() inside this context does not synchronize again."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn(
                    "optimizer.step() called without optimizer.skip_synchronize() context after "
                    "optimizer.synchronize(). This can cause training slowdown. You may want to "
                    "consider using optimizer.skip_synchronize() context if you use "
                    "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        if not self._hooked and self._reduces():
            # Built at size 1 in an elastic job that has grown since: reduce from now on.
            self._register_hooks()
        return super().step(closure)

    def load_state_dict(self, *args, **kwargs):
        self._handles.clear()
        self._ready.clear()
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        return super().load_state_dict(*args, **kwargs)


class _DistributedAdasumMixin(_HandlesMixin):
    """DistributedOptimizer(op=hvd.Adasum), Horovod's _DistributedAdasumOptimizer: Adasum
    combines the ranks' model updates, not their gradients, because the rule adapts to the
    updates' geometry (two orthogonal updates both apply, two equal ones apply once) and so
    needs what the wrapped optimizer makes of the gradient (momentum, Adam's scaling).

    When p's gradient is ready (after backward_passes_per_step passes) its hook steps the
    wrapped optimizer on p alone, takes the update delta = new - old, puts p back to old and
    submits an in-place Adasum allreduce of delta. step() submits those the backward pass did
    not reach (stepping on whatever gradient p has, zeros at first), waits for them all and
    sets p = old + Adasum(deltas). Horovod leaves delta in p until step(); here p keeps its
    value meanwhile, with the same result at step(). There is no synchronize() to call and
    skip_synchronize() is refused, as in Horovod; groups and sparse_as_dense do not apply."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step,
                 process_set):
        super().__init__(params)
        self.process_set = process_set
        self._compression = compression
        self.backward_passes_per_step = backward_passes_per_step
        self._parameter_names = _parameter_names(self.param_groups, named_parameters)
        self._requires_update = [p for g in self.param_groups for p in g["params"]
                                 if p.requires_grad]
        self._allreduce_delay = {p: backward_passes_per_step for p in self._requires_update}
        self._handles = {}  # parameter -> (handle, compression context), None until submitted
        self._starting_models = {p: torch.zeros_like(p.data) for p in self._requires_update}
        self._grad_accs = []
        for p in self._requires_update:
            if p.grad is None:
                p.grad = torch.zeros_like(p.data)  # as Horovod: a step before any backward
            if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1
                self._grad_accs.append(p.register_post_accumulate_grad_hook(self._make_hook(p)))
            else:
                accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                accumulator.register_hook(self._make_hook(p))
                self._grad_accs.append(accumulator)

    def _make_hook(self, p):
        def hook(*_ignored):
            if not self._backward_pass_done(p):
                return
            self._handles[p] = self._allreduce_delta_async(p)
        return hook

    def _step_alone(self, p):
        """The wrapped optimizer's step on p only (its state for p advances, no other moves)."""
        stashed = [group["params"] for group in self.param_groups]
        for group in self.param_groups:
            group["params"] = [p] if any(p is q for q in group["params"]) else []
        try:
            super().step()
        finally:
            for group, params in zip(self.param_groups, stashed):
                group["params"] = params

    def _allreduce_delta_async(self, p):
        start = self._starting_models[p]
        with torch.no_grad():
            start.copy_(p.data)
            self._step_alone(p)
            delta = p.data - start
            p.data.copy_(start)
        compressed, ctx = self._compression.compress(delta)
        handle = allreduce_async_(compressed, name=self._parameter_names.get(p), op=Adasum,
                                  process_set=self.process_set)
        return handle, ctx

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for p in self._requires_update:
            if self._handles.get(p, (None, None))[0] is None:
                self._handles[p] = self._allreduce_delta_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            delta = self._compression.decompress(synchronize(handle), ctx)
            start = self._starting_models[p]
            with torch.no_grad():
                start.add_(delta)
                p.data.copy_(start)
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._handles.clear()
        return loss

    def synchronize(self):
        """Nothing to wait for outside step(): the reductions carry updates, not gradients."""

    def skip_synchronize(self):
        raise AssertionError("Skipping synchronization is not supported when using Adasum "
                             "optimizer.")

    def load_state_dict(self, *args, **kwargs):
        self._handles.clear()
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        return super().load_state_dict(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """An optimizer of the same class as `optimizer`, over the same parameter groups and
    state, whose step() first averages (op) every gradient over the ranks.

    named_parameters: model.named_parameters(), whose names identify the gradients across
    ranks. compression: Compression.none or Compression.fp16. backward_passes_per_step: the
    gradients of that many backward passes are summed locally before one reduction.
    gradient_predivide_factor: the gradient is divided by it before the sum and by
    size()/factor after. groups: an int (that many groups of consecutive parameters) or a list
    of lists of parameters, each reduced as one grouped allreduce. sparse_as_dense: sparse
    gradients are reduced as dense tensors. process_set: the gradients are averaged over its
    members only (the global set by default); on other ranks nothing is reduced.

    op=hvd.Adasum (in a job of more than one rank) reduces the ranks' model updates instead of
    their gradients, with Adasum: each rank steps the wrapped optimizer on its own gradient and
    step() applies the Adasum of the updates (see _DistributedAdasumMixin).
    """
    _set_id(process_set, "DistributedOptimizer")
    check_op(op)
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be removed "
                      "in v0.23.0.", DeprecationWarning)
        if groups is None:
            groups = num_groups
    if backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be > 0")
    base = optimizer.__class__
    if op == Adasum and size() > 1 and process_set.included():
        # As in Horovod, a job of one rank (and here a rank outside the set) keeps the gradient
        # optimizer: its Adasum of one update is the update.
        cls = type(base.__name__, (_DistributedAdasumMixin, base), {"__module__": __name__})
        wrapped = cls(optimizer.param_groups, named_parameters, compression,
                      backward_passes_per_step, process_set)
    else:
        cls = type(base.__name__, (_DistributedMixin, base), {"__module__": __name__})
        wrapped = cls(optimizer.param_groups, named_parameters, compression,
                      backward_passes_per_step, op, gradient_predivide_factor, groups,
                      sparse_as_dense, process_set)
    if optimizer.state_dict()["state"]:
        wrapped.load_state_dict(optimizer.state_dict())  # e.g. a checkpoint loaded before
    return wrapped
