"""The plain data every part of flagsweep passes around: an item's outcome and a model's effect.

These are the contracts of ../DESIGN "Words": keep field names stable, they are
stored in SQLite and printed by `--json`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Mapping

from harness.core.calls import Call
from harness.core.correctness import CORRECTNESS_EFFECTS, RECOMPILE_EFFECTS
from harness.core.names import check_model
from harness.core.record import RecordError, check_closed, check_counts, parse

# How an item (one model under one config) can end.
STATUSES = (
    "ok",            # compiled and ran
    "error",         # a Python exception while compiling or running
    "timeout",       # hung: killed after --timeout
    "killed",        # the worker died: segfault, abort, out of memory
    "create_error",  # the model (config or class) could not be built
    "input_error",   # inputs could not be made for it
    "eager_error",   # the eager forward failed, so compiling says nothing
    "out_of_memory", # the device ran out of memory (even alone, re-run once): untested, never a crash
    "skipped",       # the lock records that the model cannot run in the run's mode (harness.zoo.mode_record): not built
)
OUT_OF_MEMORY = "out_of_memory"
SKIPPED = "skipped"
# Statuses that mean "the model itself is not testable", before any compile.
BUILD_STATUSES = ("create_error", "input_error", "eager_error")
# Statuses that say nothing about a compile: a build status, a device too small for the model, or a mode the lock
# records it cannot run. Such a model is untestable under every flag (its effect is create_error), never a crash with
# a signature, never filed.
UNTESTED_STATUSES = BUILD_STATUSES + (OUT_OF_MEMORY, SKIPPED)
# Statuses that mean "the compile under this config crashed".
CRASH_STATUSES = ("error", "timeout", "killed")

EFFECTS = (
    "reduces_graphs",
    "no_effect",
    "increases_graphs",
    "crashes",
    "fixes_crash",
    "both_crash",
    "create_error",
)

# Why an outcome was stored without compiling it alone: the baseline never read the config's keys (read-set
# pruning), or it was compiled together with other such configs and that compile matched the baseline (pooled).
NOT_READ = "not_read"
POOLED = "pooled"
REASONS = (NOT_READ, POOLED)
# An item compiled and called once under its config, whose later calls are the baseline's: they cannot differ
# (harness.engine.flags.answering). Not among REASONS: its first call was traced, its graph effect is its own.
ANSWERED = "answered"

STRATA = ("vl_multimodal", "decoder_llm", "encoder_decoder", "vision_other")
# The backends behind the graph counter: how a run compiles (its options' `backend`).
BACKENDS = ("count", "eager", "aot_eager", "inductor")


@dataclass
class Outcome:
    """What happened to one item: one model compiled under one config."""

    model: str
    config: str
    status: str
    stratum: str | None = None
    graphs: int | None = None          # calls of the counting backend
    graph_breaks: int | None = None
    break_reasons: list[str] = field(default_factory=list)
    break_ids: list[str | None] = field(default_factory=list)  # Dynamo registry id of each reason ("GB0124")
    ops: int | None = None             # total ops over all graphs
    ops_per_graph: list[int] = field(default_factory=list)
    recompiles: int | None = None
    compile_s: float | None = None     # compile + first run, seconds
    build_s: float | None = None       # model + inputs build, seconds
    peak_mem_mb: float | None = None
    error_type: str | None = None
    error_message: str | None = None
    torch_frame: str | None = None     # innermost torch frame, "torch/_dynamo/x.py:fn"
    signature: str | None = None
    gb_id: str | None = None           # registry id of an Unsupported error, in the torch that raised it
    traceback: str | None = None
    fingerprint: str | None = None     # recipe fingerprint of the model's build
    text_only: bool = False            # a multimodal model run without its other inputs
    attempts: int = 1                  # > 1 when flake confirmation re-ran it
    flaky_rate: float | None = None    # set by flake confirmation when results disagree
    reason: str | None = None          # one of REASONS when stored without compiling (counted as tested); ANSWERED
    # The calls it made to the compiled model (harness.core.calls): the first, then each scenario's; judged against
    # eager by harness.core.correctness. Empty where none were recorded (an older run, a crash before the first).
    calls: list[Call] = field(default_factory=list)
    # In a train mode (harness.core.modes): the backward graphs AOTAutograd compiled; None in eval, and then left out
    # of the stored form, so an eval item is stored exactly as before modes existed.
    backward_graphs: int | None = None

    # The fields left out of the stored form while unset (None): an item that predates them is stored as it was.
    UNSET_LEFT_OUT: ClassVar[tuple[str, ...]] = ("backward_graphs",)
    CLOSED: ClassVar[dict[str, tuple[str | None, ...]]] = {"status": STATUSES, "reason": REASONS + (ANSWERED, None)}

    def __post_init__(self) -> None:
        check_closed(self, "outcome")
        check_counts(self, "outcome", ("graphs", "graph_breaks", "ops", "recompiles", "backward_graphs"))
        check_counts(self, "outcome", ("attempts",), least=1)
        if self.flaky_rate is not None and not (isinstance(self.flaky_rate, (int, float)) and 0 <= self.flaky_rate <= 1):
            raise RecordError(f"outcome: flaky_rate {self.flaky_rate!r} is not a rate between 0 and 1")
        for name in ("compile_s", "build_s", "peak_mem_mb"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0):
                raise RecordError(f"outcome: {name} {value!r} is not a number >= 0")
        if not all(isinstance(c, Call) for c in self.calls):
            raise RecordError("outcome: calls must be Call records")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (an eval item's without `backward_graphs`: the form it had before modes)."""
        found = asdict(self)
        for name in self.UNSET_LEFT_OUT:
            if found[name] is None:
                del found[name]
        return found

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Outcome":
        """Read the stored (or sent) form; RecordError naming an unknown or missing field."""
        if isinstance(data, Mapping) and "calls" in data:
            data = {**data, "calls": [Call.from_dict(c) for c in data["calls"]]}
        found = parse(cls, data, "outcome")
        check_model(found.model, "outcome")     # read as foreign text: it reaches reproducers and issues
        return found

    @property
    def crashed(self) -> bool:
        return self.status in CRASH_STATUSES

    @property
    def built(self) -> bool:
        return self.status not in BUILD_STATUSES

    @property
    def crash_signature(self) -> str:
        """The name a failure is grouped by: its signature, or else its status (timeouts and kills carry no message)."""
        return self.signature or self.status


