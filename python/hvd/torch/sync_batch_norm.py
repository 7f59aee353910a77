"""SyncBatchNorm (Horovod's horovod.torch.SyncBatchNorm): batch normalisation whose batch
statistics, in training, are those of the batch of every rank of a process set together.

    model = hvd.SyncBatchNorm.convert_sync_batchnorm(model)   # every BatchNorm*d, recursively
    bn = hvd.SyncBatchNorm(64, process_set=hvd.global_process_set)

Forward: each rank reduces its own rows to (count, mean, sum of squared deviations) per channel
and one allgather brings every member's triple; they are combined with Chan's pairwise formula
in float64, so ranks with different batch sizes (zero included) weigh by their counts and no
E[x^2] - E[x]^2 cancellation creeps in. The running statistics move as torch's BatchNorm moves
them (unbiased variance; momentum=None: the cumulative average over num_batches_tracked).
Backward: one allreduce of the per-channel sums of dy and dy * xhat gives every rank the input
gradient of a BatchNorm over the whole batch. The weight and bias gradients stay this rank's
share, as in Horovod and torch.nn.SyncBatchNorm: their sum over the members is the whole batch's
gradient, and DistributedOptimizer reduces them like every other parameter's.

Plain tensor ops only, so it runs on CPU tensors as well as CUDA ones (Horovod's needs CUDA).
Eval mode, and a process set of one rank, are plain F.batch_norm; so is eval mode with
track_running_stats=False (this rank's batch statistics, as torch.nn.SyncBatchNorm does), which
lets ranks evaluate on their own. In training every member of the set must call forward (and
backward) in the same order, as for any collective.
"""

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable
from torch.nn.modules.batchnorm import _BatchNorm

from hvd.torch._engine import _set_id
from hvd.torch.basics import Sum
from hvd.torch.mpi_ops import allgather_async, allreduce_async, synchronize
from hvd.torch.process_sets import global_process_set


def _accumulation_dtype(dtype):
    # float16 and bfloat16 inputs are normalised in float32, as torch's kernels do.
    return torch.float64 if dtype == torch.float64 else torch.float32


def _per_channel(t, ndim):
    """A [C] tensor shaped to broadcast over (N, C, *)."""
    return t.view([1, -1] + [1] * (ndim - 2))


def _names(channels, dtype):
    """The engine names of a layer's ops: stable from step to step, so that the engine's
    response cache serves them, and apart for each width and dtype, so that the layers of a
    network keep an entry each. Layers of one set run one after the other (each op is waited
    for before the next layer starts), and each process set matches names on its own."""
    base = "sync_batch_norm.c%d.%s" % (channels, str(dtype).replace("torch.", ""))
    return base + ".stats", base + ".grads"


