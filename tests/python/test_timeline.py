"""HVD_TIMELINE=DYNAMIC (set for this suite): no timeline until start_timeline(); the file
stop_timeline() leaves is valid JSON naming the ops recorded in between."""

import json
import os
import tempfile

import torch

import hvd.torch as hvd


def test_dynamic_timeline_records_the_ops_between_start_and_stop():
    assert os.environ.get("HVD_TIMELINE") == "DYNAMIC"
    directory = hvd.broadcast_object(tempfile.mkdtemp(prefix="hvd-timeline-") if hvd.rank() == 0
                                     else None, root_rank=0, name="timeline.dir")
    path = os.path.join(directory, "timeline.json")
    hvd.allreduce(torch.ones(4), name="before.start")
    hvd.start_timeline(path, mark_cycles=True)
    hvd.allreduce(torch.ones(4), name="inside.timeline")
    hvd.allgather(torch.ones(2, 2), name="gathered.inside")
    hvd.stop_timeline()
    hvd.allreduce(torch.ones(4), name="after.stop")
    hvd.barrier()
    if hvd.rank() != 0:
        return
    with open(path) as f:
        events = json.load(f)  # valid JSON: stop_timeline closed it
    text = json.dumps(events)
    assert "allreduce.inside.timeline" in text
    assert "allgather.gathered.inside" in text
    assert "allreduce.before.start" not in text
    assert "allreduce.after.stop" not in text
    assert "start_time_since_epoch_in_micros" in text
