"""Process sets at np 4 (tests/python/tests.cmake runs this file alone under hvdrun -np 4): the
sets [0, 1], [2, 3], [1, 3] and [0, 2] beside the global set, used at once (async ops of several
sets in flight, one Python thread per set), every op kind with exact values on each set, the
gradients within the set, the refusals, the ProcessSet API, dynamic add/remove, and a
two-stage pipeline-parallel model whose stages are data-parallel over their own process sets.
"""

import os
import threading
import types

import pytest
import torch

import hvd.torch as hvd
from hvd.torch.process_sets import process_sets
from values import assert_equal, reduced, value

pytestmark = pytest.mark.skipif(
    os.environ.get("HVD_PYTEST_LAUNCHER") == "1" or os.environ.get("HVD_SIZE") != "4",
    reason="process-set tests run in a job of 4 ranks (tests.cmake: python_process_sets_np4)")

SETS = ([0, 1], [2, 3], [3, 1], [0, 2])  # [3, 1]: a ProcessSet sorts its ranks


def start(sets, **environment):
    """hvd.init() anew with `sets` (and the environment given, for this init only)."""
    hvd.shutdown()
    saved = {k: os.environ.get(k) for k in environment}
    os.environ.update(environment)
    try:
        hvd.init(process_sets=sets)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def sets():
    ps = types.SimpleNamespace(all=[hvd.ProcessSet(r) for r in SETS])
    ps.s01, ps.s23, ps.s13, ps.s02 = ps.all
    start(ps.all)
    yield ps
    start(None)  # the job as the other test files expect it


@pytest.fixture
def registered(sets):
    """The module's sets, registered again if a test before re-initialised hvd."""
    if any(s.process_set_id is None for s in sets.all):
        start(sets.all)
    return sets


def mine(sets):
    """The sets this rank is in, the global set last."""
    return [s for s in sets.all if s.included()] + [hvd.global_process_set]


