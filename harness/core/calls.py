"""Trace on A, run on B: the calls an item makes to its compiled model, and what each one found.

The first call is at the locked inputs; the later ones follow a scenario (DESIGN "Words"): `second_size` (the lock's
second input spec), `hook_added` (a forward hook that changes a submodule's output, registered after the first
call), `weights_updated` (parameters changed in place, as an optimizer step does). Each call records the graphs
Dynamo compiled during it, its recompiles with Dynamo's reasons, and an accuracy verdict against eager after the
same steps. One writer (the worker, harness.engine), stored inside the Outcome; the rules over them live in
harness.core.correctness.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Mapping

from harness.core.record import RecordError, check_closed, check_counts, parse

FIRST = "first"
SCENARIOS = (FIRST, "second_size", "hook_added", "weights_updated")
# The scenarios' changes, one rule for the worker (harness.engine.scenarios) and the accuracy reproducer
# (bot.verify.wrong_script), which must make the very same change:
HOOK_SCALE = (0.5, 1.5)     # hook_added scales its submodule's output feature by feature, from 0.5 to 1.5
WEIGHT_STEP = 1e-2          # weights_updated: the size of the seeded step each parameter takes...
WEIGHT_SEED_OFFSET = 1      # ...drawn from a generator seeded with the build's seed plus this

# How a call's outputs compare with eager's after the same steps.
ACCURACY = (
    "exact",                    # bitwise equal
    "close",                    # within [accuracy] rtol/atol, or as close to an fp64 reference as eager is
    "wrong",                    # neither
    "eager_nondeterministic",   # eager run twice disagrees: never judged
    "not_judged",               # with `detail` saying why (the call raised, no second spec, a cache object, ...)
)
RIGHT = ("exact", "close")
# An output's name, as harness.engine.accuracy names its leaves: a key or an index, then `.key` or `[index]` steps
# ("logits", "[0]", "past_key_values[0][1]", "cache.self_attention_cache[0][1]"), a key's step digits too where it
# is a parameter's name in a train step's gradients ("grad.encoder.layer.0.output.dense.weight"). Nothing else: it is
# written into the accuracy reproducer and its issue.
_OUTPUT_PATH = re.compile(r"(?:[A-Za-z_]\w*|\[\d+\])(?:\.[A-Za-z_]\w*|\.\d+|\[\d+\])*\Z", re.ASCII)
_STEP = re.compile(r"[A-Za-z_]\w*|\[(\d+)\]|(?<=\.)\d+", re.ASCII)


def output_path(text: Any) -> tuple[str | int, ...]:
    """The steps of an output path (`"logits[1]"` -> ("logits", 1)); RecordError naming it when it is not one."""
    if not isinstance(text, str) or not _OUTPUT_PATH.match(text):
        raise RecordError(f"call: output {text!r} is not an output path (name, [0], name[1], name.key, ...)")
    return tuple(int(m.group(1)) if m.group(1) is not None else m.group(0) for m in _STEP.finditer(text))


@dataclass(frozen=True)
class Call:
    """One call of the compiled model: what it compiled and whether its outputs were right."""

    scenario: str                       # one of SCENARIOS
    graphs: int = 0                     # graphs Dynamo compiled during this call (0: the code compiled before ran)
    recompiles: int = 0                 # frames compiled again during this call
    recompile_reasons: list[str] = field(default_factory=list)   # Dynamo's reason per recompiled frame
    accuracy: str = "not_judged"        # one of ACCURACY
    detail: str | None = None           # the first output that differs and by how much, or why not judged
    output: str | None = None           # the name of the first output that differs ("logits", "last_hidden_state")
    metadata: list[str] = field(default_factory=list)   # metadata differences (requires_grad, strides, ...)
    error_type: str | None = None       # the call raised: the exception type ...
    signature: str | None = None        # ... and its signature

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"scenario": SCENARIOS, "accuracy": ACCURACY}

    def __post_init__(self) -> None:
        check_closed(self, "call")
        check_counts(self, "call", ("graphs", "recompiles"))
        if self.graphs is None or self.recompiles is None:
            raise RecordError("call: graphs and recompiles are counts, never null")
        if self.output is not None:
            output_path(self.output)

    @property
    def wrong(self) -> bool:
        """The outputs differ from eager's beyond tolerance (and beyond eager's own distance from fp64)."""
        return self.accuracy == "wrong"

    @property
    def right(self) -> bool:
        return self.accuracy in RIGHT

    def to_dict(self) -> dict[str, Any]:
        """The stored form (JSON-ready)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Call":
        """Read the stored form; RecordError naming an unknown or missing field."""
        return parse(cls, data, "call")
