"""Autotune as Horovod users turn it on: horovodrun's --autotune flags, or HOROVOD_AUTOTUNE and
HOROVOD_AUTOTUNE_LOG in the environment, under a Horovod-style training script (plain SGD,
DistributedOptimizer, broadcast_parameters, broadcast_optimizer_state). The search must end
within its budget, write Horovod's log, and change nothing the script computes: at np 2 every
sum is a + b, exact in any fusion or order, so the trained weights are bit-identical to a run
without autotune."""

import csv
import os
import subprocess
import sys
import textwrap

HVDRUN = os.environ.get("HVD_PYTEST_HVDRUN", "hvdrun")

TRAIN = textwrap.dedent("""
    import hashlib, torch
    import horovod.torch as hvd
    hvd.init()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    data = torch.Generator().manual_seed(1 + hvd.rank())
    for step in range(60):
        x = torch.randn(16, 32, generator=data)
        y = torch.randn(16, 8, generator=data)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    print("DIGEST", hvd.rank(), hashlib.sha256(flat.numpy().tobytes()).hexdigest(), flush=True)
""")

HEADER = ["hierarchical_allreduce", "hierarchical_allgather", "torus_allreduce",
          "cache_enabled", "cycle_time_ms", "tensor_fusion_threshold", "score"]


def train(args, extra_env, tmp_path):
    env = dict(os.environ)
    env.pop("HVD_PYTEST_LAUNCHER", None)
    env.update({"HVD_LOG_LEVEL": "info", "HVD_LOG_SUBSYS": "engine"})
    env.update(extra_env)
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    job = subprocess.run([HVDRUN, "-np", "2"] + args + [sys.executable, str(script)], env=env,
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=240)
    assert job.returncode == 0, job.stdout
    digests = {}
    for line in job.stdout.splitlines():
        if "DIGEST" in line:
            words = line.split()
            digests[int(words[-2])] = words[-1]
    assert sorted(digests) == [0, 1], job.stdout
    assert digests[0] == digests[1], job.stdout  # the ranks agree
    return digests[0], job.stdout


def changes(output, rank):
    """Every 'autotune: after cycle N: ...' line of one rank, in order."""
    prefix = "[%d]<stderr>:" % rank
    return [line[line.index("autotune: after cycle"):] for line in output.splitlines()
            if line.startswith(prefix) and "autotune: after cycle" in line]


def check_log(path, budget):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == HEADER
    assert 2 <= len(rows) - 1 <= budget + 1, rows  # samples after the warm-up, then the choice
    for row in rows[1:]:
        values = [float(v) for v in row]
        assert values[0] in (0, 1) and values[1] == 0 and values[2] == 0 and values[3] in (0, 1)
        assert 1 <= values[4] <= 100 and 0 <= values[5] <= 128 and values[6] > 0, row
    return rows


def test_horovodrun_autotune_flags_tune_alike_on_every_rank_and_train_bit_identically(tmp_path):
    plain, _ = train([], {}, tmp_path)
    tuned, output = train(["--autotune", "--autotune-log-file", "autotune.csv",
                           "--autotune-warmup-samples", "1", "--autotune-steps-per-sample", "2",
                           "--autotune-bayes-opt-max-samples", "5"], {}, tmp_path)
    assert tuned == plain
    # The relative log path is hvdrun's directory's; 1 warm-up + 5 + 2 (the cache) samples.
    rows = check_log(tmp_path / "autotune.csv", 5 + 2)
    assert changes(output, 0), output
    assert changes(output, 0) == changes(output, 1), output
    assert "autotune: done after" in output, output
    # The last row is the choice, and the job went on with it (the last change applied).
    chosen = rows[-1]
    last = changes(output, 0)[-1]
    assert "cycle time %g ms" % float(chosen[4]) in last, (chosen, last)
    assert "response cache %s" % ("on" if chosen[3] == "1" else "off") in last, (chosen, last)


def test_horovods_environment_variables_turn_autotune_on(tmp_path):
    log = tmp_path / "env.csv"
    tuned, output = train([], {"HOROVOD_AUTOTUNE": "1", "HOROVOD_AUTOTUNE_LOG": str(log),
                               "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1",
                               "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "2",
                               "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "4",
                               # Set explicitly, as in Horovod: autotune leaves it alone.
                               "HOROVOD_CYCLE_TIME": "2"}, tmp_path)
    rows = check_log(log, 4 + 2)
    assert all(float(row[4]) == 2 for row in rows[1:]), rows
    assert changes(output, 0) == changes(output, 1), output
    assert all("cycle time 2 ms" in line for line in changes(output, 0)), output