def run_threads(targets, timeout=120):
    """Runs each callable in a thread of its own, all at once; re-raises the first failure."""
    failures = []

    def wrap(fn):
        def body():
            try:
                fn()
            except BaseException as e:  # reported below, with its thread's traceback
                failures.append(e)
        return body

    threads = [threading.Thread(target=wrap(fn), daemon=True) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a thread did not finish within %d s" % timeout
    if failures:
        raise failures[0]


# --- the ProcessSet API ----------------------------------------------------------------------

def test_process_set_api_values(registered):
    me = hvd.rank()
    s01, s23, s13, s02 = registered.all
    assert [s.process_set_id for s in registered.all] == [1, 2, 3, 4]
    assert s13.ranks == [1, 3] and s13.mpi_comm is None
    assert str(s13) == "ProcessSet(process_set_id=3, ranks=[1, 3], mpi_comm=None)"
    for s in registered.all:
        assert s.size() == 2
        assert s.included() is (me in s.ranks)
        if s.included():
            assert s.rank() == s.ranks.index(me)
        else:
            with pytest.raises(ValueError, match="Process is not part of provided process set."):
                s.rank()
    g = hvd.global_process_set
    assert g.process_set_id == 0 and g.ranks == [0, 1, 2, 3]
    assert g.size() == 4 and g.rank() == me and g.included() is True
    assert str(g) == "ProcessSet(process_set_id=0, ranks=[0, 1, 2, 3], mpi_comm=None)"
    assert hvd.process_set_by_id(3) is s13 and hvd.process_set_by_id(0) is g
    with pytest.raises(ValueError, match="No known process set with id 9"):
        hvd.process_set_by_id(9)
    assert process_sets() == [g] + list(registered.all)

    loose = hvd.ProcessSet([2, 0])  # never registered
    assert loose.process_set_id is None and loose.ranks == [0, 2]
    assert loose.size() is None and loose.rank() is None
    assert loose.included() is (me in (0, 2))
    for bad in ("ab", [0, 1.0], 5, [True]):
        with pytest.raises(ValueError, match="list of process ranks"):
            hvd.ProcessSet(bad)


def test_horovod_names_are_hvd_objects():
    import horovod.common.process_sets as common
    import horovod.torch as htorch

    assert htorch.ProcessSet is hvd.ProcessSet
    assert htorch.global_process_set is hvd.global_process_set
    assert htorch.add_process_set is hvd.add_process_set
    assert htorch.remove_process_set is hvd.remove_process_set
    assert common.global_process_set is hvd.global_process_set


# --- every op kind, exact values, every set at once ------------------------------------------

def shares(rows, size):
    base, extra = divmod(rows, size)
    return [base + (1 if r < extra else 0) for r in range(size)]


def a2a_splits(sender, k):
    return [(sender + j) % 3 for j in range(k)]  # uneven, zeros included


def a2a_rows(sender, k):
    n = sum(a2a_splits(sender, k))
    return torch.arange(n * 2, dtype=torch.float32).reshape(n, 2) + 100 * sender


def exercise(ps, tag):
    """One round of every op kind on `ps`, checked against values from its members' job
    ranks. Names carry `tag`; unnamed ops are numbered per set, so they mix freely."""
    members, k, me = ps.ranks, len(ps.ranks), hvd.rank()
    index = ps.rank()
    assert index == members.index(me)

    # allreduce: Sum and Average, out of place, in place, async
    for op in (hvd.Sum, hvd.Average):
        want = reduced([value(m, 13, torch.float64) for m in members], op, torch.float64)
        assert_equal(hvd.allreduce(value(me, 13, torch.float64), op=op, process_set=ps), want,
                     average=op == hvd.Average)
        t = value(me, 13, torch.float64)
        assert hvd.allreduce_(t, op=op, name=tag + "ar_", process_set=ps) is t
        assert_equal(t, want, average=op == hvd.Average)
        h = hvd.allreduce_async(value(me, 13, torch.float64), op=op, process_set=ps)
        assert_equal(hvd.synchronize(h), want, average=op == hvd.Average)
    ints = hvd.allreduce(torch.full((3,), me + 1, dtype=torch.int32), op=hvd.Sum, process_set=ps)
    assert ints.tolist() == [sum(m + 1 for m in members)] * 3

    # grouped allreduce, sync and in place
    a, b = value(me, 6, torch.float32).reshape(2, 3), value(me, 4, torch.int64)
    want_a = reduced([value(m, 6, torch.float32).reshape(2, 3) for m in members], hvd.Sum,
                     torch.float32)
    want_b = reduced([value(m, 4, torch.int64) for m in members], hvd.Sum, torch.int64)
    out = hvd.grouped_allreduce([a, b], op=hvd.Sum, process_set=ps)
    assert_equal(out[0], want_a)
    assert_equal(out[1], want_b)
    out = hvd.synchronize(hvd.grouped_allreduce_async_([a, b], op=hvd.Sum, name=tag + "gar",
                                                      process_set=ps))
    assert out[0] is a and out[1] is b
    assert_equal(a, want_a)
    assert_equal(b, want_b)

    # allgather: rows that depend on the job rank, concatenated in set order
    rows = torch.full((me + 1, 2), float(me))
    want = torch.cat([torch.full((m + 1, 2), float(m)) for m in members])
    assert torch.equal(hvd.allgather(rows, process_set=ps), want)
    assert torch.equal(hvd.synchronize(hvd.allgather_async(rows, name=tag + "ag",
                                                           process_set=ps)), want)
    out = hvd.grouped_allgather([rows, torch.tensor([me])], process_set=ps)
    assert torch.equal(out[0], want) and out[1].tolist() == members

    # broadcast from each member, named by its job rank
    for root in members:
        t = value(me, 10, torch.float32)
        assert_equal(hvd.broadcast(t, root, process_set=ps), value(root, 10, torch.float32))
        assert hvd.broadcast_(t, root, name="%sb%d" % (tag, root), process_set=ps) is t
        assert_equal(t, value(root, 10, torch.float32))
    assert hvd.broadcast_object({"from": me}, root_rank=members[-1],
                                process_set=ps) == {"from": members[-1]}
    assert hvd.allgather_object(("r", me), process_set=ps) == [("r", m) for m in members]

    # alltoall with splits (one per member, in set order), as a list and as a tensor
    pieces, received = [], []
    for m in members:
        s = a2a_splits(m, k)
        start = sum(s[:index])
        pieces.append(a2a_rows(m, k)[start:start + s[index]])
        received.append(s[index])
    out, got = hvd.alltoall(a2a_rows(me, k), splits=a2a_splits(me, k), process_set=ps)
    assert torch.equal(out, torch.cat(pieces)) and got.tolist() == received
    out, got = hvd.synchronize(hvd.alltoall_async(
        a2a_rows(me, k), splits=torch.tensor(a2a_splits(me, k)), name=tag + "a2a",
        process_set=ps))
    assert torch.equal(out, torch.cat(pieces)) and got.tolist() == received
    even = hvd.alltoall(torch.arange(k, dtype=torch.int64) + 10 * me, process_set=ps)
    assert even.tolist() == [10 * m + index for m in members]

    # reducescatter: Sum and Average, the first rows % k members one row more
    n = 2 * k + 1
    counts = shares(n, k)
    start = sum(counts[:index])
    for op in (hvd.Sum, hvd.Average):
        total = reduced([value(m, n * 3, torch.float64, rows=n) for m in members], op,
                        torch.float64)
        out = hvd.reducescatter(value(me, n * 3, torch.float64, rows=n), op=op, process_set=ps)
        assert_equal(out, total[start:start + counts[index]], average=op == hvd.Average)
    out = hvd.grouped_reducescatter([torch.full((k, 1), float(me)), torch.ones(2 * k)],
                                    op=hvd.Sum, process_set=ps)
    assert out[0].tolist() == [[float(sum(members))]] and out[1].tolist() == [float(k)] * 2
    out = hvd.synchronize(hvd.reducescatter_async(torch.ones(k, 2), op=hvd.Sum, name=tag + "rs",
                                                  process_set=ps))
    assert out.tolist() == [[float(k)] * 2]

    # sparse allreduce: Average divides by the set's size
    sparse = torch.sparse_coo_tensor([[me % 3]], [float(me + 1)], (4,))
    result = hvd.sparse_allreduce_async(sparse, name=tag + "sparse", op=hvd.Average,
                                        process_set=ps)()
    dense = torch.zeros(4)
    for m in members:
        dense[m % 3] += (m + 1) / k
    assert torch.allclose(result.to_dense(), dense)

    hvd.barrier(process_set=ps)


def test_every_op_kind_on_every_set_from_one_thread_per_set(registered):
    targets = [lambda s=s: exercise(s, "t%d." % s.process_set_id) for s in mine(registered)]
    assert len(targets) == 3  # two of the four sets, and the global one
    run_threads(targets)
    run_threads(targets)  # again: the sets' caches and unnamed-op numbering


def test_async_ops_of_several_sets_in_flight_at_once(registered):
    me = hvd.rank()
    handles = []
    for s in mine(registered):  # the same names in every set: each set has its own
        t = torch.full((1000,), float(me + 1))
        handles.append((s, "sum", hvd.allreduce_async(t, op=hvd.Sum, name="inflight",
                                                      process_set=s)))
        handles.append((s, "gather", hvd.allgather_async(torch.tensor([me]), name="inflight",
                                                         process_set=s)))
        handles.append((s, "bcast", hvd.broadcast_async(torch.tensor([me]), s.ranks[0],
                                                        name="inflight", process_set=s)))
    for s, kind, h in reversed(handles):  # waited for in the opposite order
        out = hvd.synchronize(h)
        if kind == "sum":
            assert out.tolist() == [float(sum(m + 1 for m in s.ranks))] * 1000
        elif kind == "gather":
            assert out.tolist() == s.ranks
        else:
            assert out.tolist() == [s.ranks[0]]


# --- gradients travel within the set ---------------------------------------------------------

def weights(rank, shape):
    return torch.arange(1, torch.Size(shape).numel() + 1, dtype=torch.float64).reshape(
        shape) * (rank + 1)


def test_gradients_stay_in_the_set(registered):
    me = hvd.rank()
    ps = registered.s01 if me < 2 else registered.s23  # both pairs at once
    members, k, index = ps.ranks, 2, ps.rank()

    x = torch.ones(5, dtype=torch.float64, requires_grad=True)
    (hvd.allreduce(x, op=hvd.Sum, process_set=ps) * weights(me, (5,))).sum().backward()
    assert torch.equal(x.grad, sum(weights(m, (5,)) for m in members))

    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    (y,) = hvd.grouped_allreduce([x], op=hvd.Average, process_set=ps)
    (y * weights(me, (3,))).sum().backward()
    assert torch.allclose(x.grad, sum(weights(m, (3,)) for m in members) / k, rtol=0,
                          atol=1e-12)

    # allgather: my rows of the average, at my offset in set order (rows depend on job ranks)
    rows = me + 1
    total = sum(m + 1 for m in members)
    x = torch.zeros(rows, 2, dtype=torch.float64, requires_grad=True)
    (hvd.allgather(x, process_set=ps) * weights(me, (total, 2))).sum().backward()
    mean = sum(weights(m, (total, 2)) for m in members) / k
    start = sum(m + 1 for m in members[:index])
    assert torch.allclose(x.grad, mean[start:start + rows], rtol=0, atol=1e-12)

    # broadcast: the average on the root (a job rank), zero on the other member
    root = members[-1]
    x = torch.ones(4, dtype=torch.float64, requires_grad=True)
    (hvd.broadcast(x, root, process_set=ps) * weights(me, (4,))).sum().backward()
    want = sum(weights(m, (4,)) for m in members) / k
    assert torch.allclose(x.grad, want if me == root else torch.zeros(4, dtype=torch.float64),
                          rtol=0, atol=1e-12)

    # reducescatter Sum: the gathered gradients times the set's size
    x = torch.zeros(2 * k, dtype=torch.float64, requires_grad=True)
    (hvd.reducescatter(x, op=hvd.Sum, process_set=ps) * weights(me, (2,))).sum().backward()
    assert torch.equal(x.grad, torch.cat([weights(m, (2,)) for m in members]) * k)

    # alltoall: row j went to member j; its gradient comes back from there
    x = torch.zeros(k, dtype=torch.float64, requires_grad=True)
    (hvd.alltoall(x, process_set=ps) * weights(me, (k,))).sum().backward()
    assert torch.equal(x.grad, torch.stack([weights(m, (k,))[index] for m in members]))


# --- refusals --------------------------------------------------------------------------------

def test_an_op_on_a_set_this_rank_is_not_in_is_a_value_error_naming_the_set(registered):
    t = torch.ones(4)
    for s in registered.all:
        if s.included():
            continue
        names = "process set %d \\(ranks %s\\)" % (s.process_set_id, ",".join(map(str, s.ranks)))
        calls = [
            lambda: hvd.allreduce(t, process_set=s),
            lambda: hvd.allreduce_async_(t.clone(), process_set=s),
            lambda: hvd.grouped_allreduce([t, t], process_set=s),
            lambda: hvd.allgather(t, process_set=s),
            lambda: hvd.grouped_allgather([t], process_set=s),
            lambda: hvd.broadcast(t, s.ranks[0], process_set=s),
            lambda: hvd.broadcast_(t.clone(), s.ranks[0], process_set=s),
            lambda: hvd.alltoall(t, process_set=s),
            lambda: hvd.reducescatter(t, process_set=s),
            lambda: hvd.grouped_reducescatter([t], process_set=s),
            lambda: hvd.barrier(process_set=s),
            lambda: hvd.broadcast_object(1, root_rank=s.ranks[0], process_set=s),
            lambda: hvd.allgather_object(1, process_set=s),
        ]
        for call in calls:
            with pytest.raises(ValueError, match=names):
                call()
    # Nothing was submitted: the sets go on.
    for s in mine(registered):
        assert hvd.allreduce(t, op=hvd.Sum, process_set=s).tolist() == [float(s.size())] * 4


def test_invalid_process_set_arguments_are_value_errors(registered):
    t = torch.ones(2)
    me = hvd.rank()
    for bad in (None, 1, [0, 1]):
        with pytest.raises(ValueError, match="must be an hvd.ProcessSet"):
            hvd.allreduce(t, process_set=bad)
    for call in (lambda ps: hvd.allreduce(t, process_set=ps),
                 lambda ps: hvd.barrier(process_set=ps),
                 lambda ps: hvd.broadcast_parameters({"t": t}, 0, process_set=ps),
                 lambda ps: hvd.DistributedOptimizer(
                     torch.optim.SGD([torch.nn.Parameter(t)], lr=1), process_set=ps)):
        with pytest.raises(ValueError, match="is not registered"):
            call(hvd.ProcessSet([0, 1]))
    ps = registered.s13 if me in (1, 3) else registered.s02
    with pytest.raises(ValueError):  # a root outside the set (a job rank)
        hvd.broadcast(t, 2 if me in (1, 3) else 1, process_set=ps)
    with pytest.raises(ValueError, match="splits"):  # one split per member: two here
        hvd.alltoall(torch.ones(4), splits=[1, 1, 1, 1], process_set=ps)
    assert hvd.allreduce(t, op=hvd.Sum, process_set=ps).tolist() == [2.0, 2.0]


def test_a_mismatch_in_a_set_names_the_job_ranks(registered):
    me = hvd.rank()
    ps = registered.s13 if me in (1, 3) else registered.s02  # two mismatches at once
    low, high = ps.ranks
    n = 3 if me == low else 4
    with pytest.raises(hvd.HorovodInternalError) as failure:
        hvd.allreduce(torch.ones(n), name="mm.shape", process_set=ps)
    message = str(failure.value)
    assert "allreduce.mm.shape" in message and "shape" in message, message
    assert "rank %d" % low in message and "rank %d" % high in message, message
    assert "process set %d" % ps.process_set_id in message, message
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum, name="mm.after",
                         process_set=ps).tolist() == [2.0, 2.0]


