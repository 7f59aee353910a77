"""hvd.torch on CUDA tensors, for scripts/gpu-check.sh (plain Python: the GPU machine may have
no pytest). Every rank runs every check in order; each prints PASS or FAIL with the reason,
and the exit status is 1 if any failed, 77 (skip) without CUDA.

    HVD_RANK=0 HVD_SIZE=1 ... PYTHONPATH=python python3 tests/python/gpu/cuda_check.py
"""

import sys
import traceback

import torch

import hvd.torch as hvd

CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def device():
    return torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())


def ranks_sum(f):
    return sum(f(r) for r in range(hvd.size()))


@check
def allreduce_every_dtype_and_op():
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
                  torch.int64, torch.uint8, torch.int8, torch.int16):
        base = torch.arange(1000, dtype=torch.float64) % 5
        mine = (base + hvd.rank()).to(dtype).to(device())
        want = sum((base + r) for r in range(hvd.size())).to(dtype)
        out = hvd.allreduce(mine, op=hvd.Sum, name="cuda.sum.%s" % dtype)
        assert out.device == mine.device, out.device
        assert torch.equal(out.cpu(), want), (dtype, out.cpu()[:5], want[:5])
        hvd.allreduce_(mine, op=hvd.Max, name="cuda.max.%s" % dtype)
        assert torch.equal(mine.cpu(), (base + hvd.size() - 1).to(dtype)), dtype


@check
def average_and_fp16_compression():
    t = torch.full((4096,), float(hvd.rank() + 1), device=device())
    out = hvd.allreduce(t)
    assert torch.allclose(out.cpu(), torch.full((4096,), (hvd.size() + 1) / 2)), out[:4]
    x = torch.full((64,), 1.0 + 2.0 ** -12, device=device())
    squeezed = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert squeezed.dtype == torch.float32
    assert torch.equal(squeezed.cpu(), torch.full((64,), float(hvd.size())))


@check
def grouped_allgather_broadcast_alltoall_reducescatter():
    d = device()
    a = torch.full((3,), float(hvd.rank()), device=d)
    b = torch.full((2, 2), hvd.rank(), dtype=torch.int32, device=d)
    oa, ob = hvd.grouped_allreduce([a, b], op=hvd.Sum)
    assert oa.cpu().tolist() == [float(ranks_sum(lambda r: r))] * 3
    assert ob.cpu().tolist() == [[ranks_sum(lambda r: r)] * 2] * 2
    g = hvd.allgather(torch.full((hvd.rank() + 1, 2), float(hvd.rank()), device=d))
    assert g.device.type == "cuda" and g.shape == (ranks_sum(lambda r: r + 1), 2)
    root = hvd.size() - 1
    bc = hvd.broadcast(torch.full((5,), float(hvd.rank()), device=d), root)
    assert bc.cpu().tolist() == [float(root)] * 5
    out, got = hvd.alltoall(torch.arange(hvd.size() * 2, dtype=torch.float32, device=d),
                            splits=[2] * hvd.size())
    assert out.device.type == "cuda" and got.tolist() == [2] * hvd.size()
    rs = hvd.reducescatter(torch.ones(hvd.size() * 2, device=d), op=hvd.Sum)
    assert rs.cpu().tolist() == [float(hvd.size())] * 2


@check
def ordered_after_the_current_stream():
    # Work queued on a side stream right before the submit must be in the input: the op is
    # ordered after torch's current stream, without the caller synchronising.
    d = device()
    side = torch.cuda.Stream(device=d)
    t = torch.zeros(1 << 22, device=d)
    with torch.cuda.stream(side):
        torch.cuda._sleep(10_000_000)  # keep the stream busy so a missing wait would show
        t.fill_(float(hvd.rank() + 1))
        out = hvd.allreduce(t, op=hvd.Sum, name="cuda.stream.order")
    assert torch.equal(out.cpu()[:8], torch.full((8,), float(ranks_sum(lambda r: r + 1))))


@check
def distributed_optimizer_matches_one_process():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                              torch.nn.Linear(16, 1)).to(device())
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    ref.load_state_dict({k: v.cpu() for k, v in net.state_dict().items()})
    opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=net.named_parameters())
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6 * hvd.size(), 8, generator=g)
    y = torch.randn(6 * hvd.size(), 1, generator=g)
    mine = slice(6 * hvd.rank(), 6 * (hvd.rank() + 1))
    for _ in range(4):
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x[mine].to(device())), y[mine].to(device())).backward()
        opt.step()
        ropt.zero_grad()
        torch.nn.functional.mse_loss(ref(x), y).backward()
        ropt.step()
    for p, q in zip(net.parameters(), ref.parameters()):
        assert torch.allclose(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-5)


