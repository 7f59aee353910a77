"""allreduce in its four forms, grouped allreduce in its four, every dtype and op, scale
factors and fp16 compression, with exact values."""

import pytest
import torch

import hvd.torch as hvd
from conftest import DTYPES
from values import FLOATS, assert_equal, reduced, value

OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]


def everyone(n, dtype, op=None):
    return [value(r, n, dtype, op) for r in range(hvd.size())]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS, ids=["sum", "average", "min", "max", "product"])
def test_allreduce_every_dtype_and_op_out_of_place_and_in_place(dtype, op):
    n = 37
    want = reduced(everyone(n, dtype, op), op, dtype)
    mine = value(hvd.rank(), n, dtype, op)
    keep = mine.clone()
    out = hvd.allreduce(mine, op=op)
    assert_equal(out, want, average=op == hvd.Average)
    assert torch.equal(mine, keep)  # out of place leaves the input alone
    h = hvd.allreduce_async(mine, op=op, name="async.%s.%d" % (dtype, op))
    assert_equal(hvd.synchronize(h), want, average=op == hvd.Average)
    same = hvd.allreduce_(mine, op=op)
    assert same is mine
    assert_equal(mine, want, average=op == hvd.Average)
    again = value(hvd.rank(), n, dtype, op)
    h = hvd.allreduce_async_(again, op=op)
    assert hvd.synchronize(h) is again
    assert_equal(again, want, average=op == hvd.Average)


def test_average_is_the_default_and_average_flag_is_honoured():
    t = torch.full((5,), float(hvd.rank()))
    want = sum(range(hvd.size())) / hvd.size()
    assert hvd.allreduce(t).tolist() == pytest.approx([want] * 5)
    assert hvd.allreduce(t, average=False).tolist() == [sum(range(hvd.size()))] * 5
    with pytest.raises(ValueError, match="supersedes average"):
        hvd.allreduce(t, average=True, op=hvd.Sum)


def test_prescale_and_postscale():
    t = torch.full((8,), float(hvd.rank() + 1), dtype=torch.float64)
    total = hvd.size() * (hvd.size() + 1) / 2
    out = hvd.allreduce(t, op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0)
    assert out.tolist() == [total * 2.0] * 8
    out = hvd.allreduce(t, op=hvd.Average, prescale_factor=3.0)
    assert out.tolist() == pytest.approx([total * 3.0 / hvd.size()] * 8, rel=1e-15)


def test_non_contiguous_tensors_in_and_out_of_place():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) * (hvd.rank() + 1)
    view = base.t()  # not contiguous
    want = torch.arange(24, dtype=torch.float32).reshape(4, 6).t() * (
        hvd.size() * (hvd.size() + 1) / 2)
    assert torch.equal(hvd.allreduce(view, op=hvd.Sum), want)
    hvd.allreduce_(view, op=hvd.Sum)
    assert torch.equal(view, want) and torch.equal(base.t(), want)


def test_fp16_compression_rounds_through_float16_and_casts_back():
    # 1 + 2^-12 per rank is not a float16 number: compressed it becomes 1.0.
    t = torch.full((64,), 1.0 + 2.0 ** -12, dtype=torch.float32)
    plain = hvd.allreduce(t, op=hvd.Sum, name="fp16.plain")
    squeezed = hvd.allreduce(t, op=hvd.Sum, name="fp16.squeezed",
                             compression=hvd.Compression.fp16)
    assert squeezed.dtype == torch.float32
    assert plain.tolist() == [hvd.size() * (1.0 + 2.0 ** -12)] * 64
    assert squeezed.tolist() == [float(hvd.size())] * 64


@pytest.mark.parametrize("form", ["sync", "sync_", "async", "async_"])
def test_grouped_allreduce_four_forms_mixed_dtypes(form):
    dtypes = [torch.float32, torch.int32, torch.float64, torch.float32]
    shapes = [(3,), (2, 5), (7,), (1, 1, 4)]
    mine = [value(hvd.rank(), int(torch.Size(s).numel()), d).reshape(s)
            for d, s in zip(dtypes, shapes)]
    want = [reduced([value(r, int(torch.Size(s).numel()), d).reshape(s)
                     for r in range(hvd.size())], hvd.Sum, d) for d, s in zip(dtypes, shapes)]
    if form == "sync":
        out = hvd.grouped_allreduce(mine, op=hvd.Sum)
        assert isinstance(out, list)
    elif form == "sync_":
        out = hvd.grouped_allreduce_(mine, op=hvd.Sum)
        assert all(o is m for o, m in zip(out, mine))
    elif form == "async":
        h = hvd.grouped_allreduce_async(mine, op=hvd.Sum, name="grouped.async")
        out = hvd.synchronize(h)
        assert isinstance(out, tuple)
    else:
        h = hvd.grouped_allreduce_async_(mine, op=hvd.Sum)
        out = hvd.synchronize(h)
        assert all(o is m for o, m in zip(out, mine))
    for o, w in zip(out, want):
        assert_equal(o, w)


def test_grouped_allreduce_with_fp16_compression():
    ts = [torch.full((16,), 1.0 + 2.0 ** -12) for _ in range(3)]
    out = hvd.grouped_allreduce(ts, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert all(o.dtype == torch.float32 and o.tolist() == [float(hvd.size())] * 16 for o in out)


def test_poll_becomes_true_and_synchronize_returns_once():
    h = hvd.allreduce_async(torch.ones(1000), op=hvd.Sum, name="poll.me")
    out = hvd.synchronize(h)
    assert out.tolist() == [float(hvd.size())] * 1000
    assert hvd.synchronize(h) is None  # Horovod: an unknown handle gives None
    with pytest.raises(ValueError, match="not created or has been cleared"):
        hvd.poll(h)
    h = hvd.allreduce_async(torch.ones(4), name="poll.again")
    while not hvd.poll(h):
        pass
    assert hvd.synchronize(h).tolist() == [1.0] * 4


def test_unsupported_dtype_is_a_value_error_at_submit():
    with pytest.raises(ValueError, match="not supported"):
        hvd.allreduce(torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="not supported"):
        hvd.allreduce(torch.ones(3, dtype=torch.complex64))
    # Nothing was submitted: the job goes on.
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [float(hvd.size())] * 2


def test_floats_list_is_complete():
    assert set(FLOATS) == {d for d in DTYPES if d.is_floating_point}
