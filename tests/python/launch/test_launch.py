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
