#!/usr/bin/env python3
"""A small DistributedDataParallel training run, unchanged from what torchrun would start.

Every rank started by hvdrun has RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
MASTER_ADDR and MASTER_PORT, so init_process_group(init_method="env://") works as under
torchrun:

    hvdrun -np 4 -H h0:2,h1:2 -x GLOO_SOCKET_IFNAME=eth0 python3 examples/torch_ddp.py

Each step the global batch (--batch rows of a fixed synthetic regression problem) is split in
equal contiguous shares across the ranks; DDP averages the gradients, so the run follows the
same trajectory as one process on the whole batch (--single), up to floating-point summation
order (float64 keeps that below 1e-12). Rank 0 prints the final parameters as
"param <name> <index> <value>" lines, which a test compares with a --single run.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


def problem(batch, steps, features):
    """The same inputs and targets on every rank and in --single: seeded, not random per run."""
    gen = torch.Generator().manual_seed(1234)
    weights = torch.randn(features, 1, generator=gen, dtype=torch.float64)
    xs = torch.randn(steps, batch, features, generator=gen, dtype=torch.float64)
    ys = torch.tanh(xs @ weights) + 0.1 * torch.randn(steps, batch, 1, generator=gen,
                                                      dtype=torch.float64)
    return xs, ys


def model(features):
    torch.manual_seed(7)
    return nn.Sequential(nn.Linear(features, 16), nn.Tanh(), nn.Linear(16, 1)).double()


def train(net, xs, ys, lr):
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.MSELoss()
    loss = None
    for x, y in zip(xs, ys):
        optimizer.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        optimizer.step()
    return float(loss)


def print_params(net):
    module = net.module if isinstance(net, DistributedDataParallel) else net
    for name, tensor in module.state_dict().items():
        for i, value in enumerate(tensor.flatten().tolist()):
            print(f"param {name} {i} {value:.17g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64, help="global batch (rows per step)")
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--single", action="store_true", help="one process, the whole batch")
    args = parser.parse_args()
    xs, ys = problem(args.batch, args.steps, args.features)
    if args.single:
        net = model(args.features)
        loss = train(net, xs, ys, args.lr)
        print(f"single loss {loss:.17g}")
        print_params(net)
        return 0

    dist.init_process_group(backend="gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"torch rank={rank} world={world} local_rank={os.environ['LOCAL_RANK']} "
          f"local_world={os.environ['LOCAL_WORLD_SIZE']} group_rank={os.environ['GROUP_RANK']} "
          f"master={os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
    if args.batch % world != 0:
        print(f"--batch {args.batch} is not a multiple of the world size {world}", file=sys.stderr)
        return 2
    share = args.batch // world
    net = DistributedDataParallel(model(args.features))
    loss = train(net, xs[:, rank * share:(rank + 1) * share], ys[:, rank * share:(rank + 1) * share],
                 args.lr)
    # Every rank holds the same parameters; rank 0 reports them.
    if rank == 0:
        print(f"ddp loss-of-rank-0-share {loss:.17g}")
        print_params(net)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
