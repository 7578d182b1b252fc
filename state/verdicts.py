"""Reproducer verdicts: what running a tracking group's reproducer showed, and what each run's issues show of it.

`verdicts` holds one verdict per (config, signature, model, the model's fingerprint,
the run's torch build): whether the smallest affected model's script failed with the
same signature in a fresh interpreter, the script, its shrink and where the crash
lives (component isolation). A verdict that something ran to reach is reused by later
runs of the same key; one reached without a run (no interpreter recorded, nothing to
render from, an interpreter that did not start) is kept for its run only, and the next
verification of its key runs again. `run_verdicts` holds what a run's verify step
concluded per tracking group: the verdict its issue shows (none: verification was
off) and the component record. Written by bot/verify/, read by bot/view/run_view.py.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

from harness.core.model_build import ModelBuild
from harness.core.outcome import BACKENDS
from harness.core.record import RecordError, check_closed, parse
from state.db import transaction
from state.runs import now

STATUSES = ("confirmed", "unconfirmed")
# What one isolation stage or one dynamic run of the maintainer's script showed (bot/verify/isolate.py, ablation.py).
RESULTS = ("fails", "passes", "other", "no_result")
COMPONENTS = ("dynamo", "aot_autograd", "inductor", "none", "undetermined")
RUN_BACKENDS = BACKENDS                                          # a run's backend
SCRIPT_BACKENDS = tuple(b for b in BACKENDS if b != "count")     # the backend a script names (never the counting one)
DYNAMIC = ("None", "False", "True")
# What a verdict's runs checked, part of its key: verdicts stored before the validity oracle (bot/verify/oracle.py:
# eager, baseline, flag) checked the flag only, and are not reused as if they had checked all three.
CHECKS = "eager+baseline+flag"


def _object(text: str, what: str) -> dict[str, Any]:
    """A stored JSON column that holds one record; RecordError when it is not an object."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise RecordError(f"stored {what}: expected an object, got {type(data).__name__}")
    return data


@dataclass(frozen=True)
class Stage:
    """One isolation run: the reproducer under one backend."""

    backend: str                 # eager | aot_eager | inductor
    result: str                  # fails (same signature) | passes | other | no_result
    seconds: float
    signature: str | None = None
    error: str | None = None

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"backend": SCRIPT_BACKENDS, "result": RESULTS}

    def __post_init__(self) -> None:
        check_closed(self, "isolation stage")


@dataclass(frozen=True)
class Component:
    """Where a confirmed crash lives: Dynamo tracing, AOTAutograd or Inductor (bot/verify/isolate.py)."""

    component: str               # dynamo | aot_autograd | inductor | none | undetermined
    backend: str                 # the run's backend
    by_construction: bool        # known without a run (count, eager)
    stages: tuple[Stage, ...] = ()
    config: str | None = None    # the group it was isolated for (None when by construction)
    signature: str | None = None
    model: str | None = None
    torch_version: str | None = None   # as the last stage's script reported it
    torch_git: str | None = None

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"component": COMPONENTS, "backend": RUN_BACKENDS}

    def __post_init__(self) -> None:
        check_closed(self, "component")

    @property
    def complete(self) -> bool:
        """Every stage ran and reported (a stage without a result is tried again by a later run)."""
        return not any(s.result == "no_result" for s in self.stages)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> "Component | None":
        if text is None:
            return None
        data = _object(text, "component")
        found = parse(cls, data, "component")
        return replace(found, stages=tuple(parse(Stage, s, "isolation stage") for s in found.stages or ()))


@dataclass(frozen=True)
class DynamicRun:
    """One run of the maintainer's script with torch.compile's `dynamic` forced (bot/verify/ablation.py)."""

    dynamic: str                 # "None" (as written: torch's default) | "False" | "True"
    result: str                  # fails (same signature) | passes | other | no_result
    signature: str | None = None
    seconds: float = 0.0

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"dynamic": DYNAMIC, "result": RESULTS}

    def __post_init__(self) -> None:
        check_closed(self, "dynamic run")


@dataclass(frozen=True)
class Maintainer:
    """The maintainer's script (bot/verify/maintainer.py) and what the oracle and the dynamic ablation made of it."""

    script: str                  # "" when it could not be rendered
    backend: str                 # the torch.compile backend it names
    status: str                  # confirmed (runs in eager, fails compiled with the signature) | unconfirmed
    reason: str = ""             # why unconfirmed
    runs: tuple[DynamicRun, ...] = ()   # dynamic=None first; False and True only when None failed the same way
    checked_on: str | None = None       # the torch build its as-written run last ran on (None: before this was kept)

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"status": STATUSES, "backend": SCRIPT_BACKENDS}

    def __post_init__(self) -> None:
        check_closed(self, "maintainer's script")

    def result(self, dynamic: str) -> str | None:
        """What the run with `dynamic` showed (None: not run)."""
        return next((r.result for r in self.runs if r.dynamic == dynamic), None)

    @property
    def static_passes(self) -> bool:
        """dynamic=False makes the crash go away: a dynamic-shapes bug (PyTorch routes it to `module: dynamic shapes`)."""
        return self.status == "confirmed" and self.result("False") == "passes"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> "Maintainer | None":
        if text is None:
            return None
        data = _object(text, "maintainer's script")
        found = parse(cls, data, "maintainer's script")
        return replace(found, runs=tuple(parse(DynamicRun, r, "dynamic run") for r in found.runs or ()))


