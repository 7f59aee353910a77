#!/usr/bin/env python3
"""bench/torch_step.sh's worker: one rank of a torchvision training step, or hvd.torch's per-op
latency.

    hvdrun -np N python3 bench/torch_step.py step --impl hvd [--model resnet18] ...
    hvdrun -np N python3 bench/torch_step.py step --impl ddp ...     (torch.distributed, gloo,
                                                                      env:// from hvdrun)
    hvdrun -np N python3 bench/torch_step.py latency [--ops 64] [--rounds 30] ...

step: SGD on a torchvision model (10 classes) with synthetic images, the same model, batch,
seed and torch.set_num_threads on every rank and with either --impl. A timed step is
    hvd:  zero_grad, forward + loss, backward (the gradients' allreduces start from their
          hooks), optimizer.synchronize() (the wait for them), then step() inside
          optimizer.skip_synchronize()
    ddp:  zero_grad, forward + loss, backward (DDP allreduces its buckets during it and waits
          for them before backward returns), optimizer.step()
Rank 0 prints one line (each time the median over the timed steps of a rank, averaged over the
ranks; img_s = np * batch * steps / the slowest rank's wall time of the timed steps):
    RESULT impl=I np=N model=M img_s=X step_ms=S fwd_ms=F bwd_ms=B sync_ms=Y opt_ms=O

latency: the per-op cost of a Python submit, the measurement of bench/op_latency.cc
(hvd-op-latency) done through hvd.torch.allreduce_async_ / poll / synchronize on float32
tensors of --elements elements (see there for seq, submit and wait):
    RESULT impl=python np=N ops=B elements=E seq_us=S submit_us=U wait_us=W caller_us=U+W wrong=X
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    step = sub.add_parser("step", help="a training step through hvd.torch or DDP")
    step.add_argument("--impl", choices=("hvd", "ddp"), required=True)
    step.add_argument("--model", default="resnet18", help="a torchvision.models name")
    step.add_argument("--batch-size", type=int, default=16, help="images per rank and step")
    step.add_argument("--image-size", type=int, default=64)
    step.add_argument("--steps", type=int, default=10, help="timed steps")
    step.add_argument("--warmup", type=int, default=3, help="untimed steps before them")
    step.add_argument("--threads", type=int, default=1, help="torch.set_num_threads per rank")
    lat = sub.add_parser("latency", help="per-op cost of hvd.torch.allreduce_async_")
    lat.add_argument("--ops", type=int, default=64)
    lat.add_argument("--rounds", type=int, default=30)
    lat.add_argument("--warmup", type=int, default=3)
    lat.add_argument("--elements", type=int, default=1)
    return parser.parse_args()


# --- training step ---------------------------------------------------------------------------

def make_model(name):
    from torchvision import models
    torch.manual_seed(0)
    return getattr(models, name)(num_classes=10)


class Timings:
    def __init__(self):
        self.fwd, self.bwd, self.sync, self.opt, self.step = [], [], [], [], []

    def medians_ms(self):
        return [1e3 * statistics.median(v) if v else 0.0
                for v in (self.step, self.fwd, self.bwd, self.sync, self.opt)]


def train(args, model, optimizer, synchronize, skip_synchronize, rank):
    gen = torch.Generator().manual_seed(100 + rank)
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, generator=gen)
    labels = torch.randint(0, 10, (args.batch_size,), generator=gen)
    timings = Timings()
    wall = 0.0
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        if synchronize is not None:
            synchronize()
            t3 = time.perf_counter()
            with skip_synchronize():
                optimizer.step()
        else:
            t3 = t2
            optimizer.step()
        t4 = time.perf_counter()
        if i >= args.warmup:
            timings.fwd.append(t1 - t0)
            timings.bwd.append(t2 - t1)
            timings.sync.append(t3 - t2)
            timings.opt.append(t4 - t3)
            timings.step.append(t4 - t0)
            wall += t4 - t0
    return timings, wall


def report(args, size, rows):
    """rows: one [wall, step, fwd, bwd, sync, opt] per rank."""
    wall = max(r[0] for r in rows)
    mean = [sum(r[k] for r in rows) / len(rows) for k in range(1, 6)]
    img_s = size * args.batch_size * args.steps / wall
    print("RESULT impl=%s np=%d model=%s img_s=%.2f step_ms=%.2f fwd_ms=%.2f bwd_ms=%.2f "
          "sync_ms=%.2f opt_ms=%.2f" % ((args.impl, size, args.model, img_s) + tuple(mean)),
          flush=True)


def step_hvd(args):
    import horovod.torch as hvd
    hvd.init()
    torch.set_num_threads(args.threads)
    model = make_model(args.model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    timings, wall = train(args, model, optimizer, optimizer.synchronize,
                          optimizer.skip_synchronize, hvd.rank())
    mine = torch.tensor([[wall] + timings.medians_ms()], dtype=torch.float64)
    rows = hvd.allgather(mine, name="torch_step.timings").tolist()
    if hvd.rank() == 0:
        report(args, hvd.size(), rows)
    hvd.shutdown()


def step_ddp(args):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    dist.init_process_group(backend="gloo", init_method="env://")
    torch.set_num_threads(args.threads)
    model = DistributedDataParallel(make_model(args.model))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    timings, wall = train(args, model, optimizer, None, None, dist.get_rank())
    mine = torch.tensor([wall] + timings.medians_ms(), dtype=torch.float64)
    rows = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(rows, mine)
    if dist.get_rank() == 0:
        report(args, dist.get_world_size(), [r.tolist() for r in rows])
    dist.destroy_process_group()


# --- per-op latency --------------------------------------------------------------------------

def latency(args):
    import horovod.torch as hvd
    hvd.init()
    torch.set_num_threads(1)
    value = float(2 * hvd.rank() - (hvd.size() - 1) + 5)
    tensors = [torch.empty(args.elements, dtype=torch.float32) for _ in range(args.ops)]
    seq_names = ["lat.%d" % i for i in range(args.ops)]
    batch_names = ["batch.%d" % i for i in range(args.ops)]
    seq, submit, wait = [], [], []
    clock = time.perf_counter
    for round_ in range(args.warmup + args.rounds):
        for t in tensors:
            t.fill_(value)
        hvd.barrier()
        s0 = clock()
        for t, name in zip(tensors, seq_names):
            hvd.synchronize(hvd.allreduce_async_(t, name=name, op=hvd.Average))
        s1 = clock()

        for t in tensors:
            t.fill_(value)
        hvd.barrier()
        b0 = clock()
        handles = [hvd.allreduce_async_(t, name=name, op=hvd.Average)
                   for t, name in zip(tensors, batch_names)]
        b1 = clock()
        for h in handles:
            while not hvd.poll(h):
                pass
        w0 = clock()
        for h in handles:
            hvd.synchronize(h)
        w1 = clock()
        if round_ >= args.warmup:
            seq.append((s1 - s0) / args.ops)
            submit.append((b1 - b0) / args.ops)
            wait.append((w1 - w0) / args.ops)
    wrong = sum(int((t != 5.0).sum()) for t in tensors)
    wrong = int(hvd.allreduce(torch.tensor([wrong]), name="latency.wrong", op=hvd.Sum))
    if hvd.rank() == 0:
        u, w = 1e6 * statistics.median(submit), 1e6 * statistics.median(wait)
        print("RESULT impl=python np=%d ops=%d elements=%d seq_us=%.2f submit_us=%.2f "
              "wait_us=%.2f caller_us=%.2f wrong=%d" % (
                  hvd.size(), args.ops, args.elements, 1e6 * statistics.median(seq), u, w,
                  u + w, wrong), flush=True)
    hvd.shutdown()
    return 0 if wrong == 0 else 1


def main():
    args = parse_args()
    if args.mode == "latency":
        return latency(args)
    if args.impl == "hvd":
        step_hvd(args)
    else:
        step_ddp(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
