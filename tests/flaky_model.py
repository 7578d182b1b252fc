"""Test-only zoo models, imported by sweep workers through SweepOptions(extra_modules=["tests.flaky_model"]).

`FlakyToyModel` crashes under torch.compile on every other build: each build
takes the next number from a counter file (path in FLAGSWEEP_TEST_COUNTER, set
by the test) and an odd number builds the crashing variant. `SolidCrashToyModel`
crashes under compile every time. Both run fine in eager mode, so the worker's
eager check (the first forward) passes and only the compiled call fails.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

import torch

from harness import zoo
from harness.zoo.build import Built


class _Toy(torch.nn.Module):
    def __init__(self, crash: bool) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.crash = crash
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The worker runs one eager forward before compiling; the crashing variant fails from the
        # second call on. (Raising only under is_compiling() is not enough: Dynamo falls back to
        # eager on a traced raise, where is_compiling() is False, and the item ends "ok".)
        if self.crash and self.calls > 0:
            raise RuntimeError("toy crash under compile")
        self.calls += 1
        return self.linear(x).relu()


def _next_number() -> int:
    """Take the next number from the counter file; a lock keeps parallel workers apart."""
    path = Path(os.environ["FLAGSWEEP_TEST_COUNTER"])
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        n = int(f.read().strip() or 0)
        f.seek(0)
        f.truncate()
        f.write(str(n + 1))
    return n


def _built(crash: bool, device: str) -> Built:
    torch.manual_seed(0)
    return Built(module=_Toy(crash).eval().to(device), inputs={"x": torch.randn(2, 4, device=device)},
                 fingerprint="toy-v1", stratum="vision_other")


def build_flaky(device: str) -> Built:
    """Crashes under compile when the counter is odd."""
    return _built(_next_number() % 2 == 1, device)


def build_solid_crash(device: str) -> Built:
    """Crashes under compile every time."""
    return _built(True, device)


zoo.register("FlakyToyModel", "vision_other", build_flaky)
zoo.register("SolidCrashToyModel", "vision_other", build_solid_crash)