@dataclass(frozen=True)
class Size:
    """One reproducer's size as the shrink measured it (bot.verify.shrink.measure); None: not measured."""

    parameters: int | None = None
    seconds: float | None = None
    lines: int | None = None
    data_lines: int | None = None
    input_elements: int | None = None


@dataclass(frozen=True)
class ShrinkStats:
    """What a shrink did (bot.verify.shrink: tries, kept steps, what changed, the sizes before and after), read from
    its stored stats; None or empty where an older shrink kept less."""

    tries: int | None = None
    kept: int | None = None
    seconds: float | None = None
    stopped: str | None = None           # why it stopped (done | budget | tries)
    before: Size | None = None
    after: Size | None = None
    rows: list[list[Any]] = field(default_factory=list)   # [field, from, to]
    defaulted: int | None = None          # config fields left at their defaults
    dropped: list[str] = field(default_factory=list)      # inputs dropped

    @classmethod
    def of(cls, stats: dict[str, Any]) -> "ShrinkStats":
        """Read stored stats (RecordError naming an unknown field, of the stats or a size)."""
        found = parse(cls, stats, "shrink stats")
        return replace(found, before=_size(found.before, "shrink stats' before"),
                       after=_size(found.after, "shrink stats' after"))


def _size(data: Any, what: str) -> Size | None:
    return None if data is None else parse(Size, data, what)


@dataclass(frozen=True)
class Shrink:
    """A confirmed reproducer made smaller (bot/verify/shrink.py): the smallest build that still fails, and stats
    (kept as the shrink wrote them: `read` gives them typed)."""

    build: ModelBuild
    stats: dict[str, Any]

    def read(self) -> ShrinkStats:
        """The stats, typed."""
        return ShrinkStats.of(self.stats)

    def to_json(self) -> str:
        """The stored form: {build, stats}, the build as `ModelBuild.to_dict` writes it."""
        return json.dumps({"build": self.build.to_dict(), "stats": self.stats}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> "Shrink | None":
        """Read the stored form (RecordError naming an unknown or missing field, of the shrink or its build)."""
        if text is None:
            return None
        data = parse(_StoredShrink, json.loads(text), "stored shrink")
        return cls(ModelBuild.from_dict(data.build), data.stats)


@dataclass(frozen=True)
class _StoredShrink:
    """The stored shrink's shape, before its build is read."""

    build: dict[str, Any]
    stats: dict[str, Any]


@dataclass(frozen=True)
class Verdict:
    """One tracking group's reproducer, as verified on one torch build."""

    config: str
    signature: str
    model: str                           # the smallest affected model, whose script was run
    fingerprint: str | None              # of the model's build, as the run recorded it
    build_version: str | None            # the run's torch build (with the four fields above: the key)
    build_git: str | None
    status: str                          # confirmed | unconfirmed
    reason: str = ""                     # why unconfirmed
    script: str = ""                     # the script to embed (the shrunk one when shrunk); "" when unconfirmed
    torch_version: str | None = None     # the torch the script ran on, as it reported it (None: nothing ran)
    torch_git: str | None = None
    shrunk: bool = False                 # a shrink was tried (a confirmed verdict never shrunk is, once it is on)
    shrink: Shrink | None = None         # what it kept (None: not tried, or it could not start)
    component: Component | None = None   # isolated on this verdict's reproducer, carried to later builds
    maintainer: Maintainer | None = None # the script a person would write, judged (None: not tried yet)
    carried_from: str | None = None     # the build whose shrunk case it carries, judged again here (None: its own)
    reminimised: str | None = None      # why it was shrunk again from the full model on this build (None: it was not)
    cost: VerdictCost | None = None     # what reaching it cost on this build
    mode: str = ""                      # the run's mode (harness.core.modes.Mode.key; '' for eval): part of the key

    CLOSED: ClassVar[dict[str, tuple[str, ...]]] = {"status": STATUSES}

    def __post_init__(self) -> None:
        check_closed(self, "verdict")

    @property
    def key(self) -> str:
        """What a verdict is stored and reused by."""
        return key(self.config, self.signature, self.model, self.fingerprint, self.build_version, self.build_git,
                   self.mode)

    @property
    def build(self) -> str:
        """The torch build it was verified on, as people name it: `2.13.0 (git abc)`."""
        return build_label(self.build_version, self.build_git)


@dataclass(frozen=True)
class RunVerdict:
    """What a run's verify step concluded for one tracking group: what its issue shows."""

    config: str
    signature: str
    verdict: Verdict | None = None       # None: verification was off for this run
    component: Component | None = None   # None: not isolated (no confirmed reproducer under a compiling backend)
    pending: bool = False                # past the verify step's budget: not verified yet, finished on a later night


@dataclass(frozen=True)
class StepCost:
    """What one run's verify step cost as a whole (the last time it ran for the run)."""

    seconds: float
    scripts: int
    workers: int
    groups: int
    pending: int


@dataclass(frozen=True)
class VerdictCost:
    """What reaching one verdict cost on its build: seconds per stage, scripts run, shrink tries and steps kept."""

    stages: dict[str, float] = field(default_factory=dict)
    scripts: int = 0
    tries: int = 0
    kept: int = 0

    def __add__(self, other: "VerdictCost") -> "VerdictCost":
        """Two costs added: stage seconds per stage (to one decimal), and scripts, tries and kept."""
        stages = {k: round(self.stages.get(k, 0.0) + other.stages.get(k, 0.0), 1)
                  for k in sorted({*self.stages, *other.stages})}
        return VerdictCost(stages, self.scripts + other.scripts, self.tries + other.tries, self.kept + other.kept)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> "VerdictCost | None":
        return None if text is None else parse(cls, _object(text, "verdict cost"), "verdict cost")


def build_label(version: str | None, git: str | None) -> str:
    """A torch build as people name it: `2.13.0 (git abc)`, `2.13.0`, or `unknown`."""
    return f"{version or 'unknown'}" + (f" (git {git})" if git else "")


def key(config: str, signature: str, model: str, fingerprint: str | None, build_version: str | None,
        build_git: str | None, mode: str = "") -> str:
    """The stored key of a verdict: (config, signature, model, fingerprint, torch build, CHECKS, and the mode where it
    is not eval: an eval verdict keeps the key it had before modes), hashed."""
    data = [config, signature, model, fingerprint, [build_version, build_git], CHECKS] + ([mode] if mode else [])
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:24]