# --- DistributedOptimizer and the whole-model helpers ----------------------------------------

@pytest.mark.parametrize("compression", [hvd.Compression.none, hvd.Compression.fp16],
                         ids=["none", "fp16"])
def test_distributed_optimizer_averages_over_its_set_only(registered, compression):
    me = hvd.rank()
    ps = registered.s13
    w = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    b = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    v = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([w, b, v], lr=1.0),
                                   named_parameters=[("w", w), ("b", b), ("v", v)],
                                   groups=[[w, b]], compression=compression, process_set=ps)
    for _ in range(2):
        opt.zero_grad()
        ((w.sum() + b.sum() + v.sum()) * (me + 1)).backward()
        opt.step()
    if ps.included():
        want = -2.0 * sum(m + 1 for m in ps.ranks) / 2  # the gradients of 1 and 3, averaged
    else:
        want = -2.0 * (me + 1)  # outside the set: the local gradient, nothing reduced
    for p in (w, b, v):
        assert p.detach().tolist() == [want] * p.numel(), (me, p)


def test_broadcast_parameters_and_optimizer_state_within_a_set(registered):
    me = hvd.rank()
    ps = registered.s01 if me < 2 else registered.s23
    root = ps.ranks[1]  # the set's second member, by job rank
    torch.manual_seed(20 + me)
    net = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(net.parameters(), lr=0.001 * (me + 1))
    net(torch.randn(4, 3)).sum().backward()
    opt.step()
    hvd.broadcast_parameters(net.state_dict(), root_rank=root, process_set=ps)
    hvd.broadcast_optimizer_state(opt, root_rank=root, process_set=ps)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.001 * (root + 1))
    everyone = hvd.allgather_object([p.detach() for p in net.parameters()], process_set=ps)
    assert len(everyone) == 2
    for a, b in zip(*everyone):
        assert torch.equal(a, b)
    # The other pair has other values: the broadcasts did not cross sets.
    all_four = hvd.allgather_object(net.weight.detach())
    assert not torch.equal(all_four[0], all_four[2])


