"""A stand-in torch build for tests/test_modes_wrong.py: a planted backward-only wrong result. While
capture_scalar_outputs is on, the backward graph AOTAutograd compiles (which only a train step reaches: an eval forward
never calls it) returns every gradient plus one. So the flag gives a wrong gradient in `train` and nothing in `eval`:
a wrong result of the train mode alone, whose accuracy reproducer fails as filed only if it runs the train step."""
import torch
import torch._dynamo.backends.common as _common

_aot = _common.aot_module_simplified


def _shifted(compiler):
    def compile_backward(gm, example_inputs, *args, **kwargs):
        out = next(n for n in gm.graph.nodes if n.op == "output")
        with gm.graph.inserting_before(out):
            grads = [gm.graph.call_function(torch.ops.aten.add.Tensor, (g, 1.0))
                     if isinstance(g, torch.fx.Node) and isinstance(g.meta.get("val"), torch.Tensor) else g
                     for g in out.args[0]]
        out.args = (tuple(grads),)
        gm.recompile()
        return compiler(gm, example_inputs, *args, **kwargs)
    return compile_backward


def aot_module_simplified(gm, example_inputs, **kwargs):
    if torch._dynamo.config.capture_scalar_outputs:
        kwargs["bw_compiler"] = _shifted(kwargs["bw_compiler"])
    return _aot(gm, example_inputs, **kwargs)


_common.aot_module_simplified = aot_module_simplified
