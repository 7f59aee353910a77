"""The horovod compatibility package: `import horovod.torch as hvd` gives hvd.torch itself,
so Horovod scripts run unchanged under hvdrun. Nothing of Horovod's own code is here."""

from hvd import __version__  # noqa: F401
