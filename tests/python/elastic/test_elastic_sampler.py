"""hvd.elastic.ElasticSampler: the epoch's samples partitioned over the ranks without overlap,
the order reshuffled by seed + epoch as Horovod's is, and after a reset (load_state_dict at
another size) exactly the unprocessed samples partitioned again. Most tests play every rank of
a job in this process (num_replicas=, rank=); the last ones use the job's ranks."""

import random

import pytest
import torch

import hvd.torch as hvd

ElasticSampler = hvd.elastic.ElasticSampler


def samplers(n, replicas, **kwargs):
    return [ElasticSampler(range(n), num_replicas=replicas, rank=r, **kwargs)
            for r in range(replicas)]


def horovod_order(n, seed, epoch):
    order = list(range(n))
    random.Random(seed + epoch).shuffle(order)
    return order


@pytest.mark.parametrize("n,replicas", [(24, 3), (23, 3), (5, 4), (2, 3), (1, 4), (16, 1)])
def test_each_rank_gets_its_share_and_together_they_cover_the_epoch_once(n, replicas):
    parts = [list(s) for s in samplers(n, replicas, seed=7)]
    share = -(-n // replicas)
    assert [len(p) for p in parts] == [share] * replicas
    everything = [i for p in parts for i in p]
    assert sorted(set(everything)) == list(range(n))
    # Padding repeats the first samples of the order, only as many as evens the shares out.
    order = horovod_order(n, 7, 0)
    repeated = sorted(i for i in set(everything) for _ in range(everything.count(i) - 1))
    assert repeated == sorted((order * replicas)[:share * replicas - n])
    # Rank r takes the r-th sample of the order, the (r + replicas)-th, ...
    assert [p[0] for p in parts] == [order[r % n] for r in range(replicas)]


def test_the_order_is_horovods_shuffle_by_seed_plus_epoch_and_is_the_same_on_every_rank():
    n = 40
    a, b = ElasticSampler(range(n), seed=3, num_replicas=1, rank=0), \
        ElasticSampler(range(n), seed=3, num_replicas=1, rank=0)
    assert list(a) == list(b) == horovod_order(n, 3, 0)
    a.set_epoch(1)
    assert list(a) == horovod_order(n, 3, 1) != horovod_order(n, 3, 0)
    b.set_epoch(1)
    assert list(b) == list(a)
    other_seed = ElasticSampler(range(n), seed=4, num_replicas=1, rank=0)
    assert list(other_seed) != horovod_order(n, 3, 0)
    plain = ElasticSampler(range(n), shuffle=False, num_replicas=1, rank=0)
    plain.set_epoch(5)
    assert list(plain) == list(range(n))


@pytest.mark.parametrize("old,new", [(2, 3), (3, 2), (4, 1), (1, 4), (3, 5)])
def test_after_a_size_change_exactly_the_unprocessed_samples_are_partitioned(old, new):
    n, batch_size, batches = 50, 3, 2
    ranks = samplers(n, old, seed=11)
    for s in ranks:
        s.set_epoch(4)
    processed = set()
    for s in ranks:
        for b in range(batches):
            processed.update(s.get_indices(b, batch_size))
            s.record_batch(b, batch_size)
    assert ranks[0].processed_num == batches * batch_size * old
    assert len(processed) == batches * batch_size * old  # no sample twice

    state = ranks[0].state_dict()
    assert ranks[1 % old].state_dict() == state  # every rank's record is the same
    after = samplers(n, new, seed=11)
    for s in after:
        s.load_state_dict(state)
    assert all(s.epoch == 4 for s in after)
    parts = [list(s) for s in after]
    left = n - len(processed)
    assert [len(p) for p in parts] == [-(-left // new)] * new
    covered = {i for p in parts for i in p}
    assert covered == set(range(n)) - processed
    # The remaining samples in the epoch's order, the processed prefix cut off.
    assert after[0].remaining_indices == horovod_order(n, 11, 4)[len(processed):]


def test_recorded_indices_are_left_out_after_a_reset_and_set_epoch_clears_them():
    n, batch_size = 30, 4
    ranks = samplers(n, 3, seed=1)
    done = set()
    for s in ranks:
        list(s)
        batch = s.get_indices(1, batch_size)
        assert batch == s.indices[batch_size:2 * batch_size]
        s.record_indices(torch.tensor(batch))
        done.update(batch)
    union = set().union(*(s.processed_indices for s in ranks))
    assert union == done and len(done) == 3 * batch_size
    after = samplers(n, 2, seed=1)
    for s in after:
        s.load_state_dict(dict(ranks[0].state_dict(), processed_indices=union))
    assert {i for s in after for i in s} == set(range(n)) - done
    after[0].set_epoch(1)
    assert after[0].processed_indices == set() and after[0].processed_num == 0
    assert len(after[0]) == n // 2


def test_nothing_left_gives_empty_shares():
    s = ElasticSampler(range(6), num_replicas=2, rank=1)
    s.load_state_dict({"epoch": 0, "processed_num": 6})
    assert len(s) == 0 and list(s) == []


def test_in_the_job_the_ranks_shares_are_disjoint_and_cover_the_dataset():
    n = 10 * hvd.size()
    sampler = ElasticSampler(list(range(n)), seed=5)
    assert (sampler.num_replicas, sampler.rank) == (hvd.size(), hvd.rank())
    shares = hvd.allgather_object(list(sampler), name="elastic.sampler.shares")
    assert sorted(i for share in shares for i in share) == list(range(n))


def test_torch_state_saves_restores_and_syncs_the_sampler():
    batch_size = 2
    n = 8 * hvd.size()
    sampler = ElasticSampler(list(range(n)), seed=2)
    # Each rank starts elsewhere: the sync must bring rank 0's epoch and count to all.
    sampler.set_epoch(10 + hvd.rank())
    state = hvd.elastic.TorchState(sampler=sampler)
    state.sync()
    assert sampler.epoch == 10 and sampler.processed_num == 0

    sampler.record_batch(0, batch_size)
    sampler.record_batch(1, batch_size)
    state.commit()
    sampler.record_batch(2, batch_size)
    state.restore()
    assert sampler.processed_num == 2 * batch_size * hvd.size()
    assert len(sampler) == (n - 2 * batch_size * hvd.size()) // hvd.size()

    # Indices recorded one by one are united over the ranks by the sync.
    mine = sampler.get_indices(0, batch_size)
    sampler.record_indices(mine)
    state.sync()
    everyone = hvd.allgather_object(sorted(mine), name="elastic.sampler.mine")
    assert sampler.processed_indices == {i for part in everyone for i in part}
    left = set(sampler.remaining_indices)
    assert not left & sampler.processed_indices
    assert len(left) == n - 3 * batch_size * hvd.size()
