"""broadcast_optimizer_state: every rank ends with the root's optimizer, as it was before the
call: each param group's options and each parameter's state entries, with their types, and
the state tensors bit for bit. Every test gives each rank a state of its own first (other
seeds, options, step counts), so that a broadcast that did nothing would fail it."""

import copy

import pytest
import torch
import torch.nn.functional as F

import hvd.torch as hvd


def model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))


def batch(seed, rows=6):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, 4, generator=g), torch.randn(rows, 2, generator=g)


def local_steps(net, opt, steps, seed):
    x, y = batch(seed)
    for _ in range(steps):
        opt.zero_grad()
        F.mse_loss(net(x), y).backward()
        opt.step()


def bits(t):
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)


def assert_same_value(got, want, what):
    assert type(got) is type(want), "%s: %s instead of %s" % (what, type(got), type(want))
    if torch.is_tensor(want):
        assert (got.dtype, got.shape, got.layout) == (want.dtype, want.shape, want.layout), what
        if want.is_sparse:
            got, want = got.coalesce(), want.coalesce()
            assert torch.equal(got.indices(), want.indices()), what
            got, want = got.values(), want.values()
        assert torch.equal(bits(got), bits(want)), what
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want), what
        for i, (a, b) in enumerate(zip(got, want)):
            assert_same_value(a, b, "%s[%d]" % (what, i))
    else:
        assert got == want, "%s: %r instead of %r" % (what, got, want)


def assert_same_state(got, want):
    """Two optimizer.state_dict()s: the same keys everywhere, values of the same types and
    equal (tensors bit for bit)."""
    assert len(got["param_groups"]) == len(want["param_groups"])
    for i, (a, b) in enumerate(zip(got["param_groups"], want["param_groups"])):
        assert sorted(a) == sorted(b), "group %d" % i
        for key in b:
            assert_same_value(a[key], b[key], "group %d: %s" % (i, key))
    assert sorted(got["state"]) == sorted(want["state"])
    for pid, entries in want["state"].items():
        assert sorted(got["state"][pid]) == sorted(entries), "parameter %d" % pid
        for key, value in entries.items():
            assert_same_value(got["state"][pid][key], value, "parameter %d: %s" % (pid, key))


def state_tensors(state):
    return [(pid, key, v) for pid, entries in sorted(state["state"].items())
            for key, v in sorted(entries.items()) if torch.is_tensor(v)]


def roots(obj, name):
    """Rank 0's `obj` (a deep copy taken now), on every rank."""
    return hvd.broadcast_object(copy.deepcopy(obj), root_rank=0, name=name)


def assert_all_ranks_equal(tensors):
    for t in tensors:
        everyone = hvd.allgather(t.detach().unsqueeze(0))
        for other in everyone:
            assert torch.equal(bits(other), bits(t.detach()))


def assert_differs_from_root(mine, expected):
    """A test whose ranks start from the root's state would prove nothing: before the
    broadcast, a rank other than 0 has another learning rate and other state tensors. Checked
    at a test's end: an assertion that fails between collectives leaves the ranks out of step."""
    if hvd.rank() == 0:
        return
    assert mine["param_groups"][0]["lr"] != expected["param_groups"][0]["lr"]
    theirs = {(pid, key): v for pid, key, v in state_tensors(expected)}
    ours = {(pid, key): v for pid, key, v in state_tensors(mine)}
    if theirs:
        assert ours.keys() != theirs.keys() or any(
            not torch.equal(bits(ours[k]), bits(theirs[k])) for k in theirs)


