"""What a Horovod script observes must not depend on how fast hvd's engine is: a name stays in
flight until its handle is synchronized, a refused op leaves the job's later ops aligned, an
in-place op counts as a write for autograd, integer tensors take scale factors, and a process
forked after init fails at once instead of hanging."""

import ctypes
import os
import select
import sys
import time

import pytest
import torch

import hvd.torch as hvd

ROUNDS = 200


def _ops():
    """Each async op kind as a script submits it: (kind, submit(name))."""
    n = hvd.size()
    return [
        ("allreduce", lambda name: hvd.allreduce_async(torch.ones(4), name=name, op=hvd.Sum)),
        ("allgather", lambda name: hvd.allgather_async(torch.ones(2, 3), name=name)),
        ("broadcast", lambda name: hvd.broadcast_async(torch.ones(4), 0, name=name)),
        ("alltoall", lambda name: hvd.alltoall_async(torch.ones(2 * n), name=name)),
        ("reducescatter", lambda name: hvd.reducescatter_async(torch.ones(2 * n), name=name,
                                                               op=hvd.Sum)),
    ]


@pytest.mark.parametrize("kind", ["allreduce", "allgather", "broadcast", "alltoall",
                                  "reducescatter"])
def test_a_second_submit_of_a_name_is_refused_until_the_first_is_synchronized(kind):
    # Rank 0 submits first and waits in a barrier; every other rank submits the name, so the op
    # can run at once, and submits it again: that must raise every time, whether the engine has
    # finished the first op already (odd rounds wait until poll() says so) or not.
    submit = dict(_ops())[kind]
    refused = 0
    for i in range(ROUNDS):
        name = "dup.%s" % kind
        if hvd.rank() == 0:
            handle = submit(name)
            hvd.barrier()
        else:
            handle = submit(name)
            if i % 2:
                while not hvd.poll(handle):
                    pass
            with pytest.raises(ValueError, match="already in flight"):
                submit(name)
            refused += 1
            hvd.barrier()
        hvd.synchronize(handle)
    assert refused == (0 if hvd.rank() == 0 else ROUNDS)
    # Nothing was misaligned: the next op of the job pairs up on every rank.
    assert hvd.allreduce(torch.ones(3), op=hvd.Sum, name="after.dup.%s" % kind).tolist() == [
        float(hvd.size())] * 3


def test_a_synchronized_name_can_be_submitted_again_at_once():
    for _ in range(ROUNDS):
        out = hvd.synchronize(hvd.allreduce_async(torch.ones(2), name="reuse", op=hvd.Sum))
        assert out.tolist() == [float(hvd.size())] * 2


def test_after_an_error_caught_on_every_rank_or_on_some_the_next_ops_still_run():
    # An invalid argument on every rank, then one on some ranks only (a duplicate), then a
    # mismatch that fails on every rank: each is caught and the job's next ops still match.
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(2), name="bad\0name")
    h = hvd.allreduce_async(torch.ones(2), name="kept", op=hvd.Sum)
    if hvd.rank() == 1:
        with pytest.raises(ValueError):
            hvd.allreduce_async(torch.ones(2), name="kept")
    assert hvd.synchronize(h).tolist() == [float(hvd.size())] * 2
    with pytest.raises(hvd.HorovodInternalError):
        hvd.allreduce(torch.ones(2 + hvd.rank()), name="mismatched")
    for i in range(3):
        assert hvd.allreduce(torch.full((2,), float(i)), op=hvd.Sum,
                             name="next.%d" % i).tolist() == [float(i * hvd.size())] * 2
    assert hvd.broadcast_object({"rank": hvd.rank()}, root_rank=0) == {"rank": 0}


def test_a_nul_in_a_name_is_a_value_error_not_a_shorter_name():
    for call in (lambda: hvd.allreduce(torch.ones(1), name="a\0b"),
                 lambda: hvd.allgather(torch.ones(1), name="a\0c"),
                 lambda: hvd.broadcast_(torch.ones(1), 0, name="a\0d")):
        with pytest.raises(ValueError, match="NUL"):
            call()


@pytest.mark.parametrize("inplace", ["allreduce_", "broadcast_", "grouped_allreduce_",
                                     "allreduce_async_"])
def test_an_in_place_op_is_a_write_that_autograd_sees(inplace):
    # torch raises when a tensor saved for backward was written in place; hvd's in-place ops
    # must count as such writes, or the gradient silently uses the new values.
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1
    c = (b * b).sum()  # saves b
    version = b._version
    if inplace == "allreduce_":
        hvd.allreduce_(b, op=hvd.Sum, name="ver.ar")
    elif inplace == "broadcast_":
        hvd.broadcast_(b, 0, name="ver.bc")
    elif inplace == "grouped_allreduce_":
        hvd.grouped_allreduce_([b], op=hvd.Sum, name="ver.gar")
    else:
        hvd.synchronize(hvd.allreduce_async_(b, op=hvd.Sum, name="ver.ara"))
    assert b._version > version
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.backward()


