"""Sparse gradients (nn.Embedding(sparse=True)) under DistributedOptimizer, and
hvd.sparse_allreduce_async itself.

Every rank trains on batches of its own (index counts differ per rank, rank 1's batches
repeat indices); the reference is one process stepping a copy of the model with the average of the
ranks' gradients: each rank gathers every rank's batches (allgather_object), rebuilds their
gradients locally and steps a plain torch optimizer. The models are float64, so the two agree
to rounding."""

import pytest
import torch

import hvd.torch as hvd

ROWS, DIM = 10, 4
TOL = dict(rtol=1e-9, atol=1e-12)


class Net(torch.nn.Module):
    """A sparse embedding, optionally followed by a dense Linear."""

    def __init__(self, dense=False):
        super().__init__()
        torch.manual_seed(5)
        self.emb = torch.nn.Embedding(ROWS, DIM, sparse=True).double()
        self.fc = torch.nn.Linear(DIM, 3).double() if dense else None

    def forward(self, idx):
        if idx is None:  # a batch that does not reach the embedding (needs the Linear)
            x = torch.ones(2, DIM, dtype=torch.float64)
        else:
            x = self.emb(idx)
        if self.fc is not None:
            x = torch.tanh(self.fc(x))
        return (x * x).sum() / 2 + x.sum()


def batch(rank, step, part=0):
    """This rank's indices: 2 + rank (+1 on odd steps) of them; rank 1 repeats two."""
    g = torch.Generator().manual_seed(1000 * rank + 10 * step + part)
    idx = torch.randint(0, ROWS, (2 + rank + step % 2,), generator=g)
    if rank == 1:
        idx = torch.cat([idx, idx[:2]])
    return idx


def indices(idx):
    return None if idx is None else torch.tensor(idx, dtype=torch.long)


def plan(steps, passes, skip=None):
    """[step][pass] -> this rank's indices as a list, or None where `skip(rank, step)` says
    the batch does not reach the embedding."""
    r = hvd.rank()
    return [[None if skip is not None and skip(r, s) else batch(r, s, k).tolist()
             for k in range(passes)] for s in range(steps)]


def distributed(make, steps, passes=1, dense=False, skip=None, set_to_none=None, **kwargs):
    net = Net(dense)
    opt = hvd.DistributedOptimizer(make(net), named_parameters=net.named_parameters(),
                                   backward_passes_per_step=passes, **kwargs)
    mine = plan(steps, passes, skip)
    before = hvd.engine_stats()["bytes"]
    for s in range(steps):
        if set_to_none is None:
            opt.zero_grad()
        else:
            opt.zero_grad(set_to_none=set_to_none)
        for idx in mine[s]:
            net(indices(idx)).backward()
        opt.step()
    net.sent = hvd.engine_stats()["bytes"] - before  # what the reductions moved
    return net, hvd.allgather_object(mine)


def reference(make, every, dense=False, op=hvd.Average):
    """One process: at each step every rank's gradient from the same parameters, their
    average (sum for op=Sum) as the gradient, one step of a plain torch optimizer. Returns the
    model and the last step's gradients by parameter name."""
    net = Net(dense)
    opt = make(net)
    steps = len(every[0])
    for s in range(steps):
        total = {}
        for batches in every:
            for p in net.parameters():
                p.grad = None
            for idx in batches[s]:
                net(indices(idx)).backward()
            for name, p in net.named_parameters():
                if p.grad is not None:
                    total[name] = p.grad if name not in total else total[name] + p.grad
        scale = len(every) if op == hvd.Average else 1
        grads = {name: (g.coalesce() if g.is_sparse else g) / scale for name, g in total.items()}
        for name, p in net.named_parameters():
            p.grad = grads[name]
        opt.step()
    return net, grads


def assert_same_parameters(net, ref, **tol):
    for (name, p), q in zip(net.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), msg=name, **(tol or TOL))
    # Every rank holds the same parameters.
    mine = [p.detach() for p in net.parameters()]
    for theirs in hvd.allgather_object(mine):
        for a, b in zip(mine, theirs):
            assert torch.equal(a, b)


def assert_reduced_gradient(net, grads, every, **tol):
    """The embedding's gradient after step() is sparse, is the reduced gradient, and holds
    the rows the ranks' last batches touched."""
    grad = net.emb.weight.grad
    assert grad.is_sparse
    torch.testing.assert_close(grad.to_dense(), grads["emb.weight"].to_dense(), **(tol or TOL))
    touched = {i for batches in every for idx in batches[-1] if idx is not None for i in idx}
    assert set(grad.coalesce()._indices()[0].tolist()) == touched


def sparse_adam(net):
    return torch.optim.SparseAdam(list(net.emb.parameters()), lr=0.05)


def sgd(net):
    return torch.optim.SGD(net.parameters(), lr=0.1)


def sgd_momentum(net):
    return torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)


