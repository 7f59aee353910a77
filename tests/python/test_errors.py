"""Errors: a disagreement across ranks fails the op on every rank, naming the tensor, the field
and the ranks, and the job goes on; arguments wrong on one rank are a ValueError at submit."""

import re

import pytest
import torch

import hvd.torch as hvd


def mismatch(op_call, name, field):
    """Runs a collective whose arguments differ on rank 0 and checks the error every rank
    gets, then that a correct op of the same kind works."""
    with pytest.raises(hvd.HorovodInternalError) as failure:
        op_call()
    message = str(failure.value)
    assert name in message, message
    assert field in message, message
    assert re.search(r"rank 0", message) and re.search(r"ranks? 1", message), message
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum, name=name + ".after").tolist() == [
        float(hvd.size())] * 2


def test_shape_mismatch_names_the_tensor_and_ranks():
    n = 17 if hvd.rank() == 0 else 18
    mismatch(lambda: hvd.allreduce(torch.ones(n), name="mm.shape"), "allreduce.mm.shape",
             "shape")


def test_dtype_mismatch():
    dtype = torch.float32 if hvd.rank() == 0 else torch.float64
    mismatch(lambda: hvd.allreduce(torch.ones(4, dtype=dtype), name="mm.dtype"),
             "allreduce.mm.dtype", "float")


def test_op_mismatch():
    op = hvd.Sum if hvd.rank() == 0 else hvd.Max
    mismatch(lambda: hvd.allreduce(torch.ones(4), op=op, name="mm.op"), "allreduce.mm.op", "op")


def test_root_mismatch():
    root = 0 if hvd.rank() == 0 else 1
    mismatch(lambda: hvd.broadcast(torch.ones(4), root, name="mm.root"), "broadcast.mm.root",
             "root")


def test_allgather_trailing_dimension_mismatch():
    cols = 2 if hvd.rank() == 0 else 3
    mismatch(lambda: hvd.allgather(torch.ones(1, cols), name="mm.cols"), "allgather.mm.cols",
             "shape")


def test_duplicate_in_flight_name_is_a_value_error_at_submit():
    # Rank 0's op cannot finish before the others submit theirs, which they do only after the
    # barrier that rank 0 enters once it has checked the duplicate: it is surely in flight.
    t = torch.ones(8)
    if hvd.rank() == 0:
        h = hvd.allreduce_async(t, name="dup")
        with pytest.raises(ValueError, match="already in flight"):
            hvd.allreduce_async(t, name="dup")
        hvd.barrier()
    else:
        hvd.barrier()
        h = hvd.allreduce_async(t, name="dup")
    assert hvd.synchronize(h).tolist() == [1.0] * 8


def test_bad_splits_are_value_errors_at_submit():
    t = torch.ones(hvd.size() * 2, 3)
    with pytest.raises(ValueError, match="splits"):
        hvd.alltoall(t, splits=[1] * hvd.size())  # adds up to size, not 2 * size
    with pytest.raises(ValueError, match="splits"):
        hvd.alltoall(t, splits=[2] * (hvd.size() + 1))  # one per rank
    with pytest.raises(ValueError, match="negative"):
        hvd.alltoall(t, splits=[-1] + [2] * (hvd.size() - 1) + [1])
    with pytest.raises(ValueError, match="splits"):
        hvd.alltoall(t, splits=torch.ones(hvd.size(), dtype=torch.float32))
    with pytest.raises(ValueError, match="split equally"):
        hvd.alltoall(torch.ones(hvd.size() * 2 + 1))  # equal split impossible
    out, got = hvd.alltoall(t, splits=[2] * hvd.size())
    assert out.shape == (hvd.size() * 2, 3) and got.tolist() == [2] * hvd.size()


def test_other_submit_errors():
    with pytest.raises(ValueError):
        hvd.allgather(torch.tensor(3.0))  # a scalar has no rows
    with pytest.raises(ValueError):
        hvd.broadcast(torch.ones(2), root_rank="0")
    with pytest.raises(ValueError, match="is not registered"):
        hvd.allreduce(torch.ones(1), process_set=hvd.ProcessSet([0]))  # not given to init
    with pytest.raises(ValueError, match="must be an hvd.ProcessSet"):
        hvd.allreduce(torch.ones(1), process_set=0)
