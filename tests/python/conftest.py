"""The hvd.torch suite runs on every rank of an hvdrun job (tests/python/tests.cmake: np 2 and
np 3): each rank runs the same tests in the same order, so their collectives meet. Tests that
start jobs of their own (a rank that dies) are in launch/, run as one plain process
(HVD_PYTEST_LAUNCHER=1) that starts hvdrun itself; the job's run ignores that folder."""

import os

import pytest
import torch

import hvd.torch as hvd

IN_JOB = os.environ.get("HVD_PYTEST_LAUNCHER") != "1"


@pytest.fixture(scope="session", autouse=True)
def job():
    if not IN_JOB:
        yield None
        return
    torch.manual_seed(0)
    torch.set_num_threads(1)
    hvd.init()
    yield hvd
    hvd.shutdown()


# Every dtype hvd.torch accepts, and which of them are floating point.
DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]
