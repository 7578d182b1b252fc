"""Test-only models for the sweep engine, registered with the zoo when a worker imports this module.

Workers import it through SweepOptions(extra_modules=["tests.fault_models"]).
Fault models misbehave only while compiling under capture_scalar_outputs: the
eager check and the baseline compile pass, so a test sees the crash land on
exactly one item while the rest of the model's items stay correct.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time

import torch

from harness.zoo import Built, register

FLAG = "capture_scalar_outputs"
FAULTS = ("raise", "segfault", "abort", "hang", "oom", "sigkill", "cuda_oom", "oom_shared")
MEMORY_CHUNK_MB = 256


def _shares_the_device() -> bool:
    """Whether this worker was started with a share of the device (the pool's normal workers) rather than all of
    it (an out-of-memory item's re-run alone): its startup argument says so."""
    return json.loads(sys.argv[1])["memory_fraction"] < 1.0


def _out_of_memory() -> None:
    # torch.cuda.OutOfMemoryError is constructible on a CPU-only torch: the real type, as the allocator raises it.
    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
                                      "of 79.19 GiB of which 1.06 GiB is free. Process 4242 has 78.10 GiB in use.")


def _flag_on() -> bool:
    return bool(torch._dynamo.config.capture_scalar_outputs)


@torch.compiler.disable
def _fault(kind: str) -> None:
    """Runs eagerly even inside a compiled forward (a graph break), where the patched flag is visible."""
    if not _flag_on():
        return
    if kind == "raise":
        raise RuntimeError("injected fault at 0xdeadbeef in layer 3")
    if kind == "segfault":
        ctypes.string_at(0)
    if kind == "abort":
        os.abort()
    if kind == "hang":
        while True:
            time.sleep(0.05)
    if kind == "oom":
        hoard = []
        while True:  # touch every page so RSS really grows; the parent's limit must stop this
            hoard.append(torch.ones(MEMORY_CHUNK_MB * 2**18))
            time.sleep(0.02)
    if kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "cuda_oom":         # out of memory even alone
        _out_of_memory()
    if kind == "oom_shared" and _shares_the_device():   # out of memory only beside other workers
        _out_of_memory()


class FaultModel(torch.nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        _fault(self.kind)
        return y * 2


class ItemModel(torch.nn.Module):
    """`.item()` graph-breaks by default; capture_scalar_outputs traces it: 2 graphs -> 1."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.linear(x).abs().sum().item()
        return x * scale + 1


@torch.library.custom_op("flagsweep_test::positive", mutates_args=())
def positive(x: torch.Tensor) -> torch.Tensor:
    """Positive entries: an op whose output size depends on the data."""
    return x[x > 0].clone()


@positive.register_fake
def _positive_fake(x: torch.Tensor) -> torch.Tensor:
    ctx = torch.library.get_ctx()
    ctx.new_dynamic_size()  # one unbacked size too many: the fake-impl bug Dynamo reports
    return x.new_empty(ctx.new_dynamic_size())


class DynamicOutputModel(torch.nn.Module):
    """Graph-breaks on the data-dependent op by default; capture_dynamic_output_shape_ops traces it and crashes
    with a real PendingUnbackedSymbolNotFound."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.flagsweep_test.positive(x).sum() + x


def _builder(make, stratum: str):
    def build(device: str) -> Built:
        torch.manual_seed(0)
        module = make().eval().to(device)
        return Built(module=module, inputs={"x": torch.arange(-2.0, 2.0).to(device)}, text_only=False,
                     fingerprint="test-" + stratum, stratum=stratum)
    return build


def _broken_build(device: str) -> Built:
    from harness.zoo import BuildError

    raise BuildError("create_error", "TypeError: injected: config has no attribute hidden_size")


class EagerBroken(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ torch.ones(3, 3)  # wrong shape: fails without any compile


for _kind in FAULTS:
    register(f"Fault_{_kind}", "decoder_llm", _builder(lambda k=_kind: FaultModel(k), "decoder_llm"))
register("TinyItemModel", "decoder_llm", _builder(ItemModel, "decoder_llm"))
register("TinyDynamicOutputModel", "vision_other", _builder(DynamicOutputModel, "vision_other"))
register("BrokenCreateModel", "encoder_decoder", _broken_build)
register("BrokenEagerModel", "vl_multimodal", _builder(EagerBroken, "vl_multimodal"))