class _SyncBatchNormFn(torch.autograd.Function):
    """y = (x - mean) * invstd * weight + bias over the set's whole batch."""

    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, factor, process_set):
        ndim, channels = input.dim(), input.size(1)
        dims = [0] + list(range(2, ndim))
        acc = _accumulation_dtype(input.dtype)
        x = input.to(acc)
        local = input.numel() // channels if channels else 0
        if local > 0:
            # The corrected two-pass algorithm: deviations from a mean rounded to x's
            # precision are exact (the two are close), so the squares lose nothing to a large
            # mean, and their sum gives back what the rounding took from the mean. Without
            # it, a float32 mean's rounding would weigh in the ranks' combination below.
            rounded = x.mean(dim=dims)
            centered = x - _per_channel(rounded, ndim)
            shift = centered.sum(dim=dims).to(torch.float64)
            m2 = (centered * centered).sum(dim=dims).to(torch.float64) - shift * shift / local
            del centered
            mean = rounded.to(torch.float64) + shift / local
            stats = torch.cat([mean.new_full((1,), float(local)), mean, m2])
        else:  # contributes count 0; its mean (NaN over no rows) must not reach the sum
            stats = x.new_zeros(2 * channels + 1, dtype=torch.float64)
        stats_name, ctx.grads_name = _names(channels, input.dtype)
        gathered = synchronize(allgather_async(stats.unsqueeze(0), name=stats_name,
                                               process_set=process_set))
        counts = gathered[:, :1]
        means, m2s = gathered[:, 1:channels + 1], gathered[:, channels + 1:]
        total = counts.sum()
        count = int(total.item())
        if count <= 1:
            raise ValueError("Expected more than 1 value per channel when training, got %d over "
                             "the process set (input size %s on this rank)" %
                             (count, list(input.shape)))
        mean64 = (counts * means).sum(0) / total
        m2 = m2s.sum(0) + (counts * (means - mean64).square()).sum(0)
        var64 = m2 / total
        invstd64 = (var64 + eps).rsqrt()
        if running_mean is not None:
            running_mean.mul_(1.0 - factor).add_(mean64.to(running_mean.dtype), alpha=factor)
        if running_var is not None:
            unbiased = m2 / (total - 1)
            running_var.mul_(1.0 - factor).add_(unbiased.to(running_var.dtype), alpha=factor)

        mean, invstd = mean64.to(acc), invstd64.to(acc)
        scale = invstd if weight is None else invstd * weight.to(acc)
        out = (x - _per_channel(mean, ndim)) * _per_channel(scale, ndim)
        if bias is not None:
            out = out + _per_channel(bias.to(acc), ndim)
        ctx.save_for_backward(input, weight, mean, invstd)
        ctx.count, ctx.process_set = count, process_set
        ctx.bias_dtype = None if bias is None else bias.dtype
        return out.to(input.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        input, weight, mean, invstd = ctx.saved_tensors
        need_input, need_weight, need_bias = ctx.needs_input_grad[:3]
        ndim, channels = input.dim(), input.size(1)
        dims = [0] + list(range(2, ndim))
        acc = mean.dtype
        dy = grad_output.to(acc)
        xhat = (input.to(acc) - _per_channel(mean, ndim)) * _per_channel(invstd, ndim)
        # Over no rows a sum is zero: a rank with an empty batch adds nothing.
        sum_dy = dy.sum(dim=dims)
        sum_dy_xhat = (dy * xhat).sum(dim=dims)

        grad_input = None
        if need_input:
            both = synchronize(allreduce_async(torch.cat([sum_dy, sum_dy_xhat]), op=Sum,
                                               name=ctx.grads_name,
                                               process_set=ctx.process_set))
            mean_dy = _per_channel(both[:channels] / ctx.count, ndim)
            mean_dy_xhat = _per_channel(both[channels:] / ctx.count, ndim)
            scale = invstd if weight is None else invstd * weight.to(acc)
            grad_input = ((dy - mean_dy - xhat * mean_dy_xhat) *
                          _per_channel(scale, ndim)).to(input.dtype)
        grad_weight = None
        if weight is not None and need_weight:
            grad_weight = sum_dy_xhat.to(weight.dtype)
        grad_bias = None
        if ctx.bias_dtype is not None and need_bias:
            grad_bias = sum_dy.to(ctx.bias_dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Applies synchronous version of N-dimensional BatchNorm: in training, the mean and
    variance are those of the batches of every rank of `process_set` together (batch sizes may
    differ between ranks, and may be zero), so it behaves as torch.nn.BatchNorm*d over the
    whole batch. Useful when each rank fits only a few examples.

    Arguments:
        num_features: number of channels `C` from the shape `(N, C, ...)`
        eps: a value added to the denominator for numerical stability. Default: 1e-5
        momentum: the value used for the running_mean and running_var computation. Can be set
            to `None` for cumulative moving average (i.e. simple average). Default: 0.1
        affine: a boolean value that when set to `True`, this module has learnable affine
            parameters. Default: `True`
        track_running_stats: a boolean value that when set to `True`, this module tracks the
            running mean and variance, and when set to `False`, this module does not track such
            statistics and always uses batch statistics in both training and eval modes.
            Default: `True`
        process_set: the ranks whose batches are normalised together (every member must run
            the layer in training together). Default: hvd.global_process_set

    CPU and CUDA tensors alike. The weight and bias gradients are this rank's share of the
    whole batch's (DistributedOptimizer averages them as any other gradient).
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got {}D input)".format(input.dim()))

    def forward(self, input):
        self._check_input_dim(input)
        # torch's _BatchNorm.forward, step for step, up to where the statistics are taken.
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        running_mean = self.running_mean if track else None
        running_var = self.running_var if track else None
        if not (bn_training and self.training):
            return F.batch_norm(input, running_mean, running_var, self.weight, self.bias,
                                bn_training, factor, self.eps)
        _set_id(self.process_set, "SyncBatchNorm")  # a ValueError for a set not registered
        if self.process_set.size() == 1:
            return F.batch_norm(input, running_mean, running_var, self.weight, self.bias,
                                True, factor, self.eps)
        if input.size(1) != self.num_features:
            # Before any collective, so that no member waits for an op this rank never submits.
            raise ValueError("SyncBatchNorm(%d): input of shape %s has %d channels" %
                             (self.num_features, list(input.shape), input.size(1)))
        return _SyncBatchNormFn.apply(input, self.weight, self.bias, running_mean, running_var,
                                      self.eps, factor, self.process_set)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_set=global_process_set):
        """`module` with every BatchNorm layer in it (any torch _BatchNorm, torch.nn's
        SyncBatchNorm included) replaced by an hvd SyncBatchNorm over `process_set` that holds
        the same parameters (the very Parameter objects), running statistics, batch counter and
        training flag. Returns the new module when `module` itself is a BatchNorm."""
        converted = module
        if isinstance(module, _BatchNorm):
            converted = cls(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_set)
            if module.affine:
                converted.weight = module.weight
                converted.bias = module.bias
            converted.running_mean = module.running_mean
            converted.running_var = module.running_var
            converted.num_batches_tracked = module.num_batches_tracked
            converted.training = module.training
            if hasattr(module, "qconfig"):
                converted.qconfig = module.qconfig
        for name, child in module.named_children():
            converted.add_module(name, cls.convert_sync_batchnorm(child, process_set))
        return converted
