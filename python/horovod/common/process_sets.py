"""horovod.common.process_sets is hvd's process-set module (hvd.torch.process_sets): this module
replaces itself by it in sys.modules, so both names reach the same global_process_set."""

import sys

import hvd.torch.process_sets

sys.modules[__name__] = hvd.torch.process_sets