OPTIMIZERS = {
    "sgd": lambda ps, r: torch.optim.SGD(ps, lr=0.01 * (r + 1)),
    "sgd-momentum": lambda ps, r: torch.optim.SGD(ps, lr=0.01 * (r + 1), momentum=0.9,
                                                  weight_decay=0.001 * r),
    "sgd-nesterov": lambda ps, r: torch.optim.SGD(ps, lr=0.02 * (r + 1), momentum=0.5 + 0.1 * r,
                                                  nesterov=True),
    "adam": lambda ps, r: torch.optim.Adam(ps, lr=0.001 * (r + 1),
                                           betas=(0.9, 0.99 + 0.001 * r)),
    "adam-amsgrad": lambda ps, r: torch.optim.Adam(ps, lr=0.001 * (r + 1), amsgrad=True,
                                                   weight_decay=0.01 * r),
    "adamw": lambda ps, r: torch.optim.AdamW(ps, lr=0.001 * (r + 1), weight_decay=0.01 * (r + 1)),
    "rmsprop": lambda ps, r: torch.optim.RMSprop(ps, lr=0.001 * (r + 1), alpha=0.9 + 0.01 * r,
                                                 centered=True, momentum=0.5),
    "adagrad": lambda ps, r: torch.optim.Adagrad(ps, lr=0.1 * (r + 1), lr_decay=0.01,
                                                 initial_accumulator_value=0.1 * r),
    "adadelta": lambda ps, r: torch.optim.Adadelta(ps, lr=1.0 - 0.1 * r, rho=0.9),
}


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_the_root_state_arrives_with_its_types_and_bits(kind):
    r = hvd.rank()
    net = model(100 + r)
    opt = OPTIMIZERS[kind](net.parameters(), r)
    local_steps(net, opt, steps=r + 1, seed=200 + r)
    mine = copy.deepcopy(opt.state_dict())
    expected = roots(mine, "expected." + kind)

    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert_same_state(opt.state_dict(), expected)

    # The state is the optimizer's own again: with the root's model, one step on the same batch
    # moves every rank's model to the same place.
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    local_steps(net, opt, steps=1, seed=300)
    assert_all_ranks_equal(list(net.parameters()))
    after = [s for _, _, s in state_tensors(opt.state_dict())]
    assert_all_ranks_equal(after)
    assert_differs_from_root(mine, expected)


def test_every_option_and_state_entry_type_travels():
    r = hvd.rank()
    body, head = model(110 + r), torch.nn.Linear(2, 1)
    groups = [
        # Extra keys in a param group are the user's; the root's types win (int vs float,
        # None vs str, tuple vs list).
        {"params": body.parameters(), "name": "body-%d" % r, "layer": r if r == 0 else float(r),
         "note": None if r == 0 else "n%d" % r, "scale": (1, 2.5, "x") if r == 0 else [r]},
        {"params": head.parameters(), "lr": 0.005 * (r + 1), "betas": (0.8, 0.95 - 0.01 * r),
         "maximize": r == 1, "weight_decay": 0 if r == 0 else 0.5},
    ]
    opt = torch.optim.Adam(groups, lr=0.001 * (r + 1), foreach=None if r == 0 else False)
    if r != 0:
        opt.param_groups[0]["only_here"] = True  # not on the root: gone afterwards
    x, y = batch(210 + r)
    for _ in range(r + 1):
        opt.zero_grad()
        F.mse_loss(head(torch.tanh(body(x))), y[:, :1]).backward()
        opt.step()
    for i, p in enumerate(p for g in opt.param_groups for p in g["params"]):
        entries = opt.state[p]
        entries["count"] = 7 if r == 0 else 7.0
        entries["flag"] = r == 0
        entries["tag"] = None if r == 0 else "rank%d" % r
        entries["pair"] = (i, "x") if r == 0 else [r]
        entries["ratio"] = 0.25 * (r + 1)
        entries["mask"] = torch.tensor([True, r == 1, i % 2 == 0])  # bool: not a broadcast dtype
        entries["counter"] = torch.tensor([i, r], dtype=torch.int64)
        entries["half"] = torch.full((2,), 0.1 * (r + i), dtype=torch.float16)
        if r != 0:
            entries["stale"] = torch.ones(1)  # not on the root: gone afterwards
    mine = copy.deepcopy(opt.state_dict())
    expected = roots(mine, "expected.types")

    hvd.broadcast_optimizer_state(opt, root_rank=0)
    got = opt.state_dict()
    assert_same_state(got, expected)
    assert type(got["param_groups"][0]["layer"]) is int
    assert got["param_groups"][0]["scale"] == (1, 2.5, "x")
    assert got["param_groups"][1]["betas"] == (0.8, 0.95)
    assert got["param_groups"][1]["maximize"] is False
    assert got["param_groups"][0]["foreach"] is None
    assert "only_here" not in got["param_groups"][0]
    for entries in got["state"].values():
        assert entries["tag"] is None and entries["flag"] is True and "stale" not in entries
    assert_differs_from_root(mine, expected)


