"""SyncBatchNorm against torch's BatchNorm over the whole batch in one process: every rank builds
the whole batch from a seed, normalises its own rows (uneven counts, a rank with none), and
compares its rows of the output and of the input gradient, the running statistics and the
batch counter with the reference's; the weight and bias gradients are each rank's share, so
their sum over the ranks is compared. Also: eval mode (no collective), the converter, a process
set, the size-1 path, DistributedOptimizer training, and the refusals."""

import copy

import pytest
import torch

import hvd.torch as hvd

REFERENCE = {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d,
             5: torch.nn.BatchNorm3d}
SPATIAL = {2: (), 3: (5,), 4: (3, 4), 5: (2, 3, 2)}
CHANNELS = 3


def tolerance(dtype):
    # float32: about ten times the differences seen between two correct implementations.
    return dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)


def uneven_rows(size, empty=None):
    """Rows per rank: 2, 3, 4, ... (the rank `empty`, if any, gets none)."""
    return [0 if r == empty else 2 + r for r in range(size)]


def mine(rows, index=None):
    """This rank's rows: it is member `index` (by default its job rank) of those of `rows`."""
    index = hvd.rank() if index is None else index
    start = sum(rows[:index])
    return slice(start, start + rows[index])


def whole_batch(seed, rows, ndim, dtype, offset=50.0):
    """(input, output weights for the loss) of the whole batch. The input's mean is far from 0,
    so that a variance taken as E[x^2] - E[x]^2 would lose digits."""
    g = torch.Generator().manual_seed(seed)
    shape = (sum(rows), CHANNELS) + SPATIAL[ndim]
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 3 + offset
    w = torch.randn(shape, generator=g, dtype=torch.float64)
    return x.to(dtype), w.to(dtype)


def pair(ndim, dtype, **options):
    """(hvd SyncBatchNorm, torch BatchNorm) with the same random affine parameters."""
    ref = REFERENCE[ndim](CHANNELS, **options).to(dtype)
    if ref.affine:
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            ref.weight.copy_(1 + 0.5 * torch.randn(CHANNELS, generator=g, dtype=torch.float64))
            ref.bias.copy_(torch.randn(CHANNELS, generator=g, dtype=torch.float64))
    sync = hvd.SyncBatchNorm(CHANNELS, **options).to(dtype)
    sync.load_state_dict(ref.state_dict())
    return sync, ref


def summed(t, process_set=hvd.global_process_set):
    return hvd.allreduce(t.detach(), op=hvd.Sum, process_set=process_set)


def check_step(sync, ref, rows, seed, ndim, dtype):
    """One training step of both on a new batch (rows: the members' of sync's process set, in
    set order); asserts this rank's share of the results. Every collective runs before the
    first assertion, so that a failure on some ranks leaves the job's ops aligned."""
    tol = tolerance(dtype)
    x, w = whole_batch(seed, rows, ndim, dtype)
    x_ref = x.clone().requires_grad_()
    y_ref = ref(x_ref)
    (y_ref * w).sum().backward()
    here = mine(rows, sync.process_set.rank())
    x_mine = x[here].clone().requires_grad_()
    y = sync(x_mine)
    (y * w[here]).sum().backward()
    params = [(summed(p.grad, sync.process_set), q.grad)
              for p, q in ((sync.weight, ref.weight), (sync.bias, ref.bias)) if q is not None]
    assert y.dtype == dtype and y.shape == x_mine.shape
    torch.testing.assert_close(y, y_ref[here].detach(), **tol)
    torch.testing.assert_close(x_mine.grad, x_ref.grad[here], **tol)
    for got, want in params:
        torch.testing.assert_close(got, want, **tol)
    sync.zero_grad()
    ref.zero_grad()


def check_state(sync, ref, dtype):
    tol = tolerance(dtype)
    if ref.track_running_stats:
        torch.testing.assert_close(sync.running_mean, ref.running_mean, **tol)
        torch.testing.assert_close(sync.running_var, ref.running_var, **tol)
        assert sync.num_batches_tracked.item() == ref.num_batches_tracked.item()
    else:
        assert sync.running_mean is None and sync.running_var is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("ndim", [2, 3, 4, 5])
@pytest.mark.parametrize("options", [{}, {"momentum": None}, {"affine": False},
                                     {"track_running_stats": False}],
                         ids=["default", "cumulative", "no_affine", "untracked"])
