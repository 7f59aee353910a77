#!/usr/bin/env python3
"""Synthetic-data training benchmark, written as a Horovod user writes one.

    hvdrun -np 4 python3 examples/pytorch/pytorch_synthetic_benchmark.py
    hvdrun -np 4 python3 examples/pytorch/pytorch_synthetic_benchmark.py --model resnet18 \
        --image-size 64 --batch-size 16

It takes Horovod's synthetic-benchmark options (--model, --batch-size, --num-warmup-batches,
--num-batches-per-iter, --num-iters, --fp16-allreduce, --no-cuda) and runs unchanged under
Horovod's own horovodrun. Unlike Horovod's benchmark, whose images are noise with random
labels, an image here is a faint copy of its class's fixed random pattern (the same on every
rank) under noise, so there is something to learn and the loss falls from iteration to
iteration. Each rank draws its own images and labels. Rank 0 prints, per iteration, the loss averaged over the ranks and the
images per second summed over the ranks.

The default model, "cnn", is a small convolutional net defined below that trains in seconds on a
laptop CPU; any other name is looked up in torchvision.models (resnet18, resnet50, ...).
"""
import argparse
import os
import sys
import timeit

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import horovod.torch as hvd

CLASSES = 10


class SmallCNN(nn.Module):
    """Three conv + batch-norm blocks and a two-layer head: 66k parameters in 16 tensors."""

    def __init__(self, classes=CLASSES):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(64)
        self.conv3 = nn.Conv2d(64, 64, 3, padding=1)
        self.bn3 = nn.BatchNorm2d(64)
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc2(F.relu(self.fc1(x)))


def build_model(name):
    if name == "cnn":
        return SmallCNN()
    try:
        from torchvision import models
    except ImportError:
        sys.exit("--model %s needs torchvision (Debian: apt-get install python3-torchvision); "
                 "--model cnn needs nothing more than torch" % name)
    if not hasattr(models, name):
        sys.exit("--model %s: no such model in torchvision.models" % name)
    return getattr(models, name)(num_classes=CLASSES)


class ClassPatterns:
    """What makes the labels learnable: one fixed smooth random pattern per class (seeded, the
    same on every rank and in every run). An image of class c is a faint copy of pattern c
    under stronger noise, so a model has to learn the patterns to tell the classes apart."""

    def __init__(self, image_size, signal=0.4):
        gen = torch.Generator().manual_seed(2024)
        coarse = torch.randn(CLASSES, 3, 4, 4, generator=gen)
        self.patterns = signal * F.interpolate(coarse, size=(image_size, image_size),
                                               mode="bilinear", align_corners=False)

    def images(self, labels, gen):
        noise = torch.randn((len(labels),) + tuple(self.patterns.shape[1:]), generator=gen)
        return self.patterns[labels] + noise


def synthetic_batches(count, batch_size, image_size, rank):
    """`count` batches of this rank's own images and labels (seeded by the rank)."""
    gen = torch.Generator().manual_seed(1000 + rank)
    patterns = ClassPatterns(image_size)
    batches = []
    for _ in range(count):
        labels = torch.randint(0, CLASSES, (batch_size,), generator=gen)
        batches.append((patterns.images(labels, gen), labels))
    return batches


def cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def parse_args():
    parser = argparse.ArgumentParser(
        description="PyTorch synthetic benchmark over horovod.torch",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                        help="use fp16 compression during allreduce")
    parser.add_argument("--model", default="cnn",
                        help="cnn (defined here) or a torchvision.models name, e.g. resnet18")
    parser.add_argument("--batch-size", type=int, default=32, help="input batch size per rank")
    parser.add_argument("--image-size", type=int, default=32, help="height and width of images")
    parser.add_argument("--lr", type=float, default=0.02,
                        help="learning rate of one rank (scaled by the number of ranks)")
    parser.add_argument("--num-warmup-batches", type=int, default=2,
                        help="number of warm-up batches that don't count towards benchmark")
    parser.add_argument("--num-batches-per-iter", type=int, default=10,
                        help="number of batches per benchmark iteration")
    parser.add_argument("--num-iters", type=int, default=8, help="number of benchmark iterations")
    parser.add_argument("--num-threads", type=int, default=0,
                        help="torch threads per rank on CPU (0: this host's cores / ranks on it)")
    parser.add_argument("--no-cuda", action="store_true", default=False,
                        help="disables CUDA training")
    args = parser.parse_args()
    for flag in ("batch_size", "image_size", "num_batches_per_iter", "num_iters"):
        if getattr(args, flag) <= 0:
            parser.error("--%s must be positive" % flag.replace("_", "-"))
    return args


def main():
    args = parse_args()
    args.cuda = not args.no_cuda and torch.cuda.is_available()

    hvd.init()
    if args.cuda:
        # One GPU per rank: the local rank picks it.
        torch.cuda.set_device(hvd.local_rank())
    else:
        # The ranks on a host share its cores; more threads than cores only slows them all.
        threads = args.num_threads or max(1, cpu_count() // hvd.local_size())
        torch.set_num_threads(threads)

    torch.manual_seed(42)  # the same initial weights everywhere (rank 0's are broadcast anyway)
    model = build_model(args.model)
    device = torch.device("cuda") if args.cuda else torch.device("cpu")
    model.to(device)

    # Gradients are averaged over the ranks, so the global batch is size() times larger: scale
    # the learning rate with it, as Horovod's examples do.
    optimizer = optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)

    # Every rank starts from rank 0's weights and optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    batches = [(x.to(device), y.to(device)) for x, y in
               synthetic_batches(args.num_batches_per_iter, args.batch_size, args.image_size,
                                 hvd.rank())]
    losses = []

    def benchmark_step(index):
        images, labels = batches[index % len(batches)]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())

    def log(text):
        if hvd.rank() == 0:
            print(text, flush=True)

    def run_batches(count):
        for i in range(count):
            benchmark_step(i)
        if args.cuda:
            torch.cuda.synchronize()

    log("Model: %s, %dx%d images" % (args.model, args.image_size, args.image_size))
    log("Batch size: %d per rank, %d ranks, %s, %s allreduce" % (
        args.batch_size, hvd.size(),
        "CUDA" if args.cuda else "CPU (%d torch thread(s) per rank)" % torch.get_num_threads(),
        "fp16" if args.fp16_allreduce else "float32"))

    log("Running warmup...")
    run_batches(args.num_warmup_batches)
    losses.clear()

    log("Running benchmark...")
    rates = []
    for it in range(args.num_iters):
        seconds = timeit.timeit(lambda: run_batches(args.num_batches_per_iter), number=1)
        rate = args.batch_size * args.num_batches_per_iter / seconds
        # Averaged over the ranks: each rank's mean loss of this iteration's batches; summed:
        # each rank's images per second.
        loss = hvd.allreduce(torch.stack(losses).mean().cpu(), name="iter_loss", op=hvd.Average)
        total = hvd.allreduce(torch.tensor([rate], dtype=torch.float64), name="iter_rate",
                              op=hvd.Sum)
        losses.clear()
        rates.append(float(total))
        log("Iter #%d: loss %.4f, %.1f img/sec per rank, %.1f img/sec total" % (
            it, float(loss), rate, float(total)))

    mean = sum(rates) / len(rates)
    spread = (sum((r - mean) ** 2 for r in rates) / len(rates)) ** 0.5
    log("Img/sec per rank: %.1f +-%.1f" % (mean / hvd.size(), 1.96 * spread / hvd.size()))
    log("Total img/sec on %d rank(s): %.1f +-%.1f" % (hvd.size(), mean, 1.96 * spread))
    hvd.shutdown()


if __name__ == "__main__":
    main()
