"""The names Horovod's elastic scripts import reach hvd's one elastic package: hvd.elastic of
`import horovod.torch as hvd`, horovod.torch.elastic (and its modules), horovod.common.elastic
and the exceptions in horovod.common.exceptions; a second copy of a module would have classes
of its own, which isinstance checks and the handler registry would not recognise."""

import subprocess
import sys

import horovod.torch
import hvd.torch


def test_horovod_names_are_hvds_modules_and_classes():
    import horovod.common.elastic
    import horovod.common.exceptions
    import horovod.torch.elastic
    import horovod.torch.elastic.sampler
    import horovod.torch.elastic.state
    from horovod.common.elastic import ObjectState, State, run_fn
    from horovod.torch.elastic import ElasticSampler, TorchState, run

    elastic = hvd.torch.elastic
    assert horovod.torch.elastic is elastic
    assert horovod.torch.elastic.sampler is sys.modules["hvd.torch.elastic.sampler"]
    assert horovod.torch.elastic.state is sys.modules["hvd.torch.elastic.state"]
    assert horovod.common.elastic is sys.modules["hvd.torch.elastic.common"]
    assert (TorchState, ElasticSampler, run) == (elastic.TorchState, elastic.ElasticSampler,
                                                 elastic.run)
    assert (ObjectState, State, run_fn) == (elastic.ObjectState, elastic.State, elastic.run_fn)
    assert issubclass(TorchState, ObjectState) and issubclass(ObjectState, State)
    assert horovod.common.exceptions.HostsUpdatedInterrupt is hvd.torch.HostsUpdatedInterrupt
    assert horovod.common.exceptions.HorovodInternalError is hvd.torch.HorovodInternalError
    assert (elastic.HostUpdateResult.no_update, elastic.HostUpdateResult.removed,
            elastic.HostUpdateResult.added, elastic.HostUpdateResult.mixed) == (0, 1, 2, 3)


def test_horovod_torch_elastic_imported_first_in_a_fresh_interpreter_is_hvds():
    script = ("from horovod.torch.elastic import TorchState\n"
              "import horovod.torch as hvd, hvd.torch.elastic as e, sys\n"
              "assert TorchState is e.TorchState and hvd.elastic is e\n"
              "assert not [m for m in sys.modules if m.startswith('horovod.torch.elastic') and\n"
              "            sys.modules[m] is not sys.modules['hvd' + m[len('horovod'):]]]\n"
              "print('same')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "same", done.stderr
