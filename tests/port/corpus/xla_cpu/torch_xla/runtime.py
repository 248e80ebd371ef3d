"""torch_xla.runtime on the CPU."""

from torch_xla.core import xla_model as _xm


def world_size():
    return _xm.xrt_world_size()


def global_ordinal():
    return _xm.get_ordinal()


def local_ordinal():
    return _xm.get_local_ordinal()


def device_type():
    return "CPU"
