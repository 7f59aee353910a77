"""hvd.torch process sets on CUDA tensors, for scripts/gpu-check.sh (plain Python: the GPU
machine may have no pytest). Each rank is a set of its own, [r]: its device collectives get a
communicator of their own (over NCCL a one-rank communicator, which one GPU shared by several
ranks allows), and with the host-staged backend and 4 ranks also the pairs [0, 1] and [2, 3].
Every check prints PASS or FAIL; the exit status is 1 if any failed, 77 (skip) without CUDA.

    HVD_RANK=0 HVD_SIZE=2 ... PYTHONPATH=python python3 tests/python/gpu/cuda_process_sets.py
"""

import os
import sys
import traceback

import torch

import hvd.torch as hvd


def device():
    return torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())


def exercise(ps):
    """Every op kind on set `ps` with CUDA tensors, exact values by the set's job ranks."""
    d = device()
    members = ps.ranks
    k = len(members)
    me = hvd.rank()
    tag = "ps%d" % ps.process_set_id
    base = torch.arange(4096, dtype=torch.float32) % 7
    out = hvd.allreduce((base + me).to(d), op=hvd.Sum, name=tag + ".sum", process_set=ps)
    assert out.device == d, out.device
    assert torch.equal(out.cpu(), sum(base + m for m in members)), out.cpu()[:4]
    avg = hvd.allreduce((base + me).to(d), name=tag + ".avg", process_set=ps)
    assert torch.allclose(avg.cpu(), sum(base + m for m in members) / k)
    rows = torch.full((ps.rank() + 1, 2), me, dtype=torch.int32, device=d)
    gathered = hvd.allgather(rows, name=tag + ".gather", process_set=ps)
    want = torch.cat([torch.full((i + 1, 2), m, dtype=torch.int32) for i, m in enumerate(members)])
    assert torch.equal(gathered.cpu(), want), gathered.cpu()
    root = members[-1]
    b = hvd.broadcast(torch.full((17,), float(me), device=d), root, name=tag + ".bcast",
                      process_set=ps)
    assert torch.equal(b.cpu(), torch.full((17,), float(root)))
    sent = torch.arange(k, dtype=torch.int64, device=d) + 10 * me
    got = hvd.alltoall(sent, name=tag + ".a2a", process_set=ps)
    assert torch.equal(got.cpu(), torch.tensor([10 * m + ps.rank() for m in members])), got
    hvd.barrier(process_set=ps)


def main():
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        return 77
    size = int(os.environ["HVD_SIZE"])
    staged = os.environ.get("HVD_GPU_BACKEND") == "host"
    sets = [hvd.ProcessSet([r]) for r in range(size)]
    if staged and size == 4:
        sets += [hvd.ProcessSet([0, 1]), hvd.ProcessSet([2, 3])]
    hvd.init(process_sets=sets)
    failed = 0
    for ps in sets:
        if not ps.included():
            continue
        try:
            exercise(ps)
            print("rank %d PASS process set %s" % (hvd.rank(), ps.ranks), flush=True)
        except Exception:  # report every set, then fail the run
            failed += 1
            print("rank %d FAIL process set %s\n%s" % (hvd.rank(), ps.ranks,
                                                       traceback.format_exc()), flush=True)
    hvd.shutdown()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
