#!/usr/bin/env python3
"""torch-fusion-bench: hvd-fusion-bench's step through torch.distributed (gloo backend), one
dist.all_reduce per tensor -- the peer bench/fusion.sh runs beside hvd.

  python3 torch_fusion_bench.py --np 4 [--params FILE] [--steps 20] [--warmup 3]
                                [--max-tensors N] [--op average|sum] [--sync]

It starts --np processes itself (multiprocessing, MASTER_ADDR 127.0.0.1 and a free ephemeral
port). Same tensors, options, step, check and output as hvd-fusion-bench (bench/fusion_bench.cc):
a step is a barrier, then one in-place dist.all_reduce(SUM) per tensor in reverse order, all
submitted with async_op=True (gloo overlaps them on its worker threads, the peer's best; --sync
waits for each before the next), then every work waited for and, for the average, each tensor
divided by the rank count (what DistributedDataParallel does without its buckets); its time is
max over ranks. Each process uses one intra-op thread (the ranks share the machine's cores, as
hvd's do). Inputs are ((i*7 + t*3) % 17) + 2r - (n-1), so the average is exact; every element is
checked on one untimed step before the warm-up and one after the timed steps. Rank 0 prints
  RESULT impl=torch np=N tensors=T bytes=B steps=S median_ms=M min_ms=M max_ms=M wrong=W
Exit status: 0 when every element was right, 1 when some were wrong or a rank failed, 2 for a
usage error.
"""
import argparse
import datetime
import os
import socket
import sys
import time

DEFAULT_PARAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "resnet50_parameters.tsv")


def read_params(path, max_tensors):
    """[(name, shape, elements)] from name<TAB>shape<TAB>elements lines."""
    tensors = []
    with open(path) as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            try:
                shape = [int(d) for d in fields[1].split("x")]
                elements = int(fields[2])
            except (IndexError, ValueError):
                sys.exit(f"torch-fusion-bench: {path}:{line_no}: "
                         "expected name<TAB>shape<TAB>elements")
            product = 1
            for d in shape:
                product *= d
            if product != elements or product <= 0:
                sys.exit(f"torch-fusion-bench: {path}:{line_no}: {fields[0]} has {elements} "
                         f"elements, its shape makes {product}")
            tensors.append((fields[0], shape, elements))
            if max_tensors and len(tensors) == max_tensors:
                break
    if not tensors:
        sys.exit(f"torch-fusion-bench: no tensors in {path}")
    return tensors


def base_values(torch, t, elements):
    i = torch.arange(elements, dtype=torch.int64)
    return ((i * 7 + t * 3) % 17).to(torch.float32)


def worker(rank, size, port, args, params, results):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=120))
    tensors = [torch.empty(elements, dtype=torch.float32) for _, _, elements in params]
    average = args.op == "average"

    def fill():
        for t, x in enumerate(tensors):
            x.copy_(base_values(torch, t, x.numel()) + float(2 * rank - (size - 1)))

    def count_wrong():
        scale = 1.0 if average else float(size)
        wrong = 0
        for t, x in enumerate(tensors):
            bad = int((x != base_values(torch, t, x.numel()) * scale).sum())
            if bad and rank == 0:
                print(f"torch-fusion-bench: {params[t][0]}: {bad} wrong elements on rank 0",
                      file=sys.stderr)
            wrong += bad
        return wrong

    def step():
        dist.barrier()
        start = time.perf_counter()
        if args.sync:
            for x in reversed(tensors):
                dist.all_reduce(x)
                if average:
                    x.div_(size)
        else:
            works = [(x, dist.all_reduce(x, async_op=True)) for x in reversed(tensors)]
            for x, work in works:
                work.wait()
                if average:
                    x.div_(size)
        return (time.perf_counter() - start) * 1e3

    fill()
    step()
    wrong = count_wrong()
    times = []
    for s in range(args.warmup + args.steps):
        ms = step()
        if s >= args.warmup:
            times.append(ms)
    fill()
    step()
    wrong += count_wrong()

    # A step lasts as long as its slowest rank.
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    w = torch.tensor([wrong], dtype=torch.int64)
    dist.all_reduce(w)
    if rank == 0:
        results.put((t.tolist(), int(w.item())))
    dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(
        prog="torch_fusion_bench.py",
        description="one dist.all_reduce (gloo) per tensor per step, --np local processes")
    parser.add_argument("--np", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--params", default=DEFAULT_PARAMS,
                        help="name<TAB>shape<TAB>elements lines (default %(default)s)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before (default 3)")
    parser.add_argument("--max-tensors", type=int, default=0,
                        help="only the first T tensors (default: all)")
    parser.add_argument("--op", choices=["average", "sum"], default="average")
    parser.add_argument("--sync", action="store_true",
                        help="wait for each all_reduce before submitting the next")
    args = parser.parse_args()
    if args.np < 1 or args.steps < 1 or args.warmup < 0 or args.max_tensors < 0:
        parser.error("--np and --steps must be >= 1, --warmup and --max-tensors >= 0")
    try:
        params = read_params(args.params, args.max_tensors)
    except OSError as e:
        print(f"torch-fusion-bench: cannot open parameter file: {e}", file=sys.stderr)
        return 2

    import torch
    import torch.multiprocessing as mp

    elements = sum(p[2] for p in params)
    size = args.np
    mode = "sync" if args.sync else "async_op"
    print(f"# torch-fusion-bench: np {size}, {len(params)} tensors from {args.params}, "
          f"{elements} float32 elements ({elements * 4 / 1048576:.1f} MiB), op {args.op}, "
          f"{args.warmup} warm-up + {args.steps} timed steps", flush=True)
    print(f"# torch {torch.__version__}, gloo backend, {mode}, 1 intra-op thread per process",
          flush=True)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, size, port, args, params, results))
             for r in range(size)]
    for p in procs:
        p.start()
    out = None
    failed = False
    while out is None:
        try:
            out = results.get(timeout=1.0)
        except Exception:  # queue.Empty: see whether a rank died
            if any(p.exitcode not in (None, 0) for p in procs) or all(
                    p.exitcode is not None for p in procs):
                failed = True
                break
    for p in procs:
        if failed and p.exitcode is None:
            p.terminate()
        p.join()
    bad = [f"rank {r} exit {p.exitcode}" for r, p in enumerate(procs) if p.exitcode != 0]
    if failed or bad or out is None:
        print(f"torch-fusion-bench: failed ({', '.join(bad) or 'no result'})", file=sys.stderr)
        return 1
    times, wrong = out
    print("# step times (ms): " + " ".join(f"{t:.3f}" for t in times))
    s = sorted(times)
    k = len(s)
    median = s[k // 2] if k % 2 else (s[k // 2 - 1] + s[k // 2]) / 2
    print(f"RESULT impl=torch np={size} tensors={len(params)} bytes={elements * 4} "
          f"steps={args.steps} median_ms={median:.3f} min_ms={s[0]:.3f} max_ms={s[-1]:.3f} "
          f"wrong={wrong}", flush=True)
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
