"""allgather, broadcast, alltoall, reducescatter (plain, async, grouped), barrier and join,
every dtype, exact values."""

import pytest
import torch

import hvd.torch as hvd
from conftest import DTYPES
from values import assert_equal, reduced, value


def rows_of(rank):
    return rank + 1  # dimension 0 differs across ranks


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allgather_uneven_rows_every_dtype(dtype):
    mine = value(hvd.rank(), rows_of(hvd.rank()) * 3, dtype, rows=rows_of(hvd.rank()))
    want = torch.cat([value(r, rows_of(r) * 3, dtype, rows=rows_of(r))
                      for r in range(hvd.size())])
    assert_equal(hvd.allgather(mine), want)
    assert_equal(hvd.synchronize(hvd.allgather_async(mine, name="ag.%s" % dtype)), want)


def test_grouped_allgather_sync_and_async():
    a = torch.full((hvd.rank() + 1, 2), hvd.rank(), dtype=torch.int64)
    b = torch.full((1,), float(hvd.rank()))
    want_a = torch.cat([torch.full((r + 1, 2), r, dtype=torch.int64) for r in range(hvd.size())])
    want_b = torch.arange(hvd.size(), dtype=torch.float32)
    out = hvd.grouped_allgather([a, b])
    assert isinstance(out, list) and torch.equal(out[0], want_a) and torch.equal(out[1], want_b)
    out = hvd.synchronize(hvd.grouped_allgather_async([a, b], name="gag"))
    assert isinstance(out, tuple) and torch.equal(out[0], want_a) and torch.equal(out[1], want_b)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast_from_every_root_every_dtype(dtype):
    for root in range(hvd.size()):
        mine = value(hvd.rank(), 12, dtype, rows=3)
        want = value(root, 12, dtype, rows=3)
        keep = mine.clone()
        assert_equal(hvd.broadcast(mine, root), want)
        assert torch.equal(mine, keep)
        assert_equal(hvd.synchronize(hvd.broadcast_async(mine, root)), want)
        assert hvd.broadcast_(mine, root) is mine
        assert_equal(mine, want)
        other = value(hvd.rank(), 12, dtype, rows=3)
        assert hvd.synchronize(hvd.broadcast_async_(other, root, name="b_.%d" % root)) is other
        assert_equal(other, want)


def splits_for(sender, size):
    """Rank `sender` sends (sender + p) % 3 rows to rank p: uneven, zeros included."""
    return [(sender + p) % 3 for p in range(size)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_alltoall_with_splits_as_list_and_tensor(dtype):
    size, me = hvd.size(), hvd.rank()

    def rows(sender):
        s = splits_for(sender, size)
        return value(sender, sum(s) * 2, dtype, rows=sum(s)), s

    mine, splits = rows(me)
    pieces, received = [], []
    for sender in range(size):
        t, s = rows(sender)
        start = sum(s[:me])
        pieces.append(t[start:start + s[me]])
        received.append(s[me])
    want = torch.cat(pieces)
    out, got = hvd.alltoall(mine, splits=splits)
    assert_equal(out, want)
    assert got.dtype == torch.int32 and got.tolist() == received
    out, got = hvd.alltoall(mine, splits=torch.tensor(splits, dtype=torch.int64))
    assert_equal(out, want)
    assert got.dtype == torch.int64 and got.tolist() == received
    out, got = hvd.synchronize(hvd.alltoall_async(mine, splits=splits, name="a2a.%s" % dtype))
    assert_equal(out, want)
    assert got.tolist() == received


def test_alltoall_equal_split_returns_the_tensor_alone():
    size, me = hvd.size(), hvd.rank()
    mine = torch.arange(size * 2, dtype=torch.float32) + 100 * me
    out = hvd.alltoall(mine)
    assert isinstance(out, torch.Tensor)
    want = torch.cat([torch.arange(2 * me, 2 * me + 2, dtype=torch.float32) + 100 * r
                      for r in range(size)])
    assert torch.equal(out, want)
    # synchronize of an alltoall handle always gives (output, received_splits)
    out, got = hvd.synchronize(hvd.alltoall_async(mine))
    assert torch.equal(out, want) and got.tolist() == [2] * size


def shares(rows, size):
    base, extra = divmod(rows, size)
    return [base + (1 if r < extra else 0) for r in range(size)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=["sum", "average"])
def test_reducescatter_uneven_rows(dtype, op):
    size, me = hvd.size(), hvd.rank()
    rows = 2 * size + 1  # the first rank gets one row more
    inputs = [value(r, rows * 3, dtype, rows=rows) for r in range(size)]
    total = reduced(inputs, op, dtype)
    counts = shares(rows, size)
    start = sum(counts[:me])
    want = total[start:start + counts[me]]
    out = hvd.reducescatter(inputs[me], op=op)
    assert_equal(out, want, average=op == hvd.Average)
    out = hvd.synchronize(hvd.reducescatter_async(inputs[me], op=op, name="rs.%s" % dtype))
    assert_equal(out, want, average=op == hvd.Average)


def test_reducescatter_default_op_is_average_and_grouped_forms():
    size, me = hvd.size(), hvd.rank()
    t = torch.full((size * 2, 2), float(me))
    mean = sum(range(size)) / size
    assert hvd.reducescatter(t).tolist() == [[mean, mean]] * 2
    a = torch.full((size, 1), float(me + 1))
    b = torch.full((size * 3,), float(me))
    out = hvd.grouped_reducescatter([a, b], op=hvd.Sum)
    assert out[0].tolist() == [[size * (size + 1) / 2]]
    assert out[1].tolist() == [float(sum(range(size)))] * 3
    out = hvd.synchronize(hvd.grouped_reducescatter_async([a, b], op=hvd.Sum, name="grs"))
    assert isinstance(out, tuple) and out[1].tolist() == [float(sum(range(size)))] * 3
    with pytest.raises(ValueError, match="Average or hvd.Sum"):
        hvd.reducescatter(t, op=hvd.Max)


def test_barrier_and_join():
    hvd.barrier()
    # Join: ranks join one after another; the last to join is the highest rank here, and the
    # allreduce the others submit meanwhile counts the joined ranks' zeros.
    if hvd.rank() == hvd.size() - 1:
        out = hvd.allreduce(torch.ones(3), op=hvd.Sum, name="join.last")
        assert out.tolist() == [1.0] * 3  # every other rank joined: zeros
    last = hvd.join()
    assert last == hvd.size() - 1
    # Everyone takes part again afterwards.
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [float(hvd.size())] * 2