SPARSE_AS_DENSE = pytest.mark.parametrize("sparse_as_dense", [False, True],
                                          ids=["gathered", "as-dense"])


@SPARSE_AS_DENSE
@pytest.mark.parametrize("make", [sparse_adam, sgd], ids=["sparse-adam", "sgd"])
def test_sparse_embedding_trains_as_one_process_on_the_averaged_gradients(make,
                                                                          sparse_as_dense):
    net, every = distributed(make, steps=3, sparse_as_dense=sparse_as_dense)
    counts = [len(batches[0][0]) for batches in every]
    assert len(set(counts)) == hvd.size()  # every rank a different count
    assert len(set(every[1][0][0])) < counts[1]  # rank 1 repeats indices
    ref, grads = reference(make, every)
    assert_same_parameters(net, ref)
    assert_reduced_gradient(net, grads, every)


@SPARSE_AS_DENSE
@pytest.mark.parametrize("make", [sparse_adam, sgd], ids=["sparse-adam", "sgd"])
def test_op_sum_steps_with_the_summed_gradients(make, sparse_as_dense):
    net, every = distributed(make, steps=2, op=hvd.Sum, sparse_as_dense=sparse_as_dense)
    ref, grads = reference(make, every, op=hvd.Sum)
    assert_same_parameters(net, ref)
    assert_reduced_gradient(net, grads, every)


def test_ops_other_than_average_and_sum_refuse_gathered_sparse_gradients():
    net = Net()
    opt = hvd.DistributedOptimizer(sgd(net), named_parameters=net.named_parameters(),
                                   op=hvd.Max)
    with pytest.raises(ValueError, match="hvd.Average or hvd.Sum only"):
        net(batch(hvd.rank(), 0)).backward()  # the hook refuses before anything is submitted
    del opt


@SPARSE_AS_DENSE
def test_two_backward_passes_per_step_accumulate_sparse_gradients(sparse_as_dense):
    net, every = distributed(sparse_adam, steps=3, passes=2, sparse_as_dense=sparse_as_dense)
    ref, grads = reference(sparse_adam, every)
    assert_same_parameters(net, ref)
    assert_reduced_gradient(net, grads, every)


@SPARSE_AS_DENSE
@pytest.mark.parametrize("options", [{}, {"groups": 1}, {"gradient_predivide_factor": 2.0}],
                         ids=["each-alone", "one-group", "predivide"])
def test_sparse_embedding_with_a_dense_linear(options, sparse_as_dense):
    net, every = distributed(sgd_momentum, steps=3, dense=True, sparse_as_dense=sparse_as_dense,
                             **options)
    ref, grads = reference(sgd_momentum, every, dense=True)
    assert_same_parameters(net, ref)
    assert_reduced_gradient(net, grads, every)
    for name in ("fc.weight", "fc.bias"):
        grad = dict(net.named_parameters())[name].grad
        assert not grad.is_sparse
        torch.testing.assert_close(grad, grads[name], **TOL)


@SPARSE_AS_DENSE
@pytest.mark.parametrize("set_to_none", [False, True], ids=["zeroed", "none"])
def test_a_rank_whose_batch_skips_the_embedding_after_the_first_step(set_to_none,
                                                                     sparse_as_dense):
    # Rank 0's second batch does not reach the embedding: its gradient is a zeroed sparse
    # tensor (set_to_none=False, sparse_dim 2) or None; it takes part with no rows, and gets
    # the others' rows back sparse.
    skip = lambda r, s: r == 0 and s == 1  # noqa: E731
    net, every = distributed(sgd_momentum, steps=3, dense=True, skip=skip,
                             set_to_none=set_to_none, sparse_as_dense=sparse_as_dense)
    assert every[0][1] == [None]
    ref, grads = reference(sgd_momentum, every, dense=True)
    assert_same_parameters(net, ref)
    assert_reduced_gradient(net, grads, every)


def test_a_rank_whose_first_batch_skips_the_embedding_under_sparse_as_dense():
    # Before its first sparse gradient a rank cannot tell the parameter's are sparse: it takes
    # part with dense zeros (as in Horovod), which the others' dense copies meet; SGD steps
    # alike with its dense result, and from the next step on it gets sparse ones.
    skip = lambda r, s: r == 0 and s == 0  # noqa: E731
    net, every = distributed(sgd_momentum, steps=3, dense=True, skip=skip, sparse_as_dense=True)
    ref, grads = reference(sgd_momentum, every, dense=True)
    assert_same_parameters(net, ref)
    assert_reduced_gradient(net, grads, every)


