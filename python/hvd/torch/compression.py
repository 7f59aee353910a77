"""Gradient compression for hvd.torch (Horovod's horovod.torch.compression)."""

import torch


class Compressor:
    """Interface: compress(tensor) -> (tensor, ctx) before the collective, and
    decompress(tensor, ctx) -> tensor after it."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Floating-point tensors travel as float16 and are cast back to their type afterwards;
    other tensors are sent as they are. hvd's allreduce recognises this compressor and lets the
    engine do the casts of float32/float64 (the same bytes on the wire, no extra tensors)."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point:
            return tensor.type(torch.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx is not None and ctx.is_floating_point:
            return tensor.type(ctx)
        return tensor


class Compression:
    """The compressors a DistributedOptimizer or allreduce takes."""

    none = NoneCompressor
    fp16 = FP16Compressor
