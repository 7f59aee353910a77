"""The sync forms are differentiable as Horovod defines them. Each rank backpropagates a loss
of its own, sum(w_r * y); the expected input gradient is computed from the definition, with
every rank's weights known locally."""

import torch

import hvd.torch as hvd


def weights(rank, shape):
    return torch.arange(1, torch.Size(shape).numel() + 1, dtype=torch.float64).reshape(
        shape) * (rank + 1)


def test_allreduce_gradient_is_the_same_reduction():
    for op in (hvd.Sum, hvd.Average):
        x = torch.ones(5, dtype=torch.float64, requires_grad=True)
        y = hvd.allreduce(x, op=op)
        (y * weights(hvd.rank(), (5,))).sum().backward()
        every = torch.stack([weights(r, (5,)) for r in range(hvd.size())])
        want = every.sum(0) if op == hvd.Sum else every.mean(0)
        assert torch.allclose(x.grad, want, rtol=0, atol=1e-12), (op, x.grad, want)


def test_allreduce_gradient_carries_the_scale_factors():
    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.25)
    y.sum().backward()
    assert x.grad.tolist() == [hvd.size() * 0.5] * 3


def test_grouped_allreduce_gradient():
    a = torch.ones(2, dtype=torch.float64, requires_grad=True)
    b = torch.ones(3, dtype=torch.float64, requires_grad=True)
    ya, yb = hvd.grouped_allreduce([a, b], op=hvd.Sum)
    ((ya * weights(hvd.rank(), (2,))).sum() + (yb * weights(hvd.rank(), (3,))).sum()).backward()
    assert torch.equal(a.grad, sum(weights(r, (2,)) for r in range(hvd.size())))
    assert torch.equal(b.grad, sum(weights(r, (3,)) for r in range(hvd.size())))


def test_allgather_gradient_is_my_rows_of_the_average():
    rows = hvd.rank() + 1
    x = torch.zeros(rows, 2, dtype=torch.float64, requires_grad=True)
    y = hvd.allgather(x)
    total = sum(r + 1 for r in range(hvd.size()))
    (y * weights(hvd.rank(), (total, 2))).sum().backward()
    mean = torch.stack([weights(r, (total, 2)) for r in range(hvd.size())]).mean(0)
    start = sum(r + 1 for r in range(hvd.rank()))
    assert torch.allclose(x.grad, mean[start:start + rows], rtol=0, atol=1e-12)


def test_grouped_allgather_gradient():
    x = torch.zeros(1, 2, dtype=torch.float64, requires_grad=True)
    (y,) = hvd.grouped_allgather([x])
    (y * weights(hvd.rank(), (hvd.size(), 2))).sum().backward()
    mean = torch.stack([weights(r, (hvd.size(), 2)) for r in range(hvd.size())]).mean(0)
    assert torch.allclose(x.grad, mean[hvd.rank():hvd.rank() + 1], rtol=0, atol=1e-12)


def test_broadcast_gradient_is_the_average_on_the_root_and_zero_elsewhere():
    root = hvd.size() - 1
    x = torch.ones(4, dtype=torch.float64, requires_grad=True)
    y = hvd.broadcast(x, root)
    (y * weights(hvd.rank(), (4,))).sum().backward()
    mean = torch.stack([weights(r, (4,)) for r in range(hvd.size())]).mean(0)
    want = mean if hvd.rank() == root else torch.zeros(4, dtype=torch.float64)
    assert torch.allclose(x.grad, want, rtol=0, atol=1e-12)


def test_alltoall_gradient_travels_back():
    size, me = hvd.size(), hvd.rank()
    splits = [1 + (me + p) % 2 for p in range(size)]
    x = torch.zeros(sum(splits), dtype=torch.float64, requires_grad=True)
    y, received = hvd.alltoall(x, splits=splits)
    w = weights(me, (y.shape[0],))
    (y * w).sum().backward()
    # My row j destined to rank p is row (offset of me in p's output) + k there.
    want = []
    for p in range(size):
        p_received = [1 + (s + p) % 2 for s in range(size)]
        wp = weights(p, (sum(p_received),))
        start = sum(p_received[:me])
        want.append(wp[start:start + splits[p]])
    assert torch.equal(x.grad, torch.cat(want))
    assert received.tolist() == [1 + (s + me) % 2 for s in range(size)]


def test_reducescatter_gradient_is_horovods():
    size, me = hvd.size(), hvd.rank()
    for op in (hvd.Sum, hvd.Average):
        x = torch.zeros(size * 2, dtype=torch.float64, requires_grad=True)
        y = hvd.reducescatter(x, op=op)
        (y * weights(me, (2,))).sum().backward()
        # Horovod: every rank's output gradient gathered in rank order, times size() for Sum.
        gathered = torch.cat([weights(r, (2,)) for r in range(size)])
        want = gathered * (size if op == hvd.Sum else 1)
        assert torch.equal(x.grad, want), (op, x.grad, want)