# --- a two-stage pipeline, data-parallel within each stage ----------------------------------

def full_model():
    torch.manual_seed(5)
    return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(),
                               torch.nn.Linear(6, 3)).double()


def test_pipeline_parallel_two_stages_train_as_one_process(registered):
    """Ranks 0 and 1 hold stage 0 (Linear, Tanh), ranks 2 and 3 stage 1 (Linear, the loss);
    replica i is ranks i and i + 2 and trains on half of the batch. Activations go from rank i
    to rank i + 2 by a broadcast in the pair {i, i + 2}, their gradients back by an alltoall in
    the pair; each stage averages its gradients over its own set with DistributedOptimizer."""
    steps, batch, half = 4, 8, 4
    g = torch.Generator().manual_seed(6)
    x = torch.randn(batch, 4, generator=g, dtype=torch.float64)
    y = torch.randn(batch, 3, generator=g, dtype=torch.float64)

    reference = full_model()
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        ref_opt.step()

    me = hvd.rank()
    stage, replica = me // 2, me % 2
    stage_set = registered.s01 if stage == 0 else registered.s23
    pair = registered.s02 if replica == 0 else registered.s13
    peer = me + 2 if stage == 0 else me - 2
    model = full_model()
    part = model[0:2] if stage == 0 else model[2:]
    if replica == 1:
        with torch.no_grad():  # start elsewhere: the broadcast below must fix it
            for p in part.parameters():
                p.add_(1.0)
    hvd.broadcast_parameters(part.state_dict(), root_rank=stage_set.ranks[0],
                             process_set=stage_set)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(part.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=part.named_parameters(),
                                   process_set=stage_set)
    hvd.broadcast_optimizer_state(opt, root_rank=stage_set.ranks[0], process_set=stage_set)
    rows = slice(replica * half, (replica + 1) * half)
    for step in range(steps):
        opt.zero_grad()
        if stage == 0:
            h = part(x[rows])
            hvd.broadcast_(h.detach().clone(), root_rank=me, name="act.%d" % step,
                           process_set=pair)
            grad_h, got = hvd.alltoall(torch.zeros(0, 6, dtype=torch.float64), splits=[0, 0],
                                       name="grad.%d" % step, process_set=pair)
            assert got.tolist() == [0, half]
            h.backward(grad_h)
        else:
            h = hvd.broadcast(torch.zeros(half, 6, dtype=torch.float64), root_rank=peer,
                              name="act.%d" % step, process_set=pair).requires_grad_()
            torch.nn.functional.mse_loss(part(h), y[rows]).backward()
            # The pair's order is [peer, me]: every row of the gradient goes to the peer.
            hvd.alltoall(h.grad, splits=[half, 0], name="grad.%d" % step, process_set=pair)
        opt.step()

    ref_part = reference[0:2] if stage == 0 else reference[2:]
    initial = full_model()
    for (name, p), q, p0 in zip(part.named_parameters(), ref_part.parameters(),
                                (initial[0:2] if stage == 0 else initial[2:]).parameters()):
        assert not torch.allclose(p0, q), name  # training moved it
        assert torch.allclose(p.detach(), q.detach(), rtol=1e-12, atol=1e-14), (
            name, (p - q).abs().max().item())
    # Both replicas of the stage hold the very same parameters.
    theirs = hvd.allgather_object([p.detach() for p in part.parameters()], process_set=stage_set)
    for a, b in zip(*theirs):
        assert torch.equal(a, b)