_COLUMNS = ("key", "config", "signature", "model", "fingerprint", "build_version", "build_git", "status", "reason",
            "script", "torch_version", "torch_git", "shrunk", "shrink", "component", "maintainer", "carried_from",
            "reminimised", "cost", "reusable", "recorded_at", "mode")


_STORED = {"shrink": Shrink.from_json, "component": Component.from_json, "maintainer": Maintainer.from_json,
           "cost": VerdictCost.from_json}       # the columns that hold a record as JSON, each read by its own reader


def _verdict(row: sqlite3.Row) -> Verdict:
    """A stored verdict, read by the one parser (its JSON columns by their records' readers)."""
    data = {c: row[c] for c in _COLUMNS if c not in ("key", "reusable", "recorded_at")}
    data = {**data, **{c: read(row[c] or None) for c, read in _STORED.items()}, "shrunk": bool(row["shrunk"])}
    return parse(Verdict, data, "stored verdict")


def put(conn: sqlite3.Connection, verdict: Verdict, *, reusable: bool = True) -> None:
    """Store (or replace) the verdict of its key; `reusable`: later verifications of the key may take it as is."""
    shrink = verdict.shrink.to_json() if verdict.shrink else None
    component = verdict.component.to_json() if verdict.component else None
    maintainer = verdict.maintainer.to_json() if verdict.maintainer else None
    values = (verdict.key, verdict.config, verdict.signature, verdict.model, verdict.fingerprint,
              verdict.build_version, verdict.build_git, verdict.status, verdict.reason, verdict.script,
              verdict.torch_version, verdict.torch_git, int(verdict.shrunk), shrink, component, maintainer,
              verdict.carried_from, verdict.reminimised, verdict.cost.to_json() if verdict.cost else None,
              int(reusable), now(), verdict.mode)
    updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
    with transaction(conn):
        conn.execute(f"INSERT INTO verdicts ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
                     f" ON CONFLICT(key) DO UPDATE SET {updates}", values)


def get(conn: sqlite3.Connection, verdict_key: str) -> Verdict | None:
    """The reusable verdict stored under `verdict_key`, if any."""
    row = conn.execute("SELECT * FROM verdicts WHERE key = ? AND reusable = 1", (verdict_key,)).fetchone()
    return _verdict(row) if row else None


