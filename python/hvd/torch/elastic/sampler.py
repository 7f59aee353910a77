"""ElasticSampler (Horovod's horovod.torch.elastic.sampler): a DistributedSampler that knows
which samples of the epoch were processed, so that after a reset the rest is partitioned over
the ranks of the new round.

The epoch's order is the dataset's indices shuffled by seed + epoch (random.Random, as
Horovod's, so both give the same order). Two records of progress:

* processed_num (Horovod 0.28's, what record_batch advances): how many samples of that order,
  from its start, the job has processed. The ranks take the remaining samples in turn (rank r
  the r-th, the (r + size)-th, ...), so after b batches of n on every rank exactly the first
  b * n * size are done, whichever rank holds which: a count describes the whole job's
  progress without any collective.
* processed_indices (Horovod's earlier record, what record_indices adds to): dataset indices
  done besides that prefix. Each rank records its own; TorchState's sync unites the ranks'.

Use one of them within an epoch: record_batch counts positions in the order from which
record_indices' samples were already taken out.
"""

import math
import random

import torch

from hvd.torch.basics import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Partitions `dataset` over the ranks and repartitions what is left of the epoch after a
    reset. Put it in a TorchState, call record_batch after each batch and set_epoch at the end
    of each epoch (not the start, so that a partial epoch is not processed again).

    Args:
        dataset: the dataset (its size must not change).
        shuffle: shuffle the indices each epoch (by seed + epoch, the same on every rank).
        seed: the shuffle's seed, the same on every rank.
        num_replicas, rank: hvd's own additions, for tests and for sampling on behalf of other
            ranks: the partition's size and this sampler's place in it (by default
            hvd.size() and hvd.rank(), read at every reset).
    """

    def __init__(self, dataset, shuffle=True, seed=0, num_replicas=None, rank=None):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self._fixed_replicas = num_replicas
        self._fixed_rank = rank

        self.epoch = 0
        self.processed_num = 0
        self.processed_indices = set()

        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.indices = []
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch`: a new order (when shuffling), nothing processed yet."""
        self.epoch = epoch
        self.processed_num = 0
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Records that every rank processed one more batch of batch_size samples."""
        self.processed_num += batch_size * self.num_replicas

    def record_indices(self, indices):
        """Records dataset indices this rank processed."""
        self.processed_indices.update(int(i) for i in indices)

    def get_indices(self, batch_idx, batch_size):
        """The dataset indices of this rank's batch batch_idx in the current pass."""
        start = batch_idx * batch_size
        return self.indices[start:min(start + batch_size, len(self.indices))]

    def state_dict(self):
        return dict(epoch=self.epoch, processed_num=self.processed_num,
                    processed_indices=set(self.processed_indices))

    def load_state_dict(self, state_dict):
        """Takes `state_dict`'s progress and repartitions what is left over the current ranks.
        (Horovod's state dicts of either kind load: a missing record is empty.)"""
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict.get("processed_num", 0)
        self.processed_indices = set(state_dict.get("processed_indices", ()))
        self.reset()

    def reset(self):
        """Partitions the epoch's unprocessed samples over the current ranks."""
        self.num_replicas = self._fixed_replicas if self._fixed_replicas is not None else size()
        self.rank = self._fixed_rank if self._fixed_rank is not None else rank()

        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = [i for i in order[self.processed_num:]
                                  if i not in self.processed_indices]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas
        self.indices = self._partition()

    def _partition(self):
        # Padded with the first remaining samples again, as DistributedSampler does, so that
        # every rank has num_samples (and the ranks' batches meet); cyclically, since fewer
        # samples than ranks may remain.
        padded = list(self.remaining_indices)
        while padded and len(padded) < self.total_size:
            padded += self.remaining_indices[:self.total_size - len(padded)]
        return padded[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        self.indices = self._partition()
        return iter(list(self.indices))

    def __len__(self):
        return self.num_samples
