"""DistributedOptimizer trains as one process on the global batch would, and the whole-model
helpers (broadcast_parameters, broadcast_optimizer_state, broadcast_object,
allgather_object)."""

import copy
import warnings

import pytest
import torch

import hvd.torch as hvd
import hvd.torch.optimizer as hvd_optimizer

GLOBAL_BATCH = 12  # divisible by 2 and 3: every rank's shard has the same size


def model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def data():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(GLOBAL_BATCH, 4, generator=g)
    y = torch.randn(GLOBAL_BATCH, 2, generator=g)
    return x, y


def shard(t):
    n = GLOBAL_BATCH // hvd.size()
    return t[hvd.rank() * n:(hvd.rank() + 1) * n]


def reference(make_optimizer, steps):
    """One process, the full batch, no hvd."""
    net = model()
    opt = make_optimizer(net.parameters())
    x, y = data()
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    return net


def distributed(make_optimizer, steps, passes=1, **kwargs):
    net = model()
    opt = hvd.DistributedOptimizer(make_optimizer(net.parameters()),
                                   named_parameters=net.named_parameters(),
                                   backward_passes_per_step=passes, **kwargs)
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    x, y = data()
    xs, ys = shard(x), shard(y)
    for _ in range(steps):
        opt.zero_grad()
        for xp, yp in zip(xs.chunk(passes), ys.chunk(passes)):
            # Gradients of the passes add up locally: each pass weighs its part of the shard.
            (torch.nn.functional.mse_loss(net(xp), yp) / passes).backward()
        opt.step()
    return net, opt


def assert_same_parameters(a, b, rtol=1e-5, atol=1e-6):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=rtol, atol=atol, msg=name)


SGD = lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9)  # noqa: E731
ADAM = lambda params: torch.optim.Adam(params, lr=0.01)  # noqa: E731


@pytest.mark.parametrize("make", [SGD, ADAM], ids=["sgd-momentum", "adam"])
def test_training_reaches_the_parameters_of_one_process_on_the_full_batch(make):
    net, opt = distributed(make, steps=6)
    assert isinstance(opt, type(make([torch.nn.Parameter(torch.ones(1))])))
    assert_same_parameters(net, reference(make, steps=6))


def test_two_backward_passes_per_step_equal_a_doubled_batch():
    net, _ = distributed(SGD, steps=4, passes=2)
    assert_same_parameters(net, reference(SGD, steps=4))
    with pytest.raises(ValueError, match="backward_passes_per_step must be > 0"):
        hvd.DistributedOptimizer(SGD(model().parameters()), backward_passes_per_step=0)


def spy(monkeypatch, name):
    """Records the calls DistributedOptimizer makes to mpi_ops' `name` (and still makes them):
    the average is the same whether or not a factor or a grouping is applied, so the results
    alone cannot tell that the option was honoured."""
    calls = []
    real = getattr(hvd_optimizer, name)

    def record(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(hvd_optimizer, name, record)
    return calls


def test_gradient_predivide_factor_divides_before_the_sum_and_multiplies_after(monkeypatch):
    factor = 2.0 * hvd.size()
    single = spy(monkeypatch, "allreduce_async_")
    grouped = spy(monkeypatch, "grouped_allreduce_async_")
    net, _ = distributed(SGD, steps=3, gradient_predivide_factor=factor)
    assert_same_parameters(net, reference(SGD, steps=3))
    assert len(single) == 3 * 4 and not grouped  # every parameter, every step
    for _, kwargs in single:
        assert kwargs["prescale_factor"] == pytest.approx(1.0 / factor)
        assert kwargs["postscale_factor"] == pytest.approx(factor)
    # The same factors on grouped reductions.
    single.clear()
    net, _ = distributed(SGD, steps=2, groups=2, gradient_predivide_factor=factor)
    assert_same_parameters(net, reference(SGD, steps=2))
    assert len(grouped) == 2 * 2 and not single
    for _, kwargs in grouped:
        assert kwargs["prescale_factor"] == pytest.approx(1.0 / factor)
        assert kwargs["postscale_factor"] == pytest.approx(factor)


def test_groups_reduce_their_members_together_with_the_same_result(monkeypatch):
    single = spy(monkeypatch, "allreduce_async_")
    grouped = spy(monkeypatch, "grouped_allreduce_async_")
    net, opt = distributed(SGD, steps=3, groups=2)
    assert_same_parameters(net, reference(SGD, steps=3))
    assert not single
    # Four parameters in two groups of two, each group one grouped op per step.
    assert len(grouped) == 3 * 2
    params = list(net.parameters())
    for step in range(3):
        members = [args[0] for args, _ in grouped[2 * step:2 * step + 2]]
        assert sorted(len(m) for m in members) == [2, 2]
        reduced = {id(t) for m in members for t in m}
        assert reduced == {id(p.grad) for p in params}


def test_fp16_compression_sends_half_the_bytes_within_fp16_rounding():
    def bytes_of_a_run(compression):
        before = hvd.engine_stats()["bytes"]
        net, _ = distributed(SGD, steps=3, compression=compression)
        return hvd.engine_stats()["bytes"] - before, net

    plain, _ = bytes_of_a_run(hvd.Compression.none)
    squeezed, net = bytes_of_a_run(hvd.Compression.fp16)
    # The broadcast of the parameters (float32 either way) is common to both runs.
    params = sum(p.numel() for p in model().parameters())
    common = params * 4  # broadcast_parameters: every parameter once, as float32
    assert plain - common == 3 * params * 4
    assert squeezed - common == 3 * params * 2
    assert_same_parameters(net, reference(SGD, steps=3), rtol=1e-2, atol=1e-3)


def test_a_parameter_unused_on_one_rank_does_not_stall():
    torch.manual_seed(3)
    trunk = torch.nn.Linear(3, 3)
    extra = torch.nn.Linear(3, 1)
    net = torch.nn.ModuleDict({"trunk": trunk, "extra": extra})
    opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=1.0),
                                   named_parameters=net.named_parameters())
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    before = extra.weight.detach().clone()
    x = torch.ones(2, 3)
    out = trunk(x).sum()
    if hvd.rank() == 0:
        out = out + extra(trunk(x)).sum()  # only rank 0 reaches `extra`
    opt.zero_grad()
    out.backward()
    opt.step()  # every rank reduces every gradient, zeros where it has none
    assert extra.weight.grad is not None
    moved = (before - extra.weight.detach()).abs().sum().item()
    assert moved > 0  # rank 0's gradient, averaged with zeros, reached every rank
    weights = hvd.allgather(extra.weight.detach())
    assert all(torch.equal(weights[0], w) for w in weights)


