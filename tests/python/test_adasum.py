"""op=hvd.Adasum: allreduce in its forms, grouped allreduce, scale factors, the refusals, and
DistributedOptimizer(op=hvd.Adasum) with Horovod's delta semantics, each against a reference
computed here: the pairwise rule in float64 and the tree docs/allreduce_ops.md defines (rank
2^k + i folded into rank i first, then the balanced binary tree over ranks 0..2^k-1 in rank
order), written as a plain recursion. Every rank computes every rank's inputs."""

import numpy as np
import pytest
import torch

import hvd.torch as hvd

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
# How far hvd may be from the reference (which rounds to the dtype after every pair, as hvd
# stores it, but sums in another order), relative to the largest magnitude involved.
TOLERANCE = {torch.float16: 8 * 2.0 ** -11, torch.bfloat16: 8 * 2.0 ** -8,
             torch.float32: 8 * 2.0 ** -24, torch.float64: 1e-12}


def round_to(x, dtype):
    return torch.from_numpy(np.asarray(x, dtype=np.float64)).to(dtype).double().numpy()


def adasum_pair(a, b, dtype):
    dot, aa, bb = float(np.dot(a, b)), float(np.dot(a, a)), float(np.dot(b, b))
    ca = 1.0 - dot / (2.0 * aa) if aa >= 1e-8 else 1.0
    cb = 1.0 - dot / (2.0 * bb) if bb >= 1e-8 else 1.0
    return round_to(ca * a + cb * b, dtype)


def adasum_tree(vectors, dtype):
    """The Adasum of the ranks' flattened tensors (float64 arrays holding dtype values)."""
    n = len(vectors)
    p = 1 << (n.bit_length() - 1)
    leaves = [adasum_pair(vectors[i], vectors[p + i], dtype) if p + i < n else vectors[i]
              for i in range(p)]

    def subtree(lo, hi):
        if hi - lo == 1:
            return leaves[lo]
        mid = (lo + hi) // 2
        return adasum_pair(subtree(lo, mid), subtree(mid, hi), dtype)

    return subtree(0, p)


def inputs(shape, dtype, seed, scale_by_rank=True):
    """Every rank's tensor: random, correlated across ranks, norms 10x apart from rank to
    rank."""
    common = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    out = []
    for r in range(hvd.size()):
        own = torch.randn(shape, generator=torch.Generator().manual_seed(seed * 100 + r + 1),
                          dtype=torch.float64)
        scale = 10.0 ** (r % 3 - 1) if scale_by_rank else 1.0
        out.append((scale * (own + 0.5 * common)).to(dtype))
    return out


def reference(tensors, dtype, prescale=1.0, postscale=1.0):
    vectors = [round_to(t.double().flatten().numpy() * prescale, dtype) for t in tensors]
    want = round_to(adasum_tree(vectors, dtype) * postscale, dtype)
    return want.reshape(tuple(tensors[0].shape))


def assert_close(got, want, dtype, scale_of):
    scale = max(float(np.abs(np.asarray(v, dtype=np.float64)).max(initial=0)) for v in scale_of)
    diff = np.abs(got.double().numpy() - want).max(initial=0)
    assert diff <= TOLERANCE[dtype] * scale, (diff, got, want)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_allreduce_matches_the_reference_tree_in_every_form(dtype):
    everyone = inputs((4, 9), dtype, seed=1)
    want = reference(everyone, dtype)
    scale_of = [t.double().numpy() for t in everyone] + [want]
    mine = everyone[hvd.rank()].clone()
    out = hvd.allreduce(mine, op=hvd.Adasum)
    assert out.dtype == dtype and out.shape == mine.shape
    assert_close(out, want, dtype, scale_of)
    assert torch.equal(mine, everyone[hvd.rank()])  # out of place
    assert_close(hvd.synchronize(hvd.allreduce_async(mine, op=hvd.Adasum)), want, dtype, scale_of)
    assert hvd.allreduce_(mine, op=hvd.Adasum) is mine
    assert_close(mine, want, dtype, scale_of)
    # Every rank has the same bits.
    gathered = hvd.allgather(out.unsqueeze(0))
    assert all(torch.equal(gathered[r], gathered[0]) for r in range(hvd.size()))


def test_orthogonal_inputs_give_their_sum_and_equal_inputs_the_vector_itself():
    n = hvd.size()
    for dtype in FLOATS:
        basis = torch.zeros(n, 2 * n, dtype=dtype)
        for r in range(n):
            basis[r, r] = r + 1
            basis[r, n + r] = -0.5 * (r + 1)
        assert torch.equal(hvd.allreduce(basis[hvd.rank()], op=hvd.Adasum), basis.sum(0))
        same = torch.linspace(-3, 2, 11, dtype=dtype)
        assert torch.equal(hvd.allreduce(same, op=hvd.Adasum), same)
        zeros = torch.zeros(6, dtype=dtype)
        assert torch.equal(hvd.allreduce(zeros, op=hvd.Adasum), zeros)


