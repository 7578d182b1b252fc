"""Component isolation with a twin runner: stage order and early stop, another signature, no runs under the
counting backend, and stored records that make a quiet nightly run nothing (counted through the real verify step
and publish path)."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bot.verify import isolate, oracle, reproducers
from bot.verify.context import StepContext
from bot.verify.step import verify_run
from bot.verify.steps import Under, VerifySteps
from bot.issues.keys import tracking_key
from bot.github import publish
from bot.settings import Settings, VerifySettings
from harness.core.effects import effects_for
from harness.core.model_build import ModelBuild
from harness.core.tracking import tracking_groups
from harness.engine.script_runner import ScriptResult
from state import db, runs, verdicts as store
from state.verdicts import Component, Shrink, Verdict
from tests.fakegithub import scenario as sc
from tests.checks_runner import answering_checks
from tests.helpers_verify import a_run

CSO, CDO = "capture_scalar_outputs", "capture_dynamic_output_shape_ops"
SIG = sc.SIG_A
ENV = {**sc.ENV, "python": "/nightly/bin/python"}


def a_build(model: str, config: dict[str, Any] | None = None) -> ModelBuild:
    """A stored build of `model` (the twins never render it)."""
    return ModelBuild(model, "X", config or {}, {}, 0)


class Twin:
    """Fails with `sig` from the `fails_from` backend on (each stage includes the previous), passes before it."""

    def __init__(self, fails_from: dict[str, str], other: dict[str, str] | None = None) -> None:
        self.fails_from, self.other, self.calls = fails_from, other or {}, []

    def __call__(self, built: ModelBuild | None, under: Under, python: str, timeout: float,
                 mode: str = "flag") -> tuple[str, ScriptResult]:
        if mode == oracle.CHECKS:   # the three checks in one run, as the real script answers
            return answering_checks(self)(built, under, python, timeout, mode)
        backend = under.backend
        model = built.model if built else "?"
        if mode != "flag":        # the oracle's eager and baseline checks: every build here is valid
            return "x", ScriptResult(status="ok", graphs=1, signature=None)
        self.calls.append((model, backend))
        order = {"count": 0, "eager": 0, "aot_eager": 1, "inductor": 2}    # count compiles no more than eager
        if model in self.other and order[backend] >= order[self.other[model]]:
            return "x", ScriptResult(status="error", signature="RuntimeError: something else entirely")
        start = self.fails_from.get(model)
        if start is not None and order[backend] >= order[start]:
            return f"script {model}\n", ScriptResult(status="error", signature=SIG, torch_version="2.13.0", torch_git="abc")
        return "x", ScriptResult(status="ok", graphs=1, signature=None, torch_version="2.13.0", torch_git="abc")


def run_isolate(twin: Twin, model: str, backend: str = "inductor") -> Component:
    return isolate.isolate(a_build(model), oracle.Crash({}, {}, backend, "cpu", SIG), "py", timeout=9, runner=twin)


@pytest.mark.parametrize("fails_from, component", [("eager", "dynamo"), ("aot_eager", "aot_autograd"),
                                                   ("inductor", "inductor")])
def test_stages_run_in_order_and_stop_at_the_first_same_signature(fails_from: str, component: str) -> None:
    twin = Twin({"M": fails_from})
    record = run_isolate(twin, "M")
    order = ["eager", "aot_eager", "inductor"]
    ran = order[:order.index(fails_from) + 1]
    assert [b for _, b in twin.calls] == ran                      # in order, nothing after the failing stage
    assert record.component == component and not record.by_construction
    assert [s.result for s in record.stages] == ["passes"] * (len(ran) - 1) + ["fails"]


def test_another_signature_is_reported_not_counted_as_the_component() -> None:
    twin = Twin({"M": "inductor"}, other={"M": "aot_eager"})
    record = run_isolate(twin, "M")
    assert [b for _, b in twin.calls] == ["eager", "aot_eager"]
    assert record.component == "undetermined"
    assert record.stages[-1].result == "other"
    assert record.stages[-1].signature == "RuntimeError: something else entirely"


def test_a_crash_that_passes_every_stage_says_so_and_stages_stop_at_the_runs_backend() -> None:
    twin = Twin({})
    record = run_isolate(twin, "M", backend="aot_eager")
    assert [b for _, b in twin.calls] == ["eager", "aot_eager"]   # never past the backend it was seen under
    assert record.component == "none"


@pytest.mark.parametrize("backend", ["count", "eager"])
def test_count_and_eager_runs_are_dynamo_by_construction_with_no_runs(backend: str) -> None:
    twin = Twin({"M": "eager"})
    assert run_isolate(twin, "M", backend) == isolate.by_construction(backend)
    assert twin.calls == []


def _groups_and_run(backend: str, torch_git: str = "abc") -> tuple[dict, list, Any]:
    outs = [sc.outcome(m, c, spec.get(c, spec.get("baseline", 3)), "decoder_llm")
            for m, spec in sorted(sc.corpus().items()) for c in sc.CONFIGS]
    return tracking_groups(effects_for(outs), outs), outs, a_run({**ENV, "torch_git": torch_git}, backend)


def _verify_and_isolate(twin: Any, backend: str, conn: sqlite3.Connection, torch_git: str = "abc") -> tuple[dict, dict]:
    groups, outs, run = _groups_and_run(backend, torch_git)
    builds = {m: a_build(m) for m in sc.corpus()}
    found = reproducers.verify_all(StepContext.of(conn, run, builds, seams=VerifySteps(run=twin)), groups, outs)
    return found, isolate.isolate_all(StepContext.of(conn, run, builds, seams=VerifySteps(run=twin)), groups, found)


def test_isolated_once_per_signature_even_across_torch_builds(tmp_path: Path) -> None:
    # Model00 (smallest with A and with C) fails with A from aot_eager on; Model02 (B) never reproduces.
    twin = Twin({"Model00ForCausalLM": "aot_eager"})
    conn = db.connect(tmp_path / "state.sqlite")
    found, comps = _verify_and_isolate(twin, "inductor", conn)
    group_a = (CSO, SIG)
    assert twin.calls.count(("Model00ForCausalLM", "eager")) == 1 and len(twin.calls) == 3 + 2  # verify 3 + isolate 2
    assert set(comps) == {group_a} and comps[group_a].component == "aot_autograd"
    stored = store.get(conn, found[group_a].key)
    assert stored.component == comps[group_a] and stored.component.model == "Model00ForCausalLM"
    assert store.components(conn) == {group_a: comps[group_a]}
    # The same nightly again (a quiet one): everything comes from the store, nothing runs.
    calls = len(twin.calls)
    again = _verify_and_isolate(twin, "inductor", conn)
    assert again[1] == comps and len(twin.calls) == calls
    # A new torch build re-verifies (3 runs) but does not re-isolate: the signature was isolated already.
    _, carried = _verify_and_isolate(twin, "inductor", conn, torch_git="def")
    assert len(twin.calls) == calls + 3 and carried[group_a].component == "aot_autograd"


def test_a_stage_without_a_result_is_shown_but_not_stored(tmp_path: Path) -> None:
    """An interpreter that did not start under one stage: "undetermined" this time, isolated again next time."""
    conn = db.connect(tmp_path / "state.sqlite")
    twin = Twin({"Model00ForCausalLM": "inductor"})

    def flaky(built, under, python, timeout, mode="flag"):
        if under.backend == "aot_eager" and len(twin.calls) < 6:
            twin.calls.append((built.model, under.backend))
            return "", ScriptResult.not_run("cannot run python")
        return twin(built, under, python, timeout, mode)

    found, comps = _verify_and_isolate(flaky, "inductor", conn)
    assert comps[(CSO, SIG)].component == "undetermined" and not comps[(CSO, SIG)].complete
    assert store.get(conn, found[(CSO, SIG)].key).component is None
    _, comps = _verify_and_isolate(flaky, "inductor", conn)
    assert comps[(CSO, SIG)].component == "inductor" and store.components(conn)[(CSO, SIG)] == comps[(CSO, SIG)]


def test_count_backend_isolates_nothing_and_states_dynamo_for_every_group(tmp_path: Path) -> None:
    twin = Twin({"Model00ForCausalLM": "eager"})
    found, comps = _verify_and_isolate(twin, "count", db.connect(tmp_path / "state.sqlite"))
    assert {b for _, b in twin.calls} == {"count"}                # only the verification runs
    assert len(comps) == 3 and all(c == isolate.by_construction("count") for c in comps.values())


def _publish_twice(tmp_path: Path, backend: str, twin: Twin) -> tuple[list[int], str]:
    settings = Settings(state_path=tmp_path / "state.sqlite")
    conn = db.connect(settings.state_path)
    calls = []
    for date in ("2026-11-20", "2026-11-21"):            # the second nightly is quiet: same torch, same results
        run_id = sc.record_nightly(conn, date, sc.corpus(), env=ENV, backend=backend)
        for model in sc.corpus():                          # what reproducers are rendered from
            runs.record_model(conn, run_id, a_build(model))
        before = len(twin.calls)
        verify_run(conn, run_id, VerifySettings(timeout=600, shrink_budget=settings.verify.shrink_budget),
                   seams=VerifySteps(run=twin))
        publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(tmp_path / date),
                            publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(tmp_path / date)))
        calls.append(len(twin.calls) - before)
    plan = json.loads((tmp_path / "2026-11-20" / "plan.json").read_text())
    files = [a["file"] for a in plan["actions"] if a["key"] == tracking_key(CSO, SIG) and a["action"] == "create"]
    return calls, (tmp_path / "2026-11-20" / files[0]).read_text()


def test_publish_isolates_a_new_crash_once_and_a_quiet_nightly_runs_nothing(tmp_path: Path) -> None:
    twin = Twin({"Model00ForCausalLM": "inductor"})
    calls, body = _publish_twice(tmp_path, "inductor", twin)
    assert calls == [3 + 3, 0]                                      # verify 3 groups + isolate 3 stages, then nothing
    assert "Component: Inductor (passes `eager` and `aot_eager`, fails `inductor`)." in body
    assert "| `aot_eager` | passes |" in body and "| `inductor` | fails with the same signature |" in body


def test_publish_under_count_states_dynamo_and_spends_no_isolation_run(tmp_path: Path) -> None:
    twin = Twin({"Model00ForCausalLM": "eager"})
    calls, body = _publish_twice(tmp_path, "count", twin)
    assert calls == [3, 0] and {b for _, b in twin.calls} == {"count"}   # verification only, never a stage
    line = [ln for ln in body.splitlines() if ln.startswith("Component:")]
    assert line == ["Component: Dynamo tracing (the sweep's backend `count` compiles nothing after Dynamo, so a "
                    "failure under it is Dynamo's by construction; no isolation runs were spent)."]
    assert "| backend | result | seconds |" not in body


def test_an_unknown_backend_is_refused_not_called_dynamo() -> None:
    with pytest.raises(ValueError, match="'tvm'"):
        run_isolate(Twin({}), "M", backend="tvm")


def test_isolation_runs_on_the_shrunk_build_when_the_verdict_carries_one(tmp_path: Path) -> None:
    """After minimisation, the component runs use the smallest verified build, not the model's stored one."""
    seen: list[ModelBuild] = []

    def runner(built, under, python, timeout, mode="flag"):
        seen.append(built)
        return "s", ScriptResult(status="error", signature=SIG)

    small = a_build("M", {"num_hidden_layers": 1})
    verdict = Verdict(CSO, SIG, "M", "fp", "2.13.0", "abc", "confirmed", script="s", shrunk=True,
                      shrink=Shrink(small, {}))
    run = a_run(ENV, "inductor")
    out = isolate.isolate_all(StepContext.of(db.connect(tmp_path / "state.sqlite"), run, {"M": a_build("M", {"num_hidden_layers": 4})},
                                             seams=VerifySteps(run=runner)),
                              {(CSO, SIG): []}, {(CSO, SIG): verdict})
    assert out[(CSO, SIG)].component == "dynamo" and seen == [small]