# --- init, dynamic add/remove, re-init -------------------------------------------------------

def test_static_mode_refuses_add_and_remove(registered):
    with pytest.raises(ValueError, match="HOROVOD_DYNAMIC_PROCESS_SETS=1"):
        hvd.add_process_set([1, 2])
    with pytest.raises(ValueError, match="HOROVOD_DYNAMIC_PROCESS_SETS=1"):
        hvd.remove_process_set(registered.s01)
    assert registered.s01.process_set_id == 1  # refused: the set and its object stay
    assert hvd.remove_process_set(hvd.global_process_set) is False
    assert hvd.remove_process_set(hvd.ProcessSet([0, 1])) is False  # not registered


def test_dynamic_add_and_remove(registered):
    me = hvd.rank()
    start([registered.s01], HOROVOD_DYNAMIC_PROCESS_SETS="1")
    assert registered.s01.process_set_id == 1
    assert registered.s23.process_set_id is None  # of the earlier init: invalidated

    ps = hvd.add_process_set([2, 1])
    assert isinstance(ps, hvd.ProcessSet) and ps.process_set_id == 2 and ps.ranks == [1, 2]
    obj = hvd.ProcessSet([3, 0])
    assert hvd.add_process_set(obj) is obj and obj.process_set_id == 3
    with pytest.raises(ValueError, match="Attempted to add a duplicate process set: "
                                         "ProcessSet\\(process_set_id=None, ranks=\\[1, 2\\]"):
        hvd.add_process_set([1, 2])
    with pytest.raises(ValueError, match="Attempted to add a duplicate process set"):
        hvd.add_process_set(hvd.ProcessSet([0, 1]))
    with pytest.raises(ValueError, match="not a rank of this job"):
        hvd.add_process_set([0, 7])
    for s in (ps, obj, registered.s01):
        if s.included():
            out = hvd.allreduce(torch.tensor([float(me)]), op=hvd.Sum, process_set=s)
            assert out.item() == float(sum(s.ranks))

    assert hvd.remove_process_set(ps) is True
    assert ps.process_set_id is None and ps.ranks == [1, 2]
    with pytest.raises(ValueError, match="is not registered"):
        hvd.allreduce(torch.ones(1), process_set=ps)
    assert hvd.remove_process_set(ps) is False  # no longer registered
    assert hvd.remove_process_set(hvd.global_process_set) is False
    again = hvd.add_process_set([1, 2])  # the ranks may form a set again, under a new id
    assert again.process_set_id == 4
    assert [s.process_set_id for s in process_sets()] == [0, 1, 3, 4]
    if again.included():
        hvd.barrier(process_set=again)

    start("dynamic")  # hvd.init(process_sets="dynamic"): no sets yet, add them later
    assert again.process_set_id is None and obj.process_set_id is None
    late = hvd.add_process_set([0, 1, 2])
    assert late.process_set_id == 1 and late.size() == 3
    if late.included():
        assert hvd.allgather(torch.tensor([me]), process_set=late).tolist() == [0, 1, 2]
    assert hvd.remove_process_set(late) is True


