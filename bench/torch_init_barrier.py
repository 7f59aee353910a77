#!/usr/bin/env python3
"""bench/launch.sh's torch.distributed job: init_process_group (gloo, env://), one barrier, exit.

The same script under hvdrun and under torchrun, so the launch times compare the launchers."""
import torch.distributed as dist

dist.init_process_group(backend="gloo", init_method="env://")
dist.barrier()
dist.destroy_process_group()
