"""An elastic training script written as a Horovod user writes one (hvd.elastic.run, TorchState,
commit), used by the elastic job tests. Each step's batch depends only on the step, and the
gradients are averaged over the ranks, so the parameters after N steps are the same whatever the
job's size was at each step: a step lost or run twice shows in the final parameters.

HVD_TEST_STEPS: steps to train; HVD_TEST_COMMIT: commit every so many steps; HVD_TEST_SLEEP:
seconds per step; HVD_TEST_FAIL: "worker:step:how[,...]" makes that worker fail after that step
(how: exit, exit0, raise, kill); HVD_TEST_FAIL_ON_RESET: a worker that exits 1 in its reset
callback (while the others sync); HVD_TEST_INJECT: "worker:step", that worker puts a host-change notice into
state._host_messages by hand, as Horovod's test scripts do; HVD_TEST_MARK: a file each worker appends "worker step" to after each
commit, so a test can act when training has reached a step; HVD_TEST_PROCESS_SET=1: the job
uses dynamic process sets, declares a set of ranks 0 and 1 at start and in its reset callback
(a round's sets end with it), and checks an allreduce over it at every step.
"""

import os
import signal
import sys
import time

import torch
import torch.nn.functional as F

import horovod.torch as hvd

STEPS = int(os.environ.get("HVD_TEST_STEPS", "40"))
COMMIT = int(os.environ.get("HVD_TEST_COMMIT", "2"))
SLEEP = float(os.environ.get("HVD_TEST_SLEEP", "0.05"))
WORKER = int(os.environ["HVD_WORKER_ID"])
FAILS = {}
for item in filter(None, os.environ.get("HVD_TEST_FAIL", "").split(",")):
    worker, step, how = item.split(":")
    FAILS[(int(worker), int(step))] = how


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(8, 4, generator=g, dtype=torch.float64)
    return x, x.sum(1, keepdim=True) * 0.5


def build():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, optimizer


def reference(steps):
    """The parameters after `steps` steps in one process."""
    model, optimizer = build()
    for step in range(steps):
        x, y = batch(step)
        optimizer.zero_grad()
        F.mse_loss(model(x), y).backward()
        optimizer.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()


def declare_set():
    """The set of ranks 0 and 1 for this round (None at size 1)."""
    return hvd.add_process_set([0, 1]) if hvd.size() >= 2 else None


def main():
    use_set = os.environ.get("HVD_TEST_PROCESS_SET") == "1"
    hvd.init(process_sets="dynamic" if use_set else None)
    pair = [declare_set() if use_set else None]
    model, optimizer = build()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, step=0)
    resets = []

    def on_reset():
        resets.append((hvd.size(), state.step))
        if use_set:
            pair[0] = declare_set()
        if os.environ.get("HVD_TEST_FAIL_ON_RESET") == str(WORKER):
            os._exit(1)

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        while state.step < STEPS:
            x, y = batch(state.step)
            optimizer.zero_grad()
            F.mse_loss(model(x), y).backward()
            optimizer.step()
            state.step += 1
            if pair[0] is not None and hvd.rank() in (0, 1):
                total = hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=pair[0])
                assert total.item() == 2.0, total
            print("STEP worker=%d rank=%d size=%d step=%d" % (WORKER, hvd.rank(), hvd.size(),
                                                            state.step), flush=True)
            if os.environ.get("HVD_TEST_INJECT") == "%d:%d" % (WORKER, state.step):
                # What Horovod's own test scripts do: a host-change notice put in by hand.
                state._host_messages.put((time.time(), hvd.elastic.HostUpdateResult.added))
            how = FAILS.get((WORKER, state.step))
            if how == "exit":
                os._exit(1)
            elif how == "exit0":
                os._exit(0)
            elif how == "raise":
                raise RuntimeError("worker %d fails at step %d" % (WORKER, state.step))
            elif how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(SLEEP)
            if state.step % COMMIT == 0:
                state.commit()
                mark = os.environ.get("HVD_TEST_MARK")
                if mark:
                    with open(mark, "a") as f:
                        f.write("%d %d\n" % (WORKER, state.step))

    train(state)
    params = torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()
    expected = reference(STEPS)
    error = max(abs(a - b) for a, b in zip(params, expected))
    # resets: "size/step" seen by each reset callback, ";"-separated.
    print("DONE worker=%d rank=%d size=%d step=%d error=%.3g resets=%s" % (
        WORKER, hvd.rank(), hvd.size(), state.step, error,
        ";".join("%d/%d" % r for r in resets)), flush=True)


if __name__ == "__main__":
    main()