def test_the_root_state_replaces_entries_this_rank_has_otherwise():
    """The root's entries win where this rank has none, other ones or more: rank 0 has
    momentum buffers for its first layer only, rank 1 none (momentum 0), rank 2 for all."""
    r = hvd.rank()
    net = model(120 + r)
    opt = torch.optim.SGD(net.parameters(), lr=0.1 * (r + 1), momentum=0.0 if r == 1 else 0.9)
    x, y = batch(220 + r)
    for _ in range(2 if r == 0 else 1):
        opt.zero_grad()
        F.mse_loss(net(x), y).backward()
        if r == 0:
            net[2].weight.grad = None
            net[2].bias.grad = None
        opt.step()
    mine = copy.deepcopy(opt.state_dict())
    expected = roots(mine, "expected.shapes")
    assert sorted(expected["state"]) == [0, 1]

    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert_same_state(opt.state_dict(), expected)
    assert opt.param_groups[0]["momentum"] == 0.9
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    local_steps(net, opt, steps=2, seed=320)
    assert_all_ranks_equal(list(net.parameters()))
    assert_differs_from_root(mine, expected)


class Plain(torch.optim.Optimizer):
    """Stateless in every torch version (torch 1.13's SGD stores momentum_buffer=None)."""

    def __init__(self, params, lr, label):
        super().__init__(params, {"lr": lr, "label": label})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])


def test_a_stateless_optimizer_still_gets_the_root_options():
    r = hvd.rank()
    net = model(130 + r)
    opt = Plain(net.parameters(), lr=0.1 * (r + 1), label=None if r == 0 else r)
    before = [p.detach().clone() for p in net.parameters()]
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.state_dict()["state"] == {}
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["label"] is None
    for b, p in zip(before, net.parameters()):
        assert torch.equal(bits(b), bits(p))
        assert torch.equal(p.grad, torch.zeros_like(p))


FRESH = {
    "sgd": lambda ps, r: torch.optim.SGD(ps, lr=0.01 * (r + 1)),
    "sgd-momentum-decay": lambda ps, r: torch.optim.SGD(ps, lr=0.1, momentum=0.9,
                                                        weight_decay=0.1 * (r + 1)),
    "adam-decay": lambda ps, r: torch.optim.Adam(ps, lr=0.01 * (r + 1), weight_decay=0.2),
    "adamw": lambda ps, r: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.5 * (r + 1)),
    "rmsprop-decay": lambda ps, r: torch.optim.RMSprop(ps, lr=0.01, weight_decay=0.1 * (r + 1),
                                                       momentum=0.3),
}


