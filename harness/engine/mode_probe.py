"""What `zoo lock` seals as an entry's modes record (harness.zoo.mode_record): each probed axis value alone, the
model prepared and stepped once in eager (harness.engine.in_mode), as a sweep's worker checks a mode before its items.

Apart from in_mode because a reproducer inlines that module where flagsweep is not installed (bot/verify/script.py):
nothing there may import the zoo.
"""
from __future__ import annotations

import copy
from typing import Any

import torch

from harness.core.modes import Mode
from harness.engine.in_mode import CannotRun, prepare, step
from harness.zoo import mode_record


def probe(module: torch.nn.Module, inputs: dict[str, Any], device: str = "cpu") -> dict[str, dict[str, str | None]]:
    """The modes record of a built model: for each probed axis value (harness.zoo.mode_record.probes), a deep copy of
    the module prepared and stepped once in eager; null where it ran, else why not (one line)."""
    record: dict[str, dict[str, str | None]] = {}
    for mode in mode_record.probes():
        (axis, value), = mode.changed().items()
        record.setdefault(axis, {})[value] = why_not(module, inputs, mode, device)
    return record


def why_not(module: torch.nn.Module, inputs: dict[str, Any], mode: Mode, device: str = "cpu") -> str | None:
    """None when a copy of the module prepared for `mode` runs one step of it in eager; else why not (one line)."""
    try:
        own = copy.deepcopy(module)
        prepare(own, mode)
        step(own, own, {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}, mode, device)
    except CannotRun as exc:
        return str(exc).splitlines()[0][:300]
    except Exception as exc:   # what eager raises in this mode is why the mode cannot run
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"{type(exc).__name__}: {first[:200]}"
    return None
