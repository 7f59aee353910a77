"""Process sets (Horovod's horovod.common.process_sets): this hvd runs every op on the global
set of all ranks. The names exist so that scripts passing process_set=hvd.global_process_set
run unchanged; any other set is refused with the reason."""


class ProcessSet:
    """An ordered subset of the job's ranks. Only the global set (all ranks) is supported."""

    def __init__(self, ranks_or_comm=None):
        if ranks_or_comm is not None:
            raise NotImplementedError(
                "hvd does not support process sets other than the global one yet; run the op "
                "on hvd.global_process_set (the default)")
        self.process_set_id = 0

    @property
    def ranks(self):
        from hvd.torch.basics import size
        return list(range(size()))

    def size(self):
        from hvd.torch.basics import size
        return size()

    def rank(self):
        from hvd.torch.basics import rank
        return rank()

    def included(self):
        return True

    def __repr__(self):
        return "ProcessSet(process_set_id=0, ranks=all)"


global_process_set = ProcessSet()


def check_process_set(process_set):
    if process_set is not global_process_set and process_set is not None:
        raise NotImplementedError(
            "hvd does not support process sets other than the global one yet; omit "
            "process_set or pass hvd.global_process_set")


def add_process_set(process_set):
    raise NotImplementedError(
        "hvd.add_process_set: process sets are not supported yet; use the global set")


def remove_process_set(process_set):
    raise NotImplementedError(
        "hvd.remove_process_set: process sets are not supported yet; use the global set")