@pytest.mark.parametrize("kind", sorted(FRESH))
@pytest.mark.parametrize("had_grads", [False, True], ids=["no-grads", "grads"])
def test_a_fresh_optimizer_leaves_zero_gradients_and_an_unmoved_model(kind, had_grads):
    r = hvd.rank()
    net = model(140 + r)  # each rank's model elsewhere: weight decay makes the state differ
    frozen = net[0].bias
    frozen.requires_grad_(False)
    opt = FRESH[kind](net.parameters(), r)
    if had_grads:
        x, y = batch(240 + r)
        F.mse_loss(net(x), y).backward()
        assert all(p.grad is not None for p in net.parameters() if p.requires_grad)
    before = [p.detach().clone() for p in net.parameters()]

    hvd.broadcast_optimizer_state(opt, root_rank=0)
    for b, p in zip(before, net.parameters()):
        assert torch.equal(bits(b), bits(p))  # the state-creating step did not move the model
        if p.requires_grad:
            assert p.grad is not None and p.grad.shape == p.shape and not p.grad.is_sparse
            assert torch.equal(p.grad, torch.zeros_like(p))
        else:
            assert p.grad is None
    state = copy.deepcopy(opt.state_dict())
    assert 1 not in state["state"]  # the frozen bias: no state
    assert_same_state(state, roots(state, "expected.fresh"))
    assert opt.param_groups[0]["lr"] == FRESH[kind](net.parameters(), 0).param_groups[0]["lr"]


def test_a_fresh_root_overrides_ranks_that_trained():
    r = hvd.rank()
    net = model(150 + r)
    opt = torch.optim.Adam(net.parameters(), lr=0.001 * (r + 1), weight_decay=0.1)
    if r != 0:
        local_steps(net, opt, steps=r + 2, seed=250 + r)
    grads = [None if p.grad is None else p.grad.clone() for p in net.parameters()]

    hvd.broadcast_optimizer_state(opt, root_rank=0)
    state = copy.deepcopy(opt.state_dict())
    assert_same_state(state, roots(state, "expected.fresh-root"))
    for entries in state["state"].values():
        assert float(entries["step"]) == 1
    for g, p in zip(grads, net.parameters()):
        if r == 0:
            assert torch.equal(p.grad, torch.zeros_like(p))
        else:
            assert torch.equal(bits(g), bits(p.grad))  # a rank with state takes no local step


@pytest.mark.parametrize("fresh", [False, True], ids=["trained", "fresh"])
def test_sparse_adam(fresh):
    r = hvd.rank()
    torch.manual_seed(160 + r)
    emb = torch.nn.Embedding(10, 3, sparse=True)
    opt = torch.optim.SparseAdam(list(emb.parameters()), lr=0.01 * (r + 1),
                                 betas=(0.9, 0.99 + 0.001 * r))
    rows = torch.tensor([r, r + 1, 5])
    if not fresh:
        for _ in range(r + 1):
            opt.zero_grad()
            emb(rows).pow(2).sum().backward()
            opt.step()
    mine = copy.deepcopy(opt.state_dict())
    expected = roots(mine, "expected.sparse")
    before = emb.weight.detach().clone()

    hvd.broadcast_optimizer_state(opt, root_rank=0)
    if fresh:
        assert torch.equal(bits(before), bits(emb.weight))
        assert emb.weight.grad.is_sparse
        assert torch.equal(emb.weight.grad.to_dense(), torch.zeros_like(emb.weight))
        expected = roots(copy.deepcopy(opt.state_dict()), "expected.sparse-fresh")
    assert_same_state(opt.state_dict(), expected)
    hvd.broadcast_parameters(emb.state_dict(), root_rank=0)
    opt.zero_grad()
    emb(torch.tensor([0, 2, 2])).sum().backward()
    opt.step()
    assert_all_ranks_equal([emb.weight])
    if not fresh:
        assert_differs_from_root(mine, expected)


def test_lbfgs_is_refused_with_horovods_message():
    net = model(170)
    opt = torch.optim.LBFGS(net.parameters(), lr=0.1 * (hvd.rank() + 1))
    with pytest.raises(ValueError) as info:
        hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert str(info.value) == "cannot broadcast torch.optim.LBFGS state"
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * (hvd.rank() + 1))
    # Nothing was left half-submitted: the job's next collectives still meet.
    assert hvd.broadcast_object(hvd.rank(), root_rank=0, name="after.lbfgs") == 0