def test_init_with_duplicate_entries_raises_after_init(registered):
    a, b = hvd.ProcessSet([0, 1]), hvd.ProcessSet([1, 0])
    with pytest.raises(ValueError, match="process_sets entry number 1 is a duplicate: "
                                         "ProcessSet\\(process_set_id=None, ranks=\\[0, 1\\]"):
        start([a, b])
    assert hvd.is_initialized() and a.process_set_id == 1 and b.process_set_id is None
    every = hvd.ProcessSet([0, 1, 2, 3])  # equal to the global set
    with pytest.raises(ValueError, match="entry number 0 is a duplicate"):
        start([every])
    assert every.process_set_id is None and a.process_set_id is None  # a: of the earlier init


def test_process_sets_from_the_environment_and_reinit(registered):
    start(None, HVD_PROCESS_SETS="0,1;2,3")
    first, second = hvd.process_set_by_id(1), hvd.process_set_by_id(2)
    assert first.ranks == [0, 1] and second.ranks == [2, 3]
    assert all(s.process_set_id is None for s in registered.all)  # the earlier init's
    ps = first if first.included() else second
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=ps).item() == 2.0
    with pytest.raises(ValueError, match="is not registered"):
        hvd.allreduce(torch.ones(1), process_set=registered.s01)
    # init() while initialised is a no-op; sets it already has resolve to their ids
    same = hvd.ProcessSet([2, 3])
    hvd.init(process_sets=[same])
    assert same.process_set_id == 2
    with pytest.raises(ValueError, match="initialized already"):
        hvd.init(process_sets=[hvd.ProcessSet([1, 2])])