def test_three_steps_match_batchnorm_over_the_whole_batch(dtype, ndim, options):
    sync, ref = pair(ndim, dtype, **options)
    rows = uneven_rows(hvd.size())
    for step in range(3):
        check_step(sync, ref, rows, 100 * ndim + step, ndim, dtype)
    check_state(sync, ref, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_a_rank_with_no_rows_counts_for_nothing(dtype):
    sync, ref = pair(4, dtype)
    rows = uneven_rows(hvd.size(), empty=hvd.size() - 1)
    for step in range(2):
        check_step(sync, ref, rows, 300 + step, 4, dtype)
    check_state(sync, ref, dtype)


@pytest.mark.parametrize("ndim", [2, 4])
def test_float32_statistics_far_from_zero_keep_their_digits(ndim):
    """Mean 1e4, deviation 3: a float32 variance taken as E[x^2] - E[x]^2 (1e8 - 1e8, in steps
    of 8) would be wrong in its first digit. Against a float64 BatchNorm on the same (float32)
    numbers, what may remain is the rounding of a float32 mean near 1e4 (ulp 1e-3) in the
    normalised values; the running statistics keep float32's precision."""
    sync, _ = pair(ndim, torch.float32)
    _, exact = pair(ndim, torch.float64)
    rows = uneven_rows(hvd.size())
    here = mine(rows)
    for step in range(2):
        x, w = whole_batch(900 + step, rows, ndim, torch.float32, offset=1e4)
        x_exact = x.double().requires_grad_()
        y_exact = exact(x_exact)
        (y_exact * w.double()).sum().backward()
        x_mine = x[here].clone().requires_grad_()
        y = sync(x_mine)
        (y * w[here]).sum().backward()
        grads = [summed(sync.weight.grad), summed(sync.bias.grad)]
        for got, want in ((y, y_exact[here]), (x_mine.grad, x_exact.grad[here]),
                          (grads[0], exact.weight.grad), (grads[1], exact.bias.grad)):
            bound = 1e-3 * want.abs().max().item()
            torch.testing.assert_close(got.double(), want.detach(), rtol=0, atol=bound)
        sync.zero_grad()
        exact.zero_grad()
    torch.testing.assert_close(sync.running_mean.double(), exact.running_mean, rtol=1e-6, atol=0)
    torch.testing.assert_close(sync.running_var.double(), exact.running_var, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_inputs_are_normalised_in_float32_and_given_back_in_their_type(dtype):
    """Half inputs with float32 parameters, as under autocast: against a float32 BatchNorm on
    the same numbers, within the rounding of the half results."""
    sync, ref = pair(4, torch.float32)
    rows = uneven_rows(hvd.size())
    here = mine(rows)
    x, w = whole_batch(950, rows, 4, dtype)
    x_ref = x.float().requires_grad_()
    y_ref = ref(x_ref)
    (y_ref * w.float()).sum().backward()
    x_mine = x[here].clone().requires_grad_()
    y = sync(x_mine)
    (y * w[here]).sum().backward()
    grads = [summed(sync.weight.grad), summed(sync.bias.grad)]
    assert y.dtype == dtype and x_mine.grad.dtype == dtype and grads[0].dtype == torch.float32
    # The results in half: about one unit in the last place of the type.
    ulp = dict(rtol=1e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(y.float(), y_ref[here].detach(), **ulp)
    torch.testing.assert_close(x_mine.grad.float(), x_ref.grad[here], **ulp)
    # The loss weights are half numbers on both sides, and these sums are float32's.
    torch.testing.assert_close(grads[0], ref.weight.grad, **tolerance(torch.float32))
    torch.testing.assert_close(grads[1], ref.bias.grad, **tolerance(torch.float32))
    check_state(sync, ref, torch.float32)


@pytest.mark.parametrize("kind", ["cpu", "cuda"])
def test_tensors_on_a_device_match_batchnorm_on_the_cpu(kind):
    """The module and this rank's rows on `kind` (CUDA where torch has it, as the GPU machine's
    does), the reference on the CPU: the same plain tensor ops serve both."""
    if kind == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here")
    device = (torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
              if kind == "cuda" else torch.device("cpu"))
    sync, ref = pair(4, torch.float64)
    sync.to(device)
    rows = uneven_rows(hvd.size())
    here = mine(rows)
    for step in range(2):
        x, w = whole_batch(1000 + step, rows, 4, torch.float64)
        x_ref = x.clone().requires_grad_()
        y_ref = ref(x_ref)
        (y_ref * w).sum().backward()
        x_mine = x[here].to(device).clone().requires_grad_()
        y = sync(x_mine)
        (y * w[here].to(device)).sum().backward()
        grads = [summed(sync.weight.grad), summed(sync.bias.grad)]
        assert y.device == device and x_mine.grad.device == device
        assert grads[0].device == device and sync.running_mean.device == device
        torch.testing.assert_close(y.cpu(), y_ref[here].detach(), **tolerance(torch.float64))
        torch.testing.assert_close(x_mine.grad.cpu(), x_ref.grad[here],
                                   **tolerance(torch.float64))
        torch.testing.assert_close(grads[0].cpu(), ref.weight.grad, **tolerance(torch.float64))
        torch.testing.assert_close(grads[1].cpu(), ref.bias.grad, **tolerance(torch.float64))
        sync.zero_grad()
        ref.zero_grad()
    check_state(sync.cpu(), ref, torch.float64)


def test_eval_mode_is_plain_batchnorm_on_this_rank_without_collectives():
    sync, ref = pair(4, torch.float64)
    rows = uneven_rows(hvd.size())
    check_step(sync, ref, rows, 400, 4, torch.float64)
    check_state(sync, ref, torch.float64)
    sync.eval()
    ref.eval()
    ref.load_state_dict(sync.state_dict())  # equal to 1e-10 (checked), now to the bit
    # A different number of calls on each rank: a collective among them would stall the job.
    for call in range(hvd.rank() + 1):
        x = torch.randn(3 + call, CHANNELS, 2, 2, dtype=torch.float64) * 2 + 1
        torch.testing.assert_close(sync(x), ref(x), rtol=0, atol=0)
    untracked, untracked_ref = pair(2, torch.float64, track_running_stats=False)
    untracked.eval()
    untracked_ref.eval()
    for call in range(hvd.rank() + 1):
        x = torch.randn(4, CHANNELS, dtype=torch.float64)
        torch.testing.assert_close(untracked(x), untracked_ref(x), rtol=0, atol=0)
    assert sync.num_batches_tracked.item() == 1
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="sbn.after_eval").item() == hvd.size()


def network(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(5, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
        torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3, momentum=None)),
    ).double()


def test_convert_sync_batchnorm_keeps_the_state_and_trains_as_the_whole_batch():
    model = network(11)
    with torch.no_grad():
        model[1].running_mean.fill_(0.5)
        model[1].running_var.fill_(2.0)
    model[1].num_batches_tracked.fill_(5)
    model[0].bias.requires_grad_(False)
    model[3][1].eval()
    reference = copy.deepcopy(model)
    old_weight = model[1].weight
    converted = hvd.SyncBatchNorm.convert_sync_batchnorm(model)

    assert isinstance(converted, torch.nn.Sequential)
    assert type(converted[1]) is hvd.SyncBatchNorm and type(converted[3][1]) is hvd.SyncBatchNorm
    assert type(converted[0]) is torch.nn.Linear and type(converted[3][0]) is torch.nn.Linear
    assert converted[1].weight is old_weight  # the same Parameter: optimizers still hold it
    assert converted[1].process_set is hvd.global_process_set
    assert converted[3][1].momentum is None and converted[3][1].training is False
    assert converted[1].training is True
    assert converted[1].running_mean.tolist() == [0.5] * 4
    assert converted[1].running_var.tolist() == [2.0] * 4
    assert converted[1].num_batches_tracked.item() == 5
    assert converted[0].bias.requires_grad is False
    names = [n for n, _ in converted.named_parameters()]
    assert names == [n for n, _ in reference.named_parameters()]
    assert converted.state_dict().keys() == reference.state_dict().keys()
    converted[3][1].train()
    reference[3][1].train()

    rows = uneven_rows(hvd.size())
    for step in range(3):
        g = torch.Generator().manual_seed(500 + step)
        x = torch.randn(sum(rows), 5, generator=g, dtype=torch.float64)
        w = torch.randn(sum(rows), 3, generator=g, dtype=torch.float64)
        y_ref = reference(x)
        (y_ref * w).sum().backward()
        y = converted(x[mine(rows)])
        (y * w[mine(rows)]).sum().backward()
        grads = [(name, summed(p.grad), q.grad)
                 for (name, p), q in zip(converted.named_parameters(), reference.parameters())
                 if p.requires_grad]
        torch.testing.assert_close(y, y_ref[mine(rows)].detach(), rtol=1e-10, atol=1e-10)
        for name, got, want in grads:
            torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10, msg=name)
        converted.zero_grad()
        reference.zero_grad()
    for key, value in reference.state_dict().items():
        torch.testing.assert_close(converted.state_dict()[key], value, rtol=1e-10, atol=1e-10,
                                   msg=key)

    top = hvd.SyncBatchNorm.convert_sync_batchnorm(torch.nn.SyncBatchNorm(2, eps=1e-3))
    assert type(top) is hvd.SyncBatchNorm and top.eps == 1e-3 and top.num_features == 2


