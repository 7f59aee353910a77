"""The horovod compatibility package: `import horovod.torch as hvd` gives hvd.torch itself,
so Horovod scripts run unchanged under hvdrun. Nothing of Horovod's own code is here.

horovod.__version__ is the Horovod release whose API hvd implements, since scripts compare it
with the release they need; hvd's own version is hvd.__version__, also here as
horovod.hvd_version."""

from hvd import __version__ as hvd_version  # noqa: F401

__version__ = "0.28.1"