# --- SyncBatchNorm within sets -----------------------------------------------------------------

def test_sync_batch_norm_layers_of_several_sets_at_once_normalise_over_their_members(
        registered):
    """On each rank, one thread per set it is in (two of the four, and the global set) trains a
    SyncBatchNorm of that set, all at once; each matches torch's BatchNorm over the batches of
    its members alone (uneven: job rank r holds r + 2 rows)."""
    results = {}

    def train(ps):
        rows = [m + 2 for m in ps.ranks]
        start_row = sum(rows[:ps.rank()])
        here = slice(start_row, start_row + rows[ps.rank()])
        g = torch.Generator().manual_seed(30 + ps.process_set_id)
        ref = torch.nn.BatchNorm1d(3).double()
        sync = hvd.SyncBatchNorm(3, process_set=ps).double()
        for step in range(2):
            x = torch.randn(sum(rows), 3, 4, generator=g, dtype=torch.float64) * 2 + 5
            w = torch.randn(sum(rows), 3, 4, generator=g, dtype=torch.float64)
            x_ref = x.clone().requires_grad_()
            y_ref = ref(x_ref)
            (y_ref * w).sum().backward()
            x_mine = x[here].clone().requires_grad_()
            y = sync(x_mine)
            (y * w[here]).sum().backward()
        grads = hvd.grouped_allreduce([sync.weight.grad, sync.bias.grad], op=hvd.Sum,
                                      process_set=ps)
        results[ps.process_set_id] = [
            (y, y_ref[here].detach()), (x_mine.grad, x_ref.grad[here]),
            (grads[0], ref.weight.grad), (grads[1], ref.bias.grad),
            (sync.running_mean, ref.running_mean), (sync.running_var, ref.running_var)]

    sets = mine(registered)
    run_threads([lambda ps=ps: train(ps) for ps in sets])
    assert sorted(results) == sorted(s.process_set_id for s in sets) and len(sets) == 3
    for set_id, pairs in results.items():
        for got, want in pairs:
            torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10, msg=str(set_id))