def _scaled_expectation(dtype, pre, post, op, shape):
    """Horovod's rule, computed locally: each rank's values times the prescale (float64,
    truncated toward zero for integers), summed (divided by the size for Average), times the
    postscale, truncated once at the end for integers."""
    total = torch.zeros(shape, dtype=torch.float64)
    for r in range(hvd.size()):
        v = _scaled_input(r, shape).to(torch.float64) * pre
        total += torch.trunc(v) if not dtype.is_floating_point else v
    if op == hvd.Average:
        total = total / hvd.size()
    total = total * post
    if not dtype.is_floating_point:
        return torch.trunc(total).to(dtype)
    return total.to(dtype)


def _scaled_input(rank, shape):
    n = 1
    for d in shape:
        n *= d
    return ((torch.arange(n) * 3 + rank * 5) % 11 - 5).reshape(shape)


SCALES = [(1.5, 1.0), (1.0, 0.7), (2.5, -1.5), (0.5, 3.0)]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float16, torch.float32,
                                   torch.float64])
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_prescale_and_postscale_on_every_type_as_horovod_scales_them(dtype, op):
    shape = (2 * hvd.size(), 3)
    for pre, post in SCALES:
        x = _scaled_input(hvd.rank(), shape).to(dtype)
        want = _scaled_expectation(dtype, pre, post, op, shape)
        tag = "%s.%d.%s.%s" % (str(dtype), op, pre, post)
        got = {
            "allreduce": hvd.allreduce(x, op=op, prescale_factor=pre, postscale_factor=post,
                                       name="sc.ar." + tag),
            "grouped": hvd.grouped_allreduce([x, x.clone()], op=op, prescale_factor=pre,
                                             postscale_factor=post, name="sc.gar." + tag)[1],
        }
        inplace = x.clone()
        hvd.allreduce_(inplace, op=op, prescale_factor=pre, postscale_factor=post,
                       name="sc.ari." + tag)
        got["in place"] = inplace
        rows = shape[0] // hvd.size()
        mine = want[hvd.rank() * rows:(hvd.rank() + 1) * rows]
        scattered = {
            "reducescatter": hvd.reducescatter(x, op=op, prescale_factor=pre,
                                               postscale_factor=post, name="sc.rs." + tag),
            "grouped reducescatter": hvd.grouped_reducescatter(
                [x], op=op, prescale_factor=pre, postscale_factor=post,
                name="sc.grs." + tag)[0],
        }
        for what, out in list(got.items()) + list(scattered.items()):
            expected = mine if what in scattered else want
            assert out.dtype == dtype, what
            if dtype.is_floating_point:
                tolerance = 1e-2 if dtype == torch.float16 else 1e-6
                assert torch.allclose(out.to(torch.float64), expected.to(torch.float64),
                                      rtol=tolerance, atol=tolerance), (what, pre, post)
            else:
                assert torch.equal(out, expected), (what, pre, post, out, expected)


def test_a_child_forked_after_init_fails_at_once_and_exits_cleanly():
    # The child has none of the engine's threads: an op there must raise, not wait forever,
    # and its normal exit must not try to stop the parent's engine (or hang joining it).
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        try:
            hvd.allreduce(torch.ones(2), name="in.child")
            result = b"accepted"
        except hvd.HorovodInternalError as e:
            result = b"internal " + str(e).encode()
        except BaseException as e:  # noqa: B902 - anything else is reported to the parent
            result = b"other " + repr(e).encode()
        os.write(write_end, result[:4000])
        os.close(write_end)
        code = 0 if hvd.rank() >= 0 else 3  # local queries still answer
        sys.stdout.flush()
        # C's exit(): the atexit handlers and static destructors run (libhvd's among them),
        # as at the end of a program; pytest's own machinery in this copy is skipped.
        ctypes.CDLL(None).exit(code)
    os.close(write_end)
    ready, _, _ = select.select([read_end], [], [], 30)
    message = os.read(read_end, 4096).decode() if ready else "no answer within 30 s"
    os.close(read_end)
    deadline = time.monotonic() + 30
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child did not exit within 30 s")
    assert message.startswith("internal ") and "forked" in message, message
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    # The parent's hvd is untouched.
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after.fork").tolist() == [
        float(hvd.size())] * 2


@pytest.mark.parametrize("change", ["resize", "set"])
def test_a_tensor_changed_while_its_op_is_in_flight_fails_that_op_not_the_job(change):
    # Rank 0's op cannot run before the others submit theirs, after the barrier that rank 0
    # enters once it has changed the tensor: the change surely happens while it is in flight.
    # (Shrinking keeps the memory; set_ gives the tensor another storage, while hvd keeps the
    # old one alive for the engine.)
    t = torch.ones(64)
    if hvd.rank() == 0:
        handle = hvd.allreduce_async_(t, name="moved.%s" % change, op=hvd.Sum)
        if change == "resize":
            t.resize_(16)
        else:
            t.set_(torch.zeros(64))
        hvd.barrier()
        with pytest.raises(hvd.HorovodInternalError, match="resized or given new storage"):
            hvd.synchronize(handle)
    else:
        hvd.barrier()
        handle = hvd.allreduce_async_(t, name="moved.%s" % change, op=hvd.Sum)
        assert hvd.synchronize(handle).tolist() == [float(hvd.size())] * 64
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after.moved.%s" % change).tolist() \
        == [float(hvd.size())] * 2