@check
def integer_scale_factors_and_names_held_until_synchronized():
    # Integers scaled as Horovod scales them (float64, truncated toward zero) on CUDA tensors
    # too, and a second submit of a name refused until the first is synchronized, however fast
    # the GPU ran it.
    base = torch.arange(12, dtype=torch.float64) % 7 - 3
    for dtype in (torch.int32, torch.int64):
        x = (base + hvd.rank()).to(dtype).to(device())
        want = torch.trunc(sum(torch.trunc((base + r) * 1.5) for r in range(hvd.size())) * 0.5)
        out = hvd.allreduce(x, op=hvd.Sum, prescale_factor=1.5, postscale_factor=0.5,
                            name="cuda.int.scaled.%s" % dtype)
        assert torch.equal(out.cpu(), want.to(dtype)), (dtype, out.cpu(), want)
    for i in range(50):
        h = hvd.allreduce_async(torch.ones(4, device=device()), name="cuda.dup", op=hvd.Sum)
        while not hvd.poll(h):
            pass
        try:
            hvd.allreduce_async(torch.ones(4, device=device()), name="cuda.dup")
            raise AssertionError("round %d: a second in-flight submit was accepted" % i)
        except ValueError:
            pass
        assert hvd.synchronize(h).cpu().tolist() == [float(hvd.size())] * 4


@check
def adasum_of_orthogonal_and_of_equal_vectors():
    # Staged through host memory: orthogonal vectors add up, equal ones give themselves.
    d = device()
    n = 4 * hvd.size()
    mine = torch.zeros(n, device=d)
    mine[hvd.rank() * 4:(hvd.rank() + 1) * 4] = float(hvd.rank() + 1)
    out = hvd.allreduce(mine, op=hvd.Adasum, name="cuda.adasum.orthogonal")
    want = torch.repeat_interleave(torch.arange(1, hvd.size() + 1, dtype=torch.float32), 4)
    assert out.device.type == d.type and torch.equal(out.cpu(), want), out
    same = torch.linspace(-1, 1, 1000, device=d, dtype=torch.float64)
    out = hvd.allreduce(same, op=hvd.Adasum, name="cuda.adasum.equal")
    assert torch.allclose(out.cpu(), same.cpu(), rtol=0, atol=1e-12), out


@check
def sync_batch_norm_matches_batch_norm_on_the_whole_batch():
    # Uneven batches (rank r has r + 2 rows) of one whole batch every rank can build; float64
    # BatchNorm on the CPU is the reference for the CUDA float32 result.
    d = device()
    counts = [r + 2 for r in range(hvd.size())]
    g = torch.Generator().manual_seed(7)
    whole = torch.randn(sum(counts), 3, 5, 5, generator=g, dtype=torch.float64) * 3 + 1
    start = sum(counts[:hvd.rank()])
    mine = whole[start:start + counts[hvd.rank()]].to(d, torch.float32).requires_grad_()
    sbn = hvd.SyncBatchNorm(3).to(d)
    out = sbn(mine)
    (out * out).sum().backward()
    ref_x = whole.clone().requires_grad_()
    ref = torch.nn.BatchNorm2d(3).double()
    ref_out = ref(ref_x)
    (ref_out * ref_out).sum().backward()
    want = slice(start, start + counts[hvd.rank()])
    assert torch.allclose(out.detach().cpu().double(), ref_out.detach()[want], atol=1e-4)
    assert torch.allclose(mine.grad.cpu().double(), ref_x.grad[want], atol=1e-3)
    assert torch.allclose(sbn.running_mean.cpu().double(), ref.running_mean, atol=1e-5)
    assert torch.allclose(sbn.running_var.cpu().double(), ref.running_var, atol=1e-4)


def main():
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        return 77
    hvd.init()
    failed = 0
    for fn in CHECKS:
        try:
            fn()
            print("rank %d PASS %s" % (hvd.rank(), fn.__name__), flush=True)
        except Exception:  # report every check, then fail the run
            failed += 1
            print("rank %d FAIL %s\n%s" % (hvd.rank(), fn.__name__, traceback.format_exc()),
                  flush=True)
    print("rank %d: %d passed, %d failed" % (hvd.rank(), len(CHECKS) - failed, failed),
          flush=True)
    hvd.shutdown()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
