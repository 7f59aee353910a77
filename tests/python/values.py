"""Inputs exact by construction, and the results each op must give, computed locally."""

import torch

import hvd.torch as hvd

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def value(rank, n, dtype, op=None, rows=None):
    """Rank `rank`'s input: small integers, exact in every dtype; {1, 2} for Product."""
    i = torch.arange(n, dtype=torch.float64)
    if op == hvd.Product:
        v = 1 + (i + rank) % 2
    elif dtype in (torch.uint8,):
        v = (i % 7) + rank + 1
    else:
        v = (i % 7) - 3 + 2 * rank  # negatives too
    v = v.to(dtype)
    return v if rows is None else v.reshape(rows, -1)


def reduced(inputs, op, dtype):
    """What allreduce gives over `inputs` (one per rank) for `op`: integer averages truncate
    toward zero as libhvd's do, floating averages divide after the sum."""
    stack = torch.stack([t.to(torch.float64) for t in inputs])
    if op == hvd.Sum:
        r = stack.sum(0)
    elif op == hvd.Average:
        r = stack.sum(0) / len(inputs)
        if dtype not in FLOATS:
            r = torch.trunc(r)
    elif op == hvd.Min:
        r = stack.min(0).values
    elif op == hvd.Max:
        r = stack.max(0).values
    else:
        r = stack.prod(0)
    return r.to(dtype)


def assert_equal(actual, expected, average=False):
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if average and actual.dtype in FLOATS:
        # an average is a division after the sum: within 2 ulp of the float64 result
        tol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 2.5e-7,
               torch.float64: 5e-16}[actual.dtype]
        torch.testing.assert_close(actual.double(), expected.double(), rtol=tol, atol=tol)
    else:
        assert torch.equal(actual, expected), (actual, expected)
