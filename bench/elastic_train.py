"""The training script of bench/elastic.sh, in three forms of one job: a model whose start-up
costs what a real one's does (torch's import, an 8-layer MLP of 8.4 M parameters built and
initialised), trained on synthetic batches, rank 0 printing "T <unix time> size <n> step <k>
attempt <a>" after each step (a: the restart count of the restart forms, 0 for elastic) and
"B ..." alike when a step begins. The worker that is to fail prints "FAIL <unix time>" and exits 1.

  elastic   Horovod's elastic API (hvd.elastic.run, TorchState, commit every --commit steps),
            under hvdrun --min-np: survivors roll back and go on, new hosts' workers join.
  restart   the same job as a plain hvd.torch script that checkpoints every --commit steps and
            resumes from its checkpoint, under hvdrun --max-restarts 1 (the whole job restarts).
  torchrun  the same as torch.distributed (gloo) with DistributedDataParallel and the same
            checkpoints, under torchrun --max-restarts 1.

--fail-rank / --fail-step: which rank of the first attempt (round) fails, and when.
"""

import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=["elastic", "restart", "torchrun"], required=True)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--commit", type=int, default=5)
parser.add_argument("--sleep", type=float, default=0.05)
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--fail-step", type=int, default=-1)
parser.add_argument("--checkpoint", default="")
args = parser.parse_args()


def build():
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [nn.Linear(1024, 1024), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(1024, 10))


def batch(step):
    g = torch.Generator().manual_seed(step)
    return torch.randn(16, 1024, generator=g), torch.randint(0, 10, (16,), generator=g)


def step_once(model, optimizer, step):
    x, y = batch(step)
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()


ATTEMPT = int(os.environ.get("HVD_RESTART_COUNT", os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))


def begin(rank, size, step):
    """Rank 0's "B" line: a step begins (the state is there and the ring formed)."""
    if rank == 0:
        print("B %.6f size %d step %d attempt %d" % (time.time(), size, step, ATTEMPT),
              flush=True)


def report(rank, size, step):
    if rank == 0:
        print("T %.6f size %d step %d attempt %d" % (time.time(), size, step, ATTEMPT),
              flush=True)


def maybe_fail(rank, step, first_attempt):
    if first_attempt and rank == args.fail_rank and step == args.fail_step:
        print("FAIL %.6f" % time.time(), flush=True)
        os._exit(1)


def run_elastic():
    import horovod.torch as hvd
    hvd.init()
    model = build()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.001),
                                         named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, step=0)
    first_round = int(os.environ.get("HVD_ELASTIC_ROUND", "0")) == 0

    @hvd.elastic.run
    def train(state):
        while state.step < args.steps:
            begin(hvd.rank(), hvd.size(), state.step + 1)
            step_once(model, optimizer, state.step)
            state.step += 1
            report(hvd.rank(), hvd.size(), state.step)
            maybe_fail(hvd.rank(), state.step, first_round and hvd.size() == 4)
            time.sleep(args.sleep)
            if state.step % args.commit == 0:
                state.commit()

    train(state)


def load_checkpoint(model, optimizer):
    if args.checkpoint and os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        return saved["step"]
    return 0


def save_checkpoint(model, optimizer, step):
    tmp = args.checkpoint + ".tmp"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
               tmp)
    os.replace(tmp, args.checkpoint)


def run_restart():
    import horovod.torch as hvd
    hvd.init()
    first_attempt = int(os.environ.get("HVD_RESTART_COUNT", "0")) == 0
    model = build()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    start = load_checkpoint(model, optimizer)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for step in range(start + 1, args.steps + 1):
        begin(hvd.rank(), hvd.size(), step)
        step_once(model, optimizer, step - 1)
        report(hvd.rank(), hvd.size(), step)
        maybe_fail(hvd.rank(), step, first_attempt)
        time.sleep(args.sleep)
        if step % args.commit == 0 and hvd.rank() == 0:
            save_checkpoint(model, optimizer, step)


def run_torchrun():
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    first_attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) == 0
    model = build()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    start = load_checkpoint(model, optimizer)
    ddp = nn.parallel.DistributedDataParallel(model)
    for step in range(start + 1, args.steps + 1):
        begin(rank, size, step)
        step_once(ddp, optimizer, step - 1)
        report(rank, size, step)
        maybe_fail(rank, step, first_attempt)
        time.sleep(args.sleep)
        if step % args.commit == 0 and rank == 0:
            save_checkpoint(model, optimizer, step)
    dist.destroy_process_group()


{"elastic": run_elastic, "restart": run_restart, "torchrun": run_torchrun}[args.mode]()
sys.exit(0)
