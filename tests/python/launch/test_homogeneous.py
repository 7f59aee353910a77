"""hvd.is_homogeneous() over hosts with different numbers of ranks: ranks started as srun starts
them (SLURM_* placement, rendezvous in a shared directory), so that one machine can play two
nodes; on one host (test_basics.py) every job is homogeneous and the answer could not be wrong."""

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

ASKS = textwrap.dedent("""
    import horovod.torch as hvd
    hvd.init()
    print("RESULT %d %d %s" % (hvd.rank(), hvd.local_size(), hvd.is_homogeneous()), flush=True)
    hvd.shutdown()
""")


def run_like_srun(tasks_per_node, job):
    counts = [int(c) for c in tasks_per_node.split(",")]
    size = sum(counts)
    with tempfile.TemporaryDirectory() as store:
        procs, rank = [], 0
        for node, count in enumerate(counts):
            for local in range(count):
                env = {k: v for k, v in os.environ.items()
                       if not k.startswith(("HVD_", "HOROVOD_", "SLURM_", "OMPI_", "PMIX_"))}
                env.update({"SLURM_PROCID": str(rank), "SLURM_NTASKS": str(size),
                            "SLURM_LOCALID": str(local), "SLURM_NODEID": str(node),
                            "SLURM_STEP_TASKS_PER_NODE": tasks_per_node,
                            "SLURM_JOB_ID": job, "SLURM_STEP_ID": "0",
                            "HVD_STORE_FILE": store, "HVD_TIMEOUT": "30"})
                procs.append(subprocess.Popen([sys.executable, "-c", ASKS], env=env,
                                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                              text=True))
                rank += 1
        outputs = []
        for p in procs:
            try:
                out, _ = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                pytest.fail("a rank hung")
            assert p.returncode == 0, out
            outputs.append(out)
    results = {}
    for out in outputs:
        line = [l for l in out.splitlines() if l.startswith("RESULT ")]
        assert len(line) == 1, out
        _, rank, local_size, answer = line[0].split()
        results[int(rank)] = (int(local_size), answer)
    return results


@pytest.mark.parametrize("tasks, expected", [("2,1", "False"), ("2,2", "True"), ("1,3", "False")])
def test_is_homogeneous_compares_the_ranks_per_host_on_every_rank(tasks, expected):
    results = run_like_srun(tasks, "%d%s" % (os.getpid(), tasks.replace(",", "")))
    counts = [int(c) for c in tasks.split(",")]
    want_sizes = [c for c in counts for _ in range(c)]
    assert sorted(results) == list(range(sum(counts)))
    assert [results[r][0] for r in sorted(results)] == want_sizes
    assert {answer for _, answer in results.values()} == {expected}
