"""TorchState (Horovod's horovod.torch.elastic.state): the state of a PyTorch training process,
with a handler for each kind of value that needs more than pickling: a model (its state_dict,
broadcast in place), an optimizer (its state, broadcast_optimizer_state), an LR scheduler and
an ElasticSampler (their state dicts). Every other keyword value is a plain attribute, synced
by broadcast_object. The handler registry can be read and replaced, as in Horovod.

Each handler syncs from the root its State agreed on (common.py), and a restore loads a copy
of the saved state: torch's load_state_dict may keep the very tensors it is given (optimizers
from torch 2), which later steps would then change in the saved copy too.
"""

import copy

import torch

from hvd.torch.basics import rank
from hvd.torch.elastic.common import ObjectState
from hvd.torch.elastic.sampler import ElasticSampler
from hvd.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                 broadcast_parameters)


class TorchState(ObjectState):
    """State of a PyTorch training process.

    Args:
        model: a torch.nn.Module (optional).
        optimizer: a torch optimizer, or an hvd.DistributedOptimizer (optional).
        kwargs: more values, exposed as attributes: models, optimizers, LR schedulers and
            ElasticSamplers get their handler; anything else is synced as a Python object.
    """

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        self._handlers, plain = _get_handlers(kwargs)
        for name, handler in self._handlers.items():
            setattr(self, name, handler.value)
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **plain)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def _sync_from(self, root):
        for handler in self._handlers.values():
            handler.sync(root)
        super()._sync_from(root)

    def __setattr__(self, name, value):
        # Assigning another model (optimizer, ...) to a handled attribute: the handler takes
        # it and saves it at once.
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers and name in self.__dict__:
            handlers[name].set_value(value)
        super().__setattr__(name, value)


class StateHandler:
    """Saves, restores and syncs one value of a TorchState. sync(root_rank) copies the root's
    value to every rank (hvd's handlers take the agreed root; Horovod's sync() took none)."""

    def __init__(self, value):
        self.value = value

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self, root_rank):
        raise NotImplementedError()

    def set_value(self, value):
        self.value = value
        self.save()


class _StateDictHandler(StateHandler):
    """A value with state_dict() / load_state_dict()."""

    def __init__(self, value):
        super().__init__(value)
        self._saved = copy.deepcopy(self.value.state_dict())

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(copy.deepcopy(self._saved))


class ModelStateHandler(_StateDictHandler):
    def sync(self, root_rank):
        broadcast_parameters(self.value.state_dict(), root_rank=root_rank,
                             prefix="hvd.elastic.model.")


class OptimizerStateHandler(_StateDictHandler):
    def sync(self, root_rank):
        broadcast_optimizer_state(self.value, root_rank=root_rank,
                                  prefix="hvd.elastic.optimizer.")


class LRSchedulerStateHandler(_StateDictHandler):
    def sync(self, root_rank):
        self.value.load_state_dict(broadcast_object(self.value.state_dict(), root_rank,
                                                    name="hvd.elastic.scheduler"))


class SamplerStateHandler(_StateDictHandler):
    def sync(self, root_rank):
        # The root's epoch and count, and every rank's individually recorded indices of that
        # epoch (a rank that was elsewhere, or new, has none of it to give).
        sampler = self.value
        recorded = allgather_object((sampler.epoch, sorted(sampler.processed_indices)),
                                    name="hvd.elastic.sampler.indices")
        state = broadcast_object(sampler.state_dict(), root_rank, name="hvd.elastic.sampler")
        state["processed_indices"] = set().union(
            *(indices for epoch, indices in recorded if epoch == state["epoch"]))
        sampler.load_state_dict(state)


def _scheduler_classes():
    # torch 2 names the base LRScheduler (_LRScheduler stays, a subclass of it); before 2.2
    # ReduceLROnPlateau derives from neither.
    scheduler = torch.optim.lr_scheduler
    base = getattr(scheduler, "LRScheduler", scheduler._LRScheduler)
    return (base, scheduler.ReduceLROnPlateau)


_handler_registry = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (_scheduler_classes(), LRSchedulerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry():
    """The (type, handler class) pairs TorchState tries in order for each value."""
    return _handler_registry


def set_handler_registry(registry):
    global _handler_registry
    _handler_registry = registry


def _get_handler(value):
    for kind, handler_class in _handler_registry:
        if isinstance(value, kind):
            return handler_class(value)
    return None


def _get_handlers(values):
    """({name: handler}, {name: plain value}) of TorchState's keyword values."""
    handlers, plain = {}, {}
    for name, value in values.items():
        handler = _get_handler(value)
        if handler is not None:
            handlers[name] = handler
        else:
            plain[name] = value
    return handlers, plain


__all__ = ["TorchState", "StateHandler", "ModelStateHandler", "OptimizerStateHandler",
           "LRSchedulerStateHandler", "SamplerStateHandler", "get_handler_registry",
           "set_handler_registry"]
