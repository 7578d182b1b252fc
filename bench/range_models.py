"""A bench-only model whose crash is switched by the "build" under test (not a test; see bench/stage_range.py).

Imported by the parent and by each worker (SweepOptions.extra_modules). Under
capture_scalar_outputs it raises when FLAGSWEEP_BENCH_BROKEN=1 in the worker's
environment, which the bench sets from the nightly date being swept: a regression
that lands on a known nightly, compiled for real.
"""
from __future__ import annotations

import os

import torch

from harness.zoo import Built, register


@torch.compiler.disable
def _maybe_break() -> None:
    if torch._dynamo.config.capture_scalar_outputs and os.environ.get("FLAGSWEEP_BENCH_BROKEN") == "1":
        raise RuntimeError("bench regression in layer 3")


class RegressingModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        _maybe_break()
        return y.relu() * 2


def _build(device: str) -> Built:
    torch.manual_seed(0)
    return Built(module=RegressingModel().eval().to(device), inputs={"x": torch.randn(2, 8).to(device)},
                 text_only=False, fingerprint="bench-regressing", stratum="decoder_llm")


register("BenchRegressingModel", "decoder_llm", _build)
