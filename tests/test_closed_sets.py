"""Closed sets closed at the door (issue 38): every record's field that holds one of a closed set of values is
checked by the record itself, so a stored row, a worker's line or a shard's export file that holds anything else
is a RecordError naming the record and the field, never a new value that reaches a table, a plan or an issue.
The table below walks them all; a record that declares a closed set (`CLOSED`) without a row here fails.
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from typing import Any

import pytest

import harness.core
import state
from harness.core import calls, correctness, outcome
from harness.core.calls import Call
from harness.core.options import RunOptions
from harness.core.outcome import Effect, Outcome
from harness.core.record import RecordError
from harness.core.run_environment import DEVICE_KINDS, RunEnvironment
from harness.engine import script_runner
from harness.engine.script_runner import ScriptResult
from harness.core.commits import CHANGES, FileChange
from harness.core import modes
from state import culprits, gates, jobs, ranges, resolutions, runs, verdicts
from state.runs import Run
from state.verdicts import Component, DynamicRun, Maintainer, Stage, Verdict

# A valid record of each type, then (record, field, its closed set; None where the field may be unset).
VALID: dict[type, Any] = {
    Outcome: Outcome("M", "baseline", "ok"),
    Effect: Effect("M", None, "c", "no_effect", 1, 1, None, None),
    Call: Call("first"),
    Verdict: Verdict("c", "s", "M", None, None, None, "confirmed"),
    Stage: Stage("eager", "passes", 1.0),
    Component: Component("dynamo", "count", True),
    DynamicRun: DynamicRun("None", "passes"),
    Maintainer: Maintainer("", "eager", "confirmed"),
    Run: Run(1, "sweep", "finished", "2026-11-28T00:00:00+00:00", None, [], {}, {}, RunOptions(), RunEnvironment()),
    ScriptResult: ScriptResult("ok"),
    gates.EnvironmentVerdict: gates.EnvironmentVerdict(1),
    ranges.Range: ranges.Range(1, "c", "s", "new_crash", "found"),
    resolutions.Resolution: resolutions.Resolution(1, "k", "open"),
    jobs.Job: jobs.Job(1, "nightly", {}, "queued", "2026-11-28T00:00:00+00:00"),
    FileChange: FileChange("torch/x.py", "modified"),
    modes.Mode: modes.Mode(),
    culprits.ProbeRow: culprits.ProbeRow("a" * 40, ["ok"], "old"),
    culprits.CommitRange: culprits.CommitRange("s", "a" * 40, "b" * 40, "found"),
    runs.ExportedRun: runs.ExportedRun("nightly", "finished", "2026-11-28T00:00:00+00:00", None, None, None, None, [],
                                       {}, {}, {}, RunEnvironment()),
}
TABLE = [
    (Outcome, "status", outcome.STATUSES),
    (Outcome, "reason", outcome.REASONS + (outcome.ANSWERED, None)),
    (Effect, "effect", outcome.EFFECTS),
    (Effect, "reason", outcome.REASONS + (outcome.ANSWERED, None)),
    (Effect, "correctness", correctness.CORRECTNESS_EFFECTS + (None,)),
    (Effect, "recompile", correctness.RECOMPILE_EFFECTS + (None,)),
    (Call, "scenario", calls.SCENARIOS),
    (Call, "accuracy", calls.ACCURACY),
    (Verdict, "status", verdicts.STATUSES),
    (Stage, "backend", verdicts.SCRIPT_BACKENDS),
    (Stage, "result", verdicts.RESULTS),
    (Component, "component", verdicts.COMPONENTS),
    (Component, "backend", verdicts.RUN_BACKENDS),
    (DynamicRun, "dynamic", verdicts.DYNAMIC),
    (DynamicRun, "result", verdicts.RESULTS),
    (Maintainer, "status", verdicts.STATUSES),
    (Maintainer, "backend", verdicts.SCRIPT_BACKENDS),
    (Run, "kind", runs.KINDS),
    (Run, "status", runs.STATUSES),
    (ScriptResult, "status", script_runner.STATUSES),
    (gates.EnvironmentVerdict, "verdict", (gates.OK, gates.SUSPECT)),
    (ranges.Range, "kind", ranges.KINDS),
    (ranges.Range, "status", ranges.STATUSES),
    (resolutions.Resolution, "resolution", resolutions.RESOLUTIONS),
    (jobs.Job, "kind", jobs.JOB_KINDS),
    (jobs.Job, "status", jobs.JOB_STATUSES),
    (FileChange, "status", CHANGES),
    (modes.Mode, "phase", modes.PHASES),
    (modes.Mode, "dtype", modes.DTYPES),
    (modes.Mode, "dynamic", modes.DYNAMICS),
    (modes.Mode, "attention", modes.ATTENTIONS),
    (culprits.ProbeRow, "verdict", culprits.VERDICTS),
    (culprits.ProbeRow, "phase", culprits.PHASES),
    (culprits.ProbeRow, "build", culprits.BUILDS),
    (culprits.CommitRange, "status", culprits.STATUSES),
    (runs.ExportedRun, "kind", runs.KINDS),
    (runs.ExportedRun, "status", runs.STATUSES),
]


@pytest.mark.parametrize("record, name, allowed", TABLE, ids=[f"{r.__name__}.{n}" for r, n, _ in TABLE])
def test_each_closed_set_takes_its_values_and_refuses_any_other(record: type, name: str, allowed: tuple) -> None:
    for value in allowed:
        assert getattr(dataclasses.replace(VALID[record], **{name: value}), name) == value
    for value in ("pwned", "", 3, None):
        if value in allowed:
            continue
        with pytest.raises(RecordError, match=f"{name} {value!r} is not one of"):
            dataclasses.replace(VALID[record], **{name: value})


def _records() -> set[tuple[type, str]]:
    """(record, field) of every CLOSED declared in the store's and the core's modules, and the script runner's."""
    modules = [importlib.import_module(m.name) for pkg in (harness.core, state)
               for m in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + ".")] + [script_runner]
    return {(cls, name) for module in modules for cls in vars(module).values()
            if dataclasses.is_dataclass(cls) and isinstance(cls, type) and cls.__module__ == module.__name__
            for name in getattr(cls, "CLOSED", {})}


def test_the_table_walks_every_declared_closed_set() -> None:
    assert _records() == {(r, n) for r, n, _ in TABLE}
    assert all(r.CLOSED[n] == allowed for r, n, allowed in TABLE)


def test_counts_and_rates_out_of_range_are_refused_and_so_is_a_device_of_no_kind() -> None:
    for changes in ({"graphs": -1}, {"attempts": 0}, {"flaky_rate": 1.5}, {"compile_s": -2.0}, {"ops": "7"}):
        with pytest.raises(RecordError, match=f"outcome: {next(iter(changes))}"):
            dataclasses.replace(VALID[Outcome], **changes)
    with pytest.raises(RecordError, match="call: graphs -1"):
        Call("first", graphs=-1)
    for device in [*DEVICE_KINDS, "cuda:1", None]:
        RunEnvironment(device=device)
    for device in ("gpu", "cuda:x", "cpu\nimport os", 0):
        with pytest.raises(RecordError, match="run environment: "):
            RunEnvironment(device=device)
    with pytest.raises(RecordError, match="torch_version 2.14 is not a string"):
        RunEnvironment.from_dict({"torch_version": 2.14})