@pytest.mark.parametrize("in_place", [False, True], ids=["out-of-place", "in-place"])
def test_grouped_allreduce_reduces_each_tensor_as_its_own_vector(in_place):
    dtype = torch.float32
    shapes = [(3, 4), (7,), (1,), (2, 2, 5)]
    everyone = [inputs(shape, dtype, seed=10 + k) for k, shape in enumerate(shapes)]
    # The first tensor equal on every rank: its Adasum is itself, whatever the others are.
    everyone[0] = [everyone[0][0]] * hvd.size()
    mine = [ts[hvd.rank()].clone() for ts in everyone]
    if in_place:
        outs = hvd.grouped_allreduce_(mine, op=hvd.Adasum)
    else:
        outs = hvd.grouped_allreduce(mine, op=hvd.Adasum)
    assert len(outs) == len(shapes)
    for ts, out in zip(everyone, outs):
        want = reference(ts, dtype)
        assert_close(out, want, dtype, [t.numpy() for t in ts] + [want])
    assert torch.equal(outs[0], everyone[0][0])


def test_prescale_and_postscale_apply_around_the_reduction():
    dtype = torch.float64
    everyone = inputs((13,), dtype, seed=20)
    want = reference(everyone, dtype, prescale=0.25, postscale=3.0)
    out = hvd.allreduce(everyone[hvd.rank()], op=hvd.Adasum, prescale_factor=0.25,
                        postscale_factor=3.0)
    assert_close(out, want, dtype, [t.numpy() for t in everyone] + [want])


def test_what_adasum_cannot_reduce_is_refused_at_submit():
    with pytest.raises(ValueError, match="op adasum reduces float16, bfloat16, float32 and "
                                         "float64, not int32"):
        hvd.allreduce(torch.ones(3, dtype=torch.int32), op=hvd.Adasum)
    with pytest.raises(ValueError, match="reducescatter"):
        hvd.reducescatter(torch.ones(4, 2), op=hvd.Adasum)
    with pytest.raises(ValueError, match="unknown reduction op"):
        hvd.allreduce(torch.ones(2), op=99)


# --- DistributedOptimizer(op=hvd.Adasum) --------------------------------------------------------

def model():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))


def batch(rank, step, part=0):
    g = torch.Generator().manual_seed(1000 * step + 10 * rank + part)
    return torch.randn(5, 4, generator=g), torch.randn(5, 2, generator=g)


def loss_of(net, x, y):
    return torch.nn.functional.mse_loss(net(x), y)


def reference_training(steps, lr, momentum, passes):
    """What every rank must end with: per step, each rank's update from its own gradient (its
    own momentum buffer), then every parameter += the Adasum of the ranks' updates."""
    net = model()
    buffers = [None] * hvd.size()
    for step in range(steps):
        updates = []
        for r in range(hvd.size()):
            net.zero_grad()
            for part in range(passes):
                loss_of(net, *batch(r, step, part)).backward()
            grads = [p.grad.detach().clone() for p in net.parameters()]
            if momentum:
                buffers[r] = grads if buffers[r] is None else [
                    momentum * b + g for b, g in zip(buffers[r], grads)]
                grads = buffers[r]
            updates.append([-lr * g for g in grads])
        with torch.no_grad():
            for k, p in enumerate(net.parameters()):
                vectors = [u[k].double().flatten().numpy() for u in updates]
                reduced = adasum_tree(vectors, torch.float32).reshape(tuple(p.shape))
                p.add_(torch.from_numpy(reduced).float())
    return net


def distributed_training(steps, lr, momentum, passes):
    net = model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum),
                                   named_parameters=net.named_parameters(), op=hvd.Adasum,
                                   backward_passes_per_step=passes)
    for step in range(steps):
        opt.zero_grad()
        for part in range(passes):
            loss_of(net, *batch(hvd.rank(), step, part)).backward()
        opt.step()
    return net, opt


@pytest.mark.parametrize("momentum,passes", [(0.0, 1), (0.9, 1), (0.0, 2)],
                         ids=["sgd", "sgd-momentum", "two-passes"])
def test_distributed_optimizer_applies_the_adasum_of_the_ranks_updates(momentum, passes):
    net, opt = distributed_training(steps=3, lr=0.1, momentum=momentum, passes=passes)
    want = reference_training(steps=3, lr=0.1, momentum=momentum, passes=passes)
    assert isinstance(opt, torch.optim.SGD)
    for (name, p), q in zip(net.named_parameters(), want.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6, msg=name)
    # The ranks' models stay identical.
    flat = torch.cat([p.detach().flatten() for p in net.parameters()])
    gathered = hvd.allgather(flat.unsqueeze(0))
    assert all(torch.equal(gathered[r], gathered[0]) for r in range(hvd.size()))


def test_adasum_optimizer_synchronizes_inside_step_only():
    net, opt = distributed_training(steps=1, lr=0.1, momentum=0.0, passes=1)
    opt.synchronize()  # nothing to wait for
    with pytest.raises(AssertionError, match="Skipping synchronization is not supported"):
        with opt.skip_synchronize():
            pass
    # Parameters the backward pass did not reach still take part (with the update their own
    # stale gradient gives): step() submits them, so every rank's reductions meet.
    with pytest.raises(AssertionError, match="zero_grad"):
        loss_of(net[0], torch.ones(2, 4) * hvd.rank(), torch.zeros(2, 3)).backward()
        opt.zero_grad()  # net[0]'s reductions are in flight
    opt.step()
    flat = torch.cat([p.detach().flatten() for p in net.parameters()])
    gathered = hvd.allgather(flat.unsqueeze(0))
    assert all(torch.equal(gathered[r], gathered[0]) for r in range(hvd.size()))
    with pytest.raises(ValueError, match="gradient_predivide_factor"):
        hvd.DistributedOptimizer(torch.optim.SGD(model().parameters(), lr=0.1), op=hvd.Adasum,
                                 gradient_predivide_factor=2.0)
