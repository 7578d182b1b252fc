"""The worker protocol: the parent's requests and the worker's answers, one dataclass per line.

Each travels as one JSON line, `{"op": ...}` for a request and `{"event": ...}` for an answer. One writer and one
reader each (STYLE.md rule 10): the pool writes requests and reads events (harness.engine.pool, through
harness.engine.handle), the worker (harness.engine.worker) reads requests and writes events. Both are read
strictly (harness.core.record.parse): an unknown or missing field is a RecordError naming it.

The protocol version rides on `ready`, the first line a worker sends: a worker running another flagsweep's code
(a --python whose path finds another checkout) is refused there, before any work, instead of being misread later.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Union

from harness.core.model_build import ModelBuild
from harness.core.outcome import Outcome
from harness.core.record import RecordError, check_version, parse
from harness.core.run_environment import RunEnvironment
from harness.core.modes import DEFAULT as DEFAULT_MODE, Mode
from harness.core.options import Accuracy

PROTOCOL = 6   # bump on any change to a line below (both ends of a pipe run the same checkout)
# The exit status of a worker asked for a device its torch does not have; its one stderr line says why.
NO_DEVICE_EXIT = 3


# ---- requests: parent -> worker ----------------------------------------------------------------

@dataclass(frozen=True)
class Startup:
    """The worker's command-line argument: where to write events, its thread budget, modules to import first, the
    device it runs models on (a CUDA worker is set up at start: its share of the GPU's memory, TF32 off) and the
    shared compile cache's root ("": none)."""

    fd: int = 1
    threads: int = 0                     # 0: torch's default
    extra_modules: list[str] = dataclasses.field(default_factory=list)
    device: str = "cpu"
    memory_fraction: float = 1.0         # of the GPU's memory this worker may allocate (1 / workers sharing it)
    compile_cache: str = ""              # the shared cache's root ("": none, the worker compiles in `scratch`)
    scratch: str = ""                    # a folder the pool removes when it closes ("": the system's temp)

    def to_json(self) -> str:
        """The argument as handle.spawn passes it."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Startup":
        """Read the argument; RecordError naming an unknown field."""
        return parse(cls, json.loads(text), "worker startup")


@dataclass(frozen=True)
class EnvRequest:
    """Gather the environment and list the config space of `backend`."""

    device: str
    backend: str


@dataclass(frozen=True)
class RunRequest:
    """Build one model once, then run each item: compile it under a config, run it eagerly, or call a job."""

    model: str
    items: list[tuple[int, str, dict]]   # (the caller's index, label: the config name, settings)
    mode: str                            # compile | eager | job
    job: str | None                      # "module:function" (mode job)
    prune: list[str]                     # configs reported as the baseline's when it never read their keys
    pool: bool                           # the prune configs it read are compiled together first
    base_settings: dict[str, Any]
    backend: str
    device: str
    accuracy: Accuracy                   # the later calls and their accuracy oracle (harness.engine.scenarios)
    answer: bool = True                  # later calls answered from the baseline where they cannot differ
    together: list[str] = dataclasses.field(default_factory=list)   # configs pooled, never pruned (named flags)
    unanswered: list[str] = dataclasses.field(default_factory=list)  # configs never answered (quarantined)
    screen: bool = False                 # answering off: still report the rule that would have answered (a bench)
    sweep_mode: Mode = DEFAULT_MODE      # how each item runs beside its flags (harness.core.modes)
    # Configs whose item, when answered, the group also traces in full: the night's answer audit made in place
    # (harness.engine.flags.answering.in_group).
    audit: list[str] = dataclasses.field(default_factory=list)
    # The pruning audit made in place (harness.engine.flags.pruning.in_group): the prunable configs in its order, and
    # how many of those reported pruned or pooled are traced again.
    prune_audit: list[str] = dataclasses.field(default_factory=list)
    prune_audit_n: int = 0


@dataclass(frozen=True)
class ExitRequest:
    """Finish and exit (EOF on stdin says the same)."""


Request = Union[EnvRequest, RunRequest, ExitRequest]
_OPS: dict[type, str] = {EnvRequest: "env", RunRequest: "run", ExitRequest: "exit"}


# ---- events: worker -> parent ------------------------------------------------------------------

@dataclass(frozen=True)
class Ready:
    """torch imported: the worker takes requests (the line carries the protocol version)."""

    pid: int


@dataclass(frozen=True)
class ConfigSpace:
    """Every entry the backend's config modules declare in the torch under test."""

    modules: list[str]
    entries: dict[str, dict[str, Any]]   # full key -> {"type", "default"}


@dataclass(frozen=True)
class Env:
    """The answer to EnvRequest."""

    env: RunEnvironment
    config_space: ConfigSpace


@dataclass(frozen=True)
class Built:
    """The model of the current request was built (ok) or not; `build`: what a reproducer rebuilds it from (None
    for a failed build or a test-only model without a transformers config)."""

    ok: bool
    build: ModelBuild | None = None


@dataclass(frozen=True)
class Start:
    """An item started compiling (index -1: a pooled compile of several items, which fails none when it dies)."""

    index: int


@dataclass(frozen=True)
class Result:
    """One item ended: its outcome; the baseline's read set (`config_reads`, key -> value read, every window) and its
    read sets per call window (`window_reads`, window -> key -> value); a job's answer (JSON text: it may hold
    what a record may not, NaN); the rule that answered its later calls from the baseline (`answered_by`: reason
    answered; or, answering off, would have been); `audited`: the item was answered and in the answer audit's
    sample, so its later calls were made in full too, `disagreement` saying where its answered form differed
    (the outcome is then that full trace; None: it agreed, and the outcome is its answered form); `prune_audit`:
    the pruning audit's trace of an item reported pruned or pooled before, whose outcome it replaces;
    `traced_why`: why its later calls were made in full (harness.engine.flags.answering: FIRST_DIFFERS and the
    others; None: answered, or not made)."""

    index: int
    outcome: Outcome
    config_reads: dict[str, Any] | None = None
    window_reads: dict[str, dict[str, Any]] | None = None
    data: Any = None
    answered_by: str | None = None
    audited: bool = False
    disagreement: str | None = None
    prune_audit: bool = False
    traced_why: str | None = None


@dataclass(frozen=True)
class CacheCounts:
    """What Inductor's FX graph cache and AOTAutograd's cache did during one compile (index -1: a pooled one); sent
    under the inductor backend, after the compile and before its result."""

    index: int
    fxgraph_hit: int = 0
    fxgraph_miss: int = 0
    autograd_hit: int = 0
    autograd_miss: int = 0


@dataclass(frozen=True)
class Done:
    """The request is done; the worker's RSS then (the pool recycles a worker above its limit)."""

    rss_mb: float | None = None


Event = Union[Ready, Env, Built, Start, CacheCounts, Result, Done]
_EVENTS: dict[type, str] = {Ready: "ready", Env: "env", Built: "built", Start: "start", CacheCounts: "cache",
                            Result: "result", Done: "done"}


# ---- the one writer and the one reader of each ------------------------------------------------

def encode(message: Request | Event) -> bytes:
    """One JSON line; `ready` carries the protocol version."""
    if type(message) in _OPS:
        head = {"op": _OPS[type(message)]}
    else:
        head = {"event": _EVENTS[type(message)], **({"v": PROTOCOL} if isinstance(message, Ready) else {})}
    body = dataclasses.asdict(message)
    if isinstance(message, Env):      # the environment travels in its stored form (the one its reader reads)
        body["env"] = message.env.to_dict()
    if isinstance(message, Built) and message.build is not None:   # and a build in its own (a config's infinity)
        body["build"] = message.build.to_dict()
    return (json.dumps({**head, **body}, default=str) + "\n").encode()


def read_request(data: Mapping[str, Any]) -> Request:
    """A request line, parsed; RecordError naming an unknown op or field."""
    return _read(data, "op", {"env": EnvRequest, "run": _run, "exit": ExitRequest}, "worker request")


def _run(fields: dict[str, Any]) -> RunRequest:
    raw = parse(RunRequest, fields, "worker request 'run'")
    mode = raw.sweep_mode if isinstance(raw.sweep_mode, Mode) else Mode.from_dict(raw.sweep_mode)
    return dataclasses.replace(raw, accuracy=parse(Accuracy, raw.accuracy, "worker request 'run' accuracy"),
                               sweep_mode=mode)


def read_event(data: Mapping[str, Any]) -> Event:
    """An event line, parsed; RecordError naming another protocol version, an unknown event or field."""
    return _read(data, "event", _READERS, "worker event")


def _read(data: Mapping[str, Any], tag: str, readers: Mapping[str, Any], what: str) -> Any:
    if not isinstance(data, Mapping) or tag not in data:
        raise RecordError(f"{what}: missing field {tag!r}")
    fields = {k: v for k, v in data.items() if k != tag}
    name = data[tag]
    if name not in readers:
        raise RecordError(f"{what}: unknown {tag} {name!r}")
    reader = readers[name]
    return reader(fields) if not isinstance(reader, type) else parse(reader, fields, f"{what} {name!r}")


def _ready(fields: dict[str, Any]) -> Ready:
    # The version first: a worker of another protocol may send other fields, and this is the error to name.
    return parse(Ready, check_version(fields, PROTOCOL, "worker protocol"), "worker event 'ready'")


def _env(fields: dict[str, Any]) -> Env:
    raw = parse(Env, fields, "worker event 'env'")
    return Env(RunEnvironment.from_dict(raw.env), parse(ConfigSpace, raw.config_space, "config space"))


def _built(fields: dict[str, Any]) -> Built:
    raw = parse(Built, fields, "worker event 'built'")
    return Built(raw.ok, None if raw.build is None else ModelBuild.from_dict(raw.build))


def _result(fields: dict[str, Any]) -> Result:
    raw = parse(Result, fields, "worker event 'result'")
    return dataclasses.replace(raw, outcome=Outcome.from_dict(raw.outcome))


_READERS: dict[str, Callable[[dict[str, Any]], Event] | type] = {
    "ready": _ready, "env": _env, "built": _built, "start": Start, "cache": CacheCounts, "result": _result,
    "done": Done}