@dataclass
class Effect:
    """What one config did to one model, compared with baseline."""

    model: str
    stratum: str | None
    config: str
    effect: str
    baseline_graphs: int | None
    config_graphs: int | None
    baseline_signature: str | None
    config_signature: str | None
    reason: str | None = None          # the flagged outcome's reason (REASONS): inferred, not traced alone; shown apart
    # The two axes beside the graph effect, judged on the calls against the baseline's (harness.core.correctness):
    correctness: str | None = None     # CORRECTNESS_EFFECTS; None: not judged on both sides (no calls, a crash)
    recompile: str | None = None       # RECOMPILE_EFFECTS over the later calls; None: neither side made any

    CLOSED: ClassVar[dict[str, tuple[str | None, ...]]] = {
        "effect": EFFECTS, "reason": REASONS + (ANSWERED, None), "correctness": CORRECTNESS_EFFECTS + (None,),
        "recompile": RECOMPILE_EFFECTS + (None,)}

    def __post_init__(self) -> None:
        check_closed(self, "effect")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def skipped(outcomes: list[Outcome]) -> dict[str, str]:
    """{model: why} of the models whose items were skipped: the lock records they cannot run in the run's mode."""
    return {o.model: o.error_message or "" for o in sorted(outcomes, key=lambda o: o.model) if o.status == SKIPPED}
