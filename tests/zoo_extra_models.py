"""Test-only zoo models, imported by engine workers (extra_modules) for `zoo check` tests."""
from __future__ import annotations

from harness import zoo


def _bad_inputs(device: str) -> zoo.Built:
    raise zoo.BuildError("input_error", "no inputs can be made for this test model")


zoo.register("ZooTestBadInputs", "vl_multimodal", _bad_inputs)
