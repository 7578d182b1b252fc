"""The stored build: what a reproducer needs to rebuild one model without the zoo, as plain data.

One writer, the worker (harness/engine/worker.py, right after the zoo built the model); one stored form,
`state.runs.record_model` (and a shard export's "builds"); its readers are the run view and the verify step.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping

from harness.core.names import check_model
from harness.core.record import parse


@dataclass(frozen=True)
class ModelBuild:
    """One model's build as the worker made it: its transformers config class and fields, input spec and seed."""

    model: str
    config_class: str                  # the transformers config class name ("BertConfig")
    config: dict[str, Any]             # the config's fields as the lock sets them (sub-configs as dicts)
    spec: dict[str, Any]               # input name -> its spec (shape, dtype, kind, ...), harness.zoo.inputs
    seed: int                          # the seed the weights and inputs were drawn with
    fingerprint: str | None = None     # the model's build fingerprint (harness.zoo.fingerprint)
    transformers_version: str | None = None
    # The second input spec the worker's second_size call used (the sealed one, or the rule's first that ran in
    # eager); None: no such call was made (the checks off, none runs). The accuracy reproducer renders this one.
    second_spec: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stored form (JSON-ready); without a second spec, the form it had before one was kept (byte for byte:
        stored shrinks and hashes of a build stay as they were)."""
        found = asdict(self)
        if found["second_spec"] is None:
            del found["second_spec"]
        found["config"] = _encoded(found["config"])
        return found

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ModelBuild":
        """Read the stored form; RecordError naming an unknown or missing field."""
        found = parse(cls, data, "stored build")
        check_model(found.model, "stored build")
        return replace(found, config=_decoded(found.config))


# A config value that is not a finite float (Mamba 2's `time_step_limit` is [0.0, inf]) in the stored form: JSON has
# no such number and a record refuses one, so it is written as this one-key object and read back as the float.
NOT_FINITE = "not_finite"


def _encoded(value: Any) -> Any:
    """`value` with every non-finite float, at any depth, as {NOT_FINITE: "inf" | "-inf" | "nan"}."""
    if isinstance(value, float) and not math.isfinite(value):
        return {NOT_FINITE: str(value)}
    if isinstance(value, dict):
        return {k: _encoded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encoded(v) for v in value]
    return value


def _decoded(value: Any) -> Any:
    """`_encoded` undone."""
    if isinstance(value, dict) and value.keys() == {NOT_FINITE} and value[NOT_FINITE] in ("inf", "-inf", "nan"):
        return float(value[NOT_FINITE])
    if isinstance(value, dict):
        return {k: _decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    return value