def test_distributed_optimizer_trains_as_one_process_on_the_whole_batch():
    """Linear -> SyncBatchNorm -> Linear: with each rank's loss scaled to its share of the whole
    batch's mean loss (times the size, which the optimizer's average divides out), SGD steps
    follow the reference's on the whole batch."""
    def build():
        torch.manual_seed(12)
        return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6),
                                   torch.nn.Tanh(), torch.nn.Linear(6, 2)).double()

    reference = build()
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    model = hvd.SyncBatchNorm.convert_sync_batchnorm(build())
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters())
    rows = uneven_rows(hvd.size())
    total = sum(rows)
    for step in range(3):
        g = torch.Generator().manual_seed(600 + step)
        x = torch.randn(total, 4, generator=g, dtype=torch.float64)
        target = torch.randn(total, 2, generator=g, dtype=torch.float64)
        ref_opt.zero_grad()
        ((reference(x) - target) ** 2).sum().div(total).backward()
        ref_opt.step()
        opt.zero_grad()
        here = mine(rows)
        ((model(x[here]) - target[here]) ** 2).sum().mul(hvd.size() / total).backward()
        opt.step()
    for key, value in reference.state_dict().items():
        torch.testing.assert_close(model.state_dict()[key], value, rtol=1e-10, atol=1e-12,
                                   msg=key)