def test_optimizer_checks():
    net = model()
    with pytest.raises(ValueError, match="must be unique"):
        hvd.DistributedOptimizer(SGD(net.parameters()),
                                 named_parameters=[("a", p) for p in net.parameters()])
    with pytest.raises(ValueError, match="were not named"):
        hvd.DistributedOptimizer(SGD(net.parameters()),
                                 named_parameters=list(net.named_parameters())[:1])
    with pytest.raises(ValueError, match="sequence of tuples"):
        hvd.DistributedOptimizer(SGD(net.parameters()), named_parameters=list(net.parameters()))
    with pytest.raises(ValueError, match="groups should be"):
        hvd.DistributedOptimizer(SGD(net.parameters()), groups=-1)
    opt = hvd.DistributedOptimizer(SGD(net.parameters()),
                                   named_parameters=net.named_parameters())
    x, y = data()
    torch.nn.functional.mse_loss(net(shard(x)), shard(y)).backward()
    with pytest.raises(AssertionError, match="zero_grad\\(\\) was called after loss.backward"):
        opt.zero_grad()
    opt.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with opt.skip_synchronize():
            opt.step()  # no second reduction, no warning
    opt.zero_grad()
    torch.nn.functional.mse_loss(net(shard(x)), shard(y)).backward()
    opt.synchronize()
    with pytest.warns(UserWarning, match="skip_synchronize"):
        opt.step()


def test_broadcast_parameters_and_optimizer_state():
    torch.manual_seed(10 + hvd.rank())  # every rank starts elsewhere
    net = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(net.parameters(), lr=0.001 * (hvd.rank() + 1))
    x = torch.randn(4, 3)
    net(x).sum().backward()
    opt.step()
    root = hvd.size() - 1
    hvd.broadcast_parameters(net.state_dict(), root_rank=root)
    hvd.broadcast_optimizer_state(opt, root_rank=root)
    state = copy.deepcopy(opt.state_dict())
    everyone = hvd.allgather_object({"params": [p.detach() for p in net.parameters()],
                                     "state": state})
    theirs = everyone[root]
    for a, b in zip(everyone[hvd.rank()]["params"], theirs["params"]):
        assert torch.equal(a, b)
    assert state["param_groups"][0]["lr"] == pytest.approx(0.001 * (root + 1))
    for pid, entry in state["state"].items():
        for key, value in entry.items():
            other = theirs["state"]["state"][pid][key]
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(other)), key
    with pytest.raises(ValueError, match="invalid params"):
        hvd.broadcast_parameters(net.parameters(), root_rank=0)


def test_broadcast_optimizer_state_of_a_new_optimizer():
    net = torch.nn.Linear(2, 2)
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    opt = torch.optim.SGD(net.parameters(), lr=0.1 * (hvd.rank() + 1), momentum=0.5)
    before = [p.detach().clone() for p in net.parameters()]
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)
    for a, b in zip(before, net.parameters()):
        assert torch.equal(a, b.detach())  # creating the state did not move the model


def test_broadcast_object_and_allgather_object():
    obj = {"rank": hvd.rank(), "blob": list(range(hvd.rank() * 100))}
    got = hvd.broadcast_object(obj, root_rank=1)
    assert got == {"rank": 1, "blob": list(range(100))}
    if hvd.rank() == 1:
        assert got is obj  # the root keeps its own object, as in Horovod
    everyone = hvd.allgather_object(("r", hvd.rank()))
    assert everyone == [("r", r) for r in range(hvd.size())]
