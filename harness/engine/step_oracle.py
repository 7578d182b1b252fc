"""The accuracy oracle of a mode whose eager answer is not eval's (train, or a half-precision autocast): the first
call's output, and in train its gradients, against eager's in the same mode, in the worker.

- Eager's reference is made once per group, from its own deep copy of the prepared module, before any compile.
- Train: the output and every parameter's gradient are compared at training tolerance (1e-2, as PyTorch's harness
  judges its Hugging Face models in training). A flag that changes only the backward is `wrong` here and invisible
  to eval.
- Beyond tolerance (1e-2 in half precision too, PyTorch's `same()` under amp) a float64 run of the same step, without
  autocast, arbitrates: the compiled answer is `close` where it is as close to float64 as eager's answer is.
The later calls (a second size, a hook, moved weights) are not made in these modes: their references are eval's.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any

import torch

from harness.core.modes import Mode, tolerance
from harness.core.options import Accuracy
from harness.engine import in_mode
from harness.engine.accuracy import Fp64, Verdict, compare
from harness.engine.scenarios import clone, double_copy, to_fp64
from harness.zoo import Built
from harness.zoo.build import SEED

# A mode's tolerances (1e-2 in train and in half precision) are harness.core.modes', its reproducer's too.


class ModeReference:
    """Eager's first call in a mode (its output, and in train its gradients), made once for a group."""

    def __init__(self, built: Built, mode: Mode, device: str, accuracy: Accuracy):
        self.mode, self.device = mode, device
        self.inputs = built.inputs
        self.eager = copy.deepcopy(built.module)   # before any compile: nothing Dynamo did can reach it
        self.tol = tolerance(mode, accuracy.rtol)
        self.answer = self._answer(self.eager, self.inputs, mode)
        self.fp64 = Fp64(self._fp64)

    def _answer(self, module: torch.nn.Module, inputs: dict[str, Any], mode: Mode) -> dict[str, Any]:
        torch.manual_seed(SEED)
        found = in_mode.step(module, module, clone(inputs), mode, self.device)
        return answer_of(found)

    def _fp64(self) -> dict[str, Any]:
        """The same step in float64, without autocast."""
        module = double_copy(self.eager)
        return self._answer(module, to_fp64(self.inputs), dataclasses.replace(self.mode, dtype="float32"))

    def judge(self, output: Any, grads: dict[str, Any] | None) -> Verdict:
        """The compiled step against eager's."""
        return compare(self.answer, answer_of(in_mode.Stepped(output, grads)), rtol=self.tol, atol=self.tol,
                       fp64=self.fp64)


def answer_of(stepped: in_mode.Stepped) -> dict[str, Any]:
    """What is compared: the output, and in train each parameter's gradient (by name; None where it got none)."""
    found: dict[str, Any] = {"output": stepped.output}
    if stepped.grads is not None:
        found["grad"] = {name: g for name, g in stepped.grads.items() if g is not None}
    return found
