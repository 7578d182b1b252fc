"""A stand-in torch build for tests/test_modes_issues.py: a planted backward-only bug. While capture_scalar_outputs is
on, AOTAutograd (which only a train step reaches: an eval forward under the counting or the eager backend never calls
it) raises. So the flag crashes every model in `train` and none in `eval`: an issue of the train mode alone, whose
reproducer fails as filed only if it runs the train step."""
import torch
import torch._dynamo.backends.common as _common

_aot = _common.aot_module_simplified


def aot_module_simplified(*args, **kwargs):
    if torch._dynamo.config.capture_scalar_outputs:
        raise RuntimeError("stand-in build: the backward of a graph with captured scalars")
    return _aot(*args, **kwargs)


_common.aot_module_simplified = aot_module_simplified