def test_a_distributed_optimizer_with_state():
    r = hvd.rank()
    net = model(180 + r)
    base = torch.optim.Adam(net.parameters(), lr=0.001 * (r + 1), amsgrad=r == 0)
    local_steps(net, base, steps=r + 1, seed=280 + r)  # before wrapping: local steps
    opt = hvd.DistributedOptimizer(base, named_parameters=net.named_parameters())
    mine = copy.deepcopy(opt.state_dict())
    expected = roots(mine, "expected.distributed")

    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert_same_state(opt.state_dict(), expected)
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    x, y = batch(380 + r)  # every rank its own batch: the step averages the gradients
    opt.zero_grad()
    F.mse_loss(net(x), y).backward()
    opt.step()
    assert_all_ranks_equal(list(net.parameters()))
    assert_differs_from_root(mine, expected)


def test_a_fresh_distributed_optimizer_creates_its_state_without_reducing():
    r = hvd.rank()
    net = model(190 + r)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(net.parameters(), lr=0.1 * (r + 1), momentum=0.9, weight_decay=0.1),
        named_parameters=net.named_parameters())
    reductions = []
    synchronize = opt.synchronize
    opt.synchronize = lambda: reductions.append(1) or synchronize()
    before = [p.detach().clone() for p in net.parameters()]

    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert reductions == []  # the state-creating step was the wrapped class's own
    for b, p in zip(before, net.parameters()):
        assert torch.equal(bits(b), bits(p))
        assert torch.equal(p.grad, torch.zeros_like(p))
    state = copy.deepcopy(opt.state_dict())
    assert_same_state(state, roots(state, "expected.distributed-fresh"))
    assert len(state["state"]) == 4

    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    x, y = batch(390 + r)
    opt.zero_grad()
    F.mse_loss(net(x), y).backward()
    opt.step()
    assert reductions == [1]
    assert_all_ranks_equal(list(net.parameters()))


def test_the_synthetic_benchmark_pattern():
    """Horovod's examples/pytorch/pytorch_synthetic_benchmark.py: plain SGD with the learning
    rate scaled by size(), wrapped, then the model and the optimizer state broadcast from rank
    0 (torch 1.13's SGD keeps momentum_buffer=None), then training on each rank's own batch.
    It trains as one process on the ranks' batches together would."""
    r, size = hvd.rank(), hvd.size()

    def convnet(seed):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(),
                                   torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                   torch.nn.Linear(4, 10))

    def fake_batch(rank):
        g = torch.Generator().manual_seed(400 + rank)
        return torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 10, (4,), generator=g)

    net = convnet(190 + r)  # no common seed: rank 0's model must reach the others
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01 * size)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=net.named_parameters(),
                                         compression=hvd.Compression.none, op=hvd.Average)
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    assert type(optimizer.param_groups[0]["lr"]) is float

    reference = copy.deepcopy(net)
    start = [p.detach().clone() for p in net.parameters()]
    data, target = fake_batch(r)
    for _ in range(3):
        optimizer.zero_grad()
        F.cross_entropy(net(data), target).backward()
        optimizer.step()
    assert_all_ranks_equal(list(net.parameters()))
    assert any(not torch.equal(a, b.detach()) for a, b in zip(start, net.parameters()))

    # One process, every rank's batch at once, the learning rate the ranks' average implies.
    batches = [fake_batch(k) for k in range(size)]
    whole_x = torch.cat([b[0] for b in batches])
    whole_y = torch.cat([b[1] for b in batches])
    single = torch.optim.SGD(reference.parameters(), lr=0.01 * size)
    for _ in range(3):
        single.zero_grad()
        F.cross_entropy(reference(whole_x), whole_y).backward()
        single.step()
    for a, b in zip(reference.parameters(), net.parameters()):
        torch.testing.assert_close(a.detach(), b.detach(), rtol=1e-5, atol=1e-6)
