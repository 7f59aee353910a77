"""horovod.common: the parts of Horovod's common package that scripts import."""
