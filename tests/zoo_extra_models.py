"""Test-only zoo models, imported by engine workers (extra_modules) for `zoo check` tests, and test jobs."""
from __future__ import annotations

import time

from harness import zoo


def _bad_inputs(device: str) -> zoo.Built:
    raise zoo.BuildError("input_error", "no inputs can be made for this test model")


zoo.register("ZooTestBadInputs", "vl_multimodal", _bad_inputs)


# Jobs for the engine's run_job (called in workers by their module path, "tests.zoo_extra_models:<name>").

def what_it_is(model: str, device: str) -> dict:
    """Build the model from the lock and answer what it is: its stratum, input names and parameter count."""
    built = zoo.build(model, device)
    return {"model": model, "stratum": built.stratum, "inputs": sorted(built.inputs),
            "parameters": sum(p.numel() for p in built.module.parameters())}


def no_answer(model: str, device: str) -> dict:
    """A job that breaks on every model."""
    raise RuntimeError(f"this job has no answer for {model}")


def never_ends(model: str, device: str) -> dict:
    """A job that hangs (the engine's timeout ends it)."""
    while True:
        time.sleep(0.05)


def not_finite(model: str, device: str) -> dict:
    """A job whose answer holds what JSON and a record have no number for: NaN and the infinities (an output
    metric's, a config's limits)."""
    return {"model": model, "max_error": float("nan"), "limits": [0.0, float("inf"), -float("inf")]}