def carried(conn: sqlite3.Connection, verdict: Verdict) -> Verdict | None:
    """The newest confirmed, shrunk verdict of `verdict`'s config, mode and signature on another torch build (its
    model first)."""
    row = conn.execute("SELECT * FROM verdicts WHERE config = ? AND signature = ? AND mode = ? AND status = 'confirmed'"
                       " AND reusable = 1 AND shrink IS NOT NULL AND NOT (build_version IS ? AND build_git IS ?)"
                       " ORDER BY model = ? DESC, recorded_at DESC, rowid DESC LIMIT 1",
                       (verdict.config, verdict.signature, verdict.mode, verdict.build_version, verdict.build_git,
                        verdict.model)).fetchone()
    return _verdict(row) if row else None


def add_cost(conn: sqlite3.Connection, verdict_key: str, cost: VerdictCost) -> None:
    """Add `cost` to what the stored verdict of `verdict_key` cost so far."""
    row = conn.execute("SELECT cost FROM verdicts WHERE key = ?", (verdict_key,)).fetchone()
    if row is None:
        return
    total = (VerdictCost.from_json(row["cost"]) or VerdictCost()) + cost
    with transaction(conn):
        conn.execute("UPDATE verdicts SET cost = ? WHERE key = ?", (total.to_json(), verdict_key))


def record_step(conn: sqlite3.Connection, run_id: int, cost: StepCost) -> None:
    """Store what the run's verify step cost (replacing an earlier measurement of the same run)."""
    with transaction(conn):
        conn.execute("INSERT INTO verify_steps (run_id, seconds, scripts, workers, groups, pending, recorded_at)"
                     " VALUES (?,?,?,?,?,?,?) ON CONFLICT(run_id) DO UPDATE SET seconds = excluded.seconds,"
                     " scripts = excluded.scripts, workers = excluded.workers, groups = excluded.groups,"
                     " pending = excluded.pending, recorded_at = excluded.recorded_at",
                     (run_id, cost.seconds, cost.scripts, cost.workers, cost.groups, cost.pending, now()))


def step_cost(conn: sqlite3.Connection, run_id: int) -> StepCost | None:
    """What the run's verify step cost, if it ran."""
    row = conn.execute("SELECT * FROM verify_steps WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    return parse(StepCost, {k: row[k] for k in row.keys() if k not in ("run_id", "recorded_at")}, "verify step cost")


def components(conn: sqlite3.Connection, mode: str = "") -> dict[tuple[str, str], Component]:
    """{(config, signature): component} isolated already, from the reusable verdicts of any torch build in `mode` (its
    key: '' for eval; a train crash's component is not eval's)."""
    rows = conn.execute("SELECT component FROM verdicts WHERE reusable = 1 AND component IS NOT NULL AND mode = ?"
                        " ORDER BY key", (mode,)).fetchall()
    found: dict[tuple[str, str], Component] = {}
    for row in rows:
        comp = Component.from_json(row["component"])
        if comp is not None and comp.config and comp.signature:
            found.setdefault((comp.config, comp.signature), comp)
    return found


def record_run(conn: sqlite3.Connection, run_id: int, rows: list[RunVerdict]) -> bool:
    """Make `rows` the run's verdicts (one per tracking group; a group no longer there is dropped).

    Writes nothing when the run already has exactly these; returns whether it wrote.
    """
    wanted = {(r.config, r.signature): (r.verdict.key if r.verdict else None,
                                        r.component.to_json() if r.component else None, int(r.pending)) for r in rows}
    have = {(r["config"], r["signature"]): (r["verdict_key"], r["component"], r["pending"]) for r in
            conn.execute("SELECT * FROM run_verdicts WHERE run_id = ?", (run_id,)).fetchall()}
    if wanted == have:
        return False
    with transaction(conn):
        conn.execute("DELETE FROM run_verdicts WHERE run_id = ?", (run_id,))
        conn.executemany("INSERT INTO run_verdicts (run_id, config, signature, verdict_key, component, pending,"
                         " recorded_at) VALUES (?,?,?,?,?,?,?)",
                         [(run_id, c, s, vkey, comp, pending, now())
                          for (c, s), (vkey, comp, pending) in sorted(wanted.items())])
    return True


def for_run(conn: sqlite3.Connection, run_id: int) -> dict[tuple[str, str], RunVerdict]:
    """{(config, signature): what the run's verify step concluded}, empty when it never ran for this run."""
    rows = conn.execute("SELECT r.config AS group_config, r.signature AS group_signature, r.component AS run_component,"
                        " r.pending AS run_pending, v.* FROM run_verdicts r LEFT JOIN verdicts v ON v.key = r.verdict_key"
                        " WHERE r.run_id = ? ORDER BY r.config, r.signature", (run_id,)).fetchall()
    return {(r["group_config"], r["group_signature"]): RunVerdict(
        r["group_config"], r["group_signature"], _verdict(r) if r["key"] is not None else None,
        Component.from_json(r["run_component"]), bool(r["run_pending"])) for r in rows}

