"""Jobs this test starts itself under hvdrun (it runs as one plain process): a rank that dies
turns into HorovodInternalError on the others within the timeout."""

import os
import subprocess
import sys
import textwrap
import time

HVDRUN = os.environ.get("HVD_PYTEST_HVDRUN", "hvdrun")

DIES = textwrap.dedent("""
    import os, sys, time, torch
    import horovod.torch as hvd
    hvd.init()
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [2.0, 2.0]
    if hvd.rank() == 1:
        os._exit(0)  # gone without a word: no shutdown, its connections just close
    start = time.monotonic()
    try:
        while True:  # ops until the engine notices the peer is gone
            hvd.allreduce(torch.ones(2), name="after.death")
    except hvd.HorovodInternalError as e:
        print("RESULT internal-error %.2f %s" % (time.monotonic() - start, e), flush=True)
        sys.exit(0)
""")


def run_job(script, np, timeout, extra_env=None):
    env = dict(os.environ)
    env.pop("HVD_PYTEST_LAUNCHER", None)
    env.update(extra_env or {})
    return subprocess.run([HVDRUN, "-np", str(np), sys.executable, "-c", script], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)


def test_a_rank_that_dies_is_a_horovod_internal_error_on_the_others_within_the_timeout():
    started = time.monotonic()
    job = run_job(DIES, 2, timeout=90, extra_env={"HVD_TIMEOUT": "10"})
    elapsed = time.monotonic() - started
    lines = [line for line in job.stdout.splitlines() if "RESULT" in line]
    assert job.returncode == 0, job.stdout
    assert len(lines) == 1 and "internal-error" in lines[0], job.stdout
    words = lines[0].split()
    waited = float(words[words.index("RESULT") + 2])
    assert waited < 10 + 5, lines[0]  # within HVD_TIMEOUT, with slack for a loaded machine
    assert "rank 1" in lines[0], lines[0]  # the error names the rank that died
    assert elapsed < 60, elapsed


# Rank 1 leaves while rank 0 has an op pending that rank 1 never submits and is busy between
# ops (as a rank that sleeps through its step); rank 0's next submit and its wait for the
# pending op both raise HorovodInternalError (what Horovod's recovery code catches), naming rank
# 1 and what it did. Rank 1 exits 0, so the job itself goes on.
LEAVES = textwrap.dedent("""
    import os, sys, time, torch
    import horovod.torch as hvd
    how = sys.argv[1]
    hvd.init()
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [2.0, 2.0]
    if hvd.rank() == 1:
        hvd.barrier()
        if how == "shutdown":
            hvd.shutdown()
        sys.exit(0)  # "exit": the program ends without hvd.shutdown()
    pending = hvd.allreduce_async(torch.ones(2), name="only.rank0")
    hvd.barrier()
    time.sleep(1.5)  # rank 1 is gone by now
    for what, call in (("submit", lambda: hvd.allreduce(torch.ones(2), name="next")),
                       ("wait", lambda: hvd.synchronize(pending))):
        try:
            call()
            print("RESULT %s accepted" % what, flush=True)
        except hvd.HorovodInternalError as e:
            print("RESULT %s internal-error %s" % (what, e), flush=True)
        except Exception as e:
            print("RESULT %s %s %s" % (what, type(e).__name__, e), flush=True)
""")


def test_a_peer_that_shuts_down_or_exits_is_a_horovod_internal_error_naming_it():
    for how, said in (("shutdown", "rank 1 shut hvd down"), ("exit", "rank 1 exited")):
        env = dict(os.environ, HVD_TIMEOUT="20")
        env.pop("HVD_PYTEST_LAUNCHER", None)
        job = subprocess.run([HVDRUN, "-np", "2", sys.executable, "-c", LEAVES, how], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=90)
        lines = [line[line.index("RESULT"):] for line in job.stdout.splitlines()
                 if "RESULT" in line]
        assert job.returncode == 0, job.stdout
        assert len(lines) == 2, job.stdout
        for line in lines:
            assert "internal-error" in line and said in line, (how, line)
