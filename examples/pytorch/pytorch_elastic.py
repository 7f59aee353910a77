"""Elastic training as a Horovod user writes it: hvd.elastic.run, TorchState, ElasticSampler and
commit(). Hosts may fail, leave and join while it runs (hvdrun --min-np / --host-discovery-script);
the workers that remain roll back to the last commit and go on at the new size, new workers start
from the survivors' state.

A small classifier learns a synthetic task (the class of a point is the region a fixed set of
hyperplanes puts it in), so the example needs no dataset. Rank 0 prints each epoch's size and
loss:

    hvdrun -np 4 --min-np 2 --host-discovery-script ./discover.sh \\
        python3 examples/pytorch/pytorch_elastic.py --epochs 20
"""

import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data

import horovod.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch elastic example on synthetic data")
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--samples", type=int, default=4096)
parser.add_argument("--lr", type=float, default=0.01, help="learning rate per rank")
parser.add_argument("--batches-per-commit", type=int, default=4)
parser.add_argument("--batch-sleep", type=float, default=0.0,
                    help="seconds to sleep after each batch (to watch hosts come and go)")
args = parser.parse_args()

hvd.init()
torch.manual_seed(42)

# The task: 8 classes, the sign pattern of 3 fixed hyperplanes over 16 features.
features = torch.randn(args.samples, 16)
planes = torch.randn(16, 3)
labels = ((features @ planes) > 0).long() @ torch.tensor([1, 2, 4])
dataset = torch.utils.data.TensorDataset(features, labels)

model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 8))
# The learning rate follows the number of ranks, as in Horovod's examples; a reset callback sets
# it again when the size changes.
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)


def on_state_reset():
    for group in optimizer.param_groups:
        group["lr"] = args.lr * hvd.size()


state = hvd.elastic.TorchState(model=model, optimizer=optimizer, sampler=sampler, epoch=0, batch=0)
state.register_reset_callbacks([on_state_reset])


@hvd.elastic.run
def train(state):
    for state.epoch in range(state.epoch, args.epochs):
        started = time.time()
        model.train()
        if state.batch == 0:
            # A new epoch. After a reset in the middle of one, the sampler holds what is left of
            # it (its state was committed with the rest), spread over the ranks there are now.
            sampler.set_epoch(state.epoch)
        total, count = 0.0, 0
        for data, target in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(data), target)
            loss.backward()
            optimizer.step()
            total += loss.item()
            count += 1
            sampler.record_batch(state.batch, args.batch_size)
            state.batch += 1
            if args.batch_sleep:
                time.sleep(args.batch_sleep)
            if state.batch % args.batches_per_commit == 0:
                state.commit()
        mean = hvd.allreduce(torch.tensor(total / max(count, 1)), name="epoch.loss")
        if hvd.rank() == 0:
            print("epoch %2d: %d ranks, loss %.4f (%.1f s)" % (
                state.epoch, hvd.size(), mean.item(), time.time() - started), flush=True)
        state.batch = 0
        state.commit()


train(state)
if hvd.rank() == 0:
    print("done: %d epochs, %d ranks at the end" % (args.epochs, hvd.size()), flush=True)