@SPARSE_AS_DENSE
def test_an_empty_batch_after_the_first_step_with_sparse_adam(sparse_as_dense):
    # Rank 0's second batch has no indices: an empty sparse gradient accumulated into the
    # zeroed one (sparse_dim 2) must still meet the other ranks' row-sparse gradients.
    def run():
        net = Net()
        opt = hvd.DistributedOptimizer(sparse_adam(net), named_parameters=net.named_parameters(),
                                       sparse_as_dense=sparse_as_dense)
        mine = plan(3, 1)
        if hvd.rank() == 0:
            mine[1][0] = []
        for s in range(3):
            opt.zero_grad(set_to_none=False)
            net(indices(mine[s][0])).backward()
            opt.step()
        return net, hvd.allgather_object(mine)

    net, every = run()
    ref, grads = reference(sparse_adam, every)
    assert_same_parameters(net, ref)
    assert_reduced_gradient(net, grads, every)


@SPARSE_AS_DENSE
def test_fp16_compression_of_sparse_gradients(sparse_as_dense):
    plain, every = distributed(sgd, steps=2, sparse_as_dense=sparse_as_dense)
    net, _ = distributed(sgd, steps=2, compression=hvd.Compression.fp16,
                         sparse_as_dense=sparse_as_dense)
    if sparse_as_dense:  # the whole table, 8 or 2 bytes an entry
        assert (plain.sent, net.sent) == (2 * ROWS * DIM * 8, 2 * ROWS * DIM * 2)
    else:  # each rank's distinct rows (coalesced before they travel): an int64 index and
        # DIM values of 8 or 2 bytes each
        rows = sum(len(set(b[s][0])) for b in every for s in range(2))
        assert (plain.sent, net.sent) == (rows * (8 + DIM * 8), rows * (8 + DIM * 2))
    ref, grads = reference(sgd, every)
    assert_same_parameters(net, ref, rtol=2e-3, atol=2e-3)
    assert net.emb.weight.grad.dtype == torch.float64
    assert_reduced_gradient(net, grads, every, rtol=2e-3, atol=2e-3)


def _local_sparse(rank, dense_dims=True):
    """Rank r's sparse tensor: r + 1 entries (rank 1 repeats index 2), sizes [6, 3]."""
    idx = [[(2 * rank + k) % 6 for k in range(rank + 1)]]
    if rank == 1:
        idx = [[2, 2]]
    values = torch.arange(1.0, 3 * len(idx[0]) + 1).reshape(-1, 3) * (rank + 1)
    t = torch.sparse_coo_tensor(torch.tensor(idx), values, (6, 3))
    if not dense_dims:
        t = t.to_dense().to_sparse()  # sparse_dim 2, values 1-D
    return t


@pytest.mark.parametrize("dense_dims", [True, False], ids=["hybrid", "all-sparse"])
@pytest.mark.parametrize("op", [hvd.Average, hvd.Sum], ids=["average", "sum"])
def test_sparse_allreduce_async_gathers_every_rank_entries(op, dense_dims):
    every = [_local_sparse(r, dense_dims) for r in range(hvd.size())]
    handle = hvd.sparse_allreduce_async(every[hvd.rank()], name="sp.%s" % dense_dims, op=op)
    out = handle()
    assert out.is_sparse and out.shape == (6, 3)
    assert out.sparse_dim() == every[0].sparse_dim()
    # Uncoalesced: every rank's entries, in rank order.
    assert out._values().shape[0] == sum(t._values().shape[0] for t in every)
    torch.testing.assert_close(out._indices(), torch.cat([t._indices() for t in every], 1))
    expected = sum(t.to_dense() for t in every)
    if op == hvd.Average:
        expected = expected / hvd.size()
    torch.testing.assert_close(out.to_dense(), expected)
    assert handle() is out  # a second call gives the same result


def test_sparse_allreduce_async_unnamed_empty_and_checks():
    # Two unnamed reductions in flight at once, one rank contributing no entries.
    first = _local_sparse(hvd.rank())
    empty = torch.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.long), torch.zeros(0, 3),
                                    (6, 3))
    second = empty if hvd.rank() == 0 else _local_sparse(hvd.rank()) * 2
    h1 = hvd.sparse_allreduce_async(first, None, hvd.Sum)
    h2 = hvd.sparse_allreduce_async(second, None, hvd.Sum)
    every = [_local_sparse(r) for r in range(hvd.size())]
    torch.testing.assert_close(h2().to_dense(), sum(t.to_dense() for t in every[1:]) * 2)
    torch.testing.assert_close(h1().to_dense(), sum(t.to_dense() for t in every))
    nothing = hvd.sparse_allreduce_async(empty, "sp.empty", hvd.Average)()
    assert nothing._values().shape[0] == 0 and nothing.shape == (6, 3)
    with pytest.raises(ValueError, match="sparse COO"):
        hvd.sparse_allreduce_async(torch.ones(2, 3), "sp.dense", hvd.Sum)
    with pytest.raises(ValueError, match="Average or hvd.Sum"):
        hvd.sparse_allreduce_async(first, "sp.max", hvd.Max)