def restart(process_sets):
    hvd.shutdown()
    hvd.init(process_sets=process_sets)


def test_process_sets_normalise_over_their_members_and_size_one_is_plain_batchnorm():
    """The set [0, 1] (at np 3; at np 2 it is the whole job) and the set [0] of one rank; the
    job is initialised anew with them and then as the other files expect it."""
    size, me = hvd.size(), hvd.rank()
    pair_set, solo = hvd.ProcessSet([0, 1]), hvd.ProcessSet([0])
    restart([pair_set, solo] if size > 2 else [solo])
    try:
        if size > 2 and me in pair_set.ranks:
            sync, ref = pair(3, torch.float64)
            sync.process_set = pair_set
            rows = [2, 5]
            for step in range(2):
                check_step(sync, ref, rows, 700 + step, 3, torch.float64)
            check_state(sync, ref, torch.float64)
        if me == 0:
            sync, ref = pair(4, torch.float64, momentum=None)
            sync.process_set = solo
            for step in range(2):
                x, w = whole_batch(800 + step, [4], 4, torch.float64)
                x_ref, x_mine = x.clone().requires_grad_(), x.clone().requires_grad_()
                y_ref = ref(x_ref)
                (y_ref * w).sum().backward()
                y = sync(x_mine)
                (y * w).sum().backward()
                # The same kernel as torch's BatchNorm: the very same bits.
                assert torch.equal(y, y_ref.detach())
                assert torch.equal(x_mine.grad, x_ref.grad)
                assert torch.equal(sync.weight.grad, ref.weight.grad)
            check_state(sync, ref, torch.float64)
        other = hvd.SyncBatchNorm(CHANNELS, process_set=hvd.ProcessSet([0]))
        with pytest.raises(ValueError, match="is not registered"):
            other(torch.ones(4, CHANNELS))
    finally:
        restart(None)


def test_refusals():
    bn = hvd.SyncBatchNorm(CHANNELS)
    with pytest.raises(ValueError, match="expected at least 2D input"):
        bn(torch.ones(4))
    with pytest.raises(ValueError, match="has 5 channels"):
        bn(torch.ones(4, 5))  # refused before any collective: nothing is left to match
    # One value per channel over the whole set: an error on every rank, as torch's BatchNorm.
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        bn(torch.ones(1 if hvd.rank() == 0 else 0, CHANNELS))
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="sbn.after_refusals").item() == \
        hvd.size()


def test_horovod_names():
    import horovod.torch
    from horovod.torch.sync_batch_norm import SyncBatchNorm

    assert SyncBatchNorm is hvd.SyncBatchNorm and horovod.torch.SyncBatchNorm is SyncBatchNorm
    bn = SyncBatchNorm(8)
    assert (bn.eps, bn.momentum, bn.affine, bn.track_running_stats) == (1e-5, 0.1, True, True)
    assert isinstance(bn, torch.nn.modules.batchnorm._BatchNorm)
