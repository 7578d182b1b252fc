"""Signatures on real torch messages (tests/fixtures/dynamo_errors.json, generated with torch 2.13.0)."""
import json
from pathlib import Path

import pytest

from harness.core.signature import MAX_LEN, innermost_torch_frame, signature

FIXTURES = json.loads((Path(__file__).parent / "fixtures" / "dynamo_errors.json").read_text())["messages"]

PENDING = ("Pending unbacked symbols {%s} not in returned outputs FakeTensor(..., size=(%s, 64)) ((64, 1), 0).\n"
           "Did you accidentally call new_dynamic_size() or item() more times than you needed to in your fake "
           "implementation?\nFor more help, see https://docs.google.com/document/d/1RWrH-3wLEpzR9kCS6gGBNen_-Fs-8PVbWWFE5AcgeWE/edit")
PENDING_SIG = "PendingUnbackedSymbolNotFound: Pending unbacked symbols {uN} not in returned outputs"


@pytest.mark.parametrize("symbols", ["u6", "u7", "u1, u0", "u12, u3, u4"])
def test_pending_unbacked_symbols_are_one_signature(symbols):
    msg = PENDING % (symbols, symbols.split(",")[0])
    assert signature("torch.fx.experimental.symbolic_shapes.PendingUnbackedSymbolNotFound", msg) == PENDING_SIG


def test_pending_unbacked_inside_backend_compiler_failed_is_unwrapped():
    msg = "backend='inductor' raised:\nPendingUnbackedSymbolNotFound: " + PENDING % ("u3", "u3")
    assert signature("torch._dynamo.exc.BackendCompilerFailed", msg) == PENDING_SIG


def test_guard_on_data_dependent_keeps_expression_shape():
    real = FIXTURES["nonzero"]
    sig = signature(real["type"], real["message"], real["traceback"])
    assert sig == "GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(uN, 0)"
    plain = "Could not guard on data-dependent expression Eq(u7, 0) (unhinted: Eq(u7, 0)).  (Size-like symbols: u7)\n\nCaused by: x"
    assert signature("torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode", plain) == sig
    # A different expression is a different bug.
    other = plain.replace("Eq(u7, 0)", "Ne(u7, 1)")
    assert signature("GuardOnDataDependentSymNode", other) != sig


def test_float_unbacked_symbols_normalize_too():
    real = FIXTURES["item_branch"]
    assert signature(real["type"], real["message"]) == (
        "GuardOnDataDependentSymNode: Could not guard on data-dependent expression Eq(zufN, 0.0)")


def test_unsupported_graph_break_keeps_only_its_title():
    # A graph break with a registry id is named by the id (from Dynamo's link) and its gb_type.
    real = FIXTURES["branch"]
    sig = signature(real["type"], real["message"], real["traceback"])
    assert sig == "GB0170: Data-dependent branching"
    assert "Hint" not in sig and "user code" not in sig


def test_fake_tensor_error_names_the_inner_error_without_sizes():
    real = FIXTURES["shape"]
    sig = signature(real["type"], real["message"])
    assert sig.startswith("RuntimeError: Attempting to broadcast a dimension")
    assert "torch.Size([N])" in sig and "[4]" not in sig
    assert len(sig) <= MAX_LEN


def test_addresses_paths_and_line_numbers_are_dropped():
    a = signature("RuntimeError", "bad thing at 0x7f00deadbeef in /home/a/site-packages/torch/_ops.py:812, line 812")
    b = signature("RuntimeError", "bad thing at 0x55aa00 in /opt/b/torch/_ops.py:90, line 90")
    assert a == b == "RuntimeError: bad thing at 0xADDR in _ops.py:N, line N"


def test_cuda_out_of_memory_drops_sizes_and_process_ids():
    msg = ("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which "
           "3.44 MiB is free. Process 12345 has 79.14 GiB memory in use.")
    sig = signature("torch.OutOfMemoryError", msg)
    assert sig == "OutOfMemoryError: CUDA out of memory"
    assert signature("torch.OutOfMemoryError", msg.replace("20.00", "1.50").replace("12345", "7")) == sig


def test_worker_deaths_get_signatures():
    assert signature("killed", "SIGSEGV") == "killed: SIGSEGV"
    assert signature("killed", "SIGABRT") == "killed: SIGABRT"
    assert signature("killed", "memory limit") == "killed: memory limit"
    assert signature("timeout", "") == "timeout"


def test_long_messages_are_cut_to_a_title_fragment():
    sig = signature("ValueError", "word " * 200)
    assert len(sig) <= MAX_LEN and sig.endswith("...")


def test_innermost_torch_frame_of_real_tracebacks():
    assert innermost_torch_frame(FIXTURES["nonzero"]["traceback"]) == "torch/fx/experimental/symbolic_shapes.py:_evaluate_expr"
    assert innermost_torch_frame(FIXTURES["branch"]["traceback"]) == "torch/_dynamo/symbolic_convert.py:raise_jump_graph_break"
    assert innermost_torch_frame(None) is None
    assert innermost_torch_frame('File "/x/y.py", line 3, in f\n') is None


def test_innermost_torch_frame_of_a_faulthandler_dump():
    dump = ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n"
            '  File "/v/lib/torch/_ops.py", line 12 in __call__\n'
            '  File "/v/lib/torch/_dynamo/eval_frame.py", line 99 in _fn\n'
            '  File "/w/model.py", line 5 in forward\n')
    assert innermost_torch_frame(dump) == "torch/_ops.py:__call__"


def test_signature_module_is_stdlib_only():
    # harness/engine/script_runner.py inlines this source into standalone scripts.
    import ast
    import harness.core.signature as mod

    tree = ast.parse(Path(mod.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"re", "__future__"}
