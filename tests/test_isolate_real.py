"""Component isolation on real crashes, real compiles, torch 2.13 CPU: an Inductor-only one and a Dynamo one.

Inductor: BertModel under a config whose C++ compiler does not exist (a real inductor key, set through our key
syntax): Dynamo and AOTAutograd never need a compiler, Inductor does. Dynamo: MimiModel under
capture_scalar_outputs (PendingUnbackedSymbolNotFound), swept for real under `aot_eager`, then verified and
published twice through the real path (the pipeline's verify step, then publish) with an interpreter that logs
each start: one isolation run, then none. The sweep and first publish are the session's `real_mimi_crash`
(tests/real_mimi_crash.py), shared with tests/test_maintainer_real.py and tests/test_repro.py.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bot.verify import isolate, oracle
from bot.verify.steps import Under, render_and_run
from bot.issues.keys import tracking_key
from harness.engine import configs
from state import db, verdicts
from tests.helpers_verify import stored_build
from tests.real_mimi_crash import publish_once

BROKEN_CXX = {"torch._inductor.config.cpp.cxx": ["/nonexistent/flagsweep-c++"]}


@pytest.mark.compile
def test_a_missing_cpp_compiler_is_isolated_to_inductor():
    checked = configs.check({"broken_cxx": BROKEN_CXX}, {}, sys.executable)   # our key syntax and this torch take it
    assert checked.configs == {"broken_cxx": BROKEN_CXX}
    built = stored_build("BertModel")   # what a worker stores for it (engine.describe), from the lock: no worker
    # The verification, as verify_all does it: the script under the run's backend fails.
    _, seen = render_and_run(built, Under(BROKEN_CXX, "inductor", "cpu"), sys.executable, 600)
    assert seen.status == "error" and "InvalidCxxCompiler" in seen.signature, seen
    ran = []

    def counting(*args):
        ran.append(args[1].backend)
        return render_and_run(*args)

    crash = oracle.Crash(BROKEN_CXX, {}, "inductor", "cpu", seen.signature)
    record = isolate.isolate(built, crash, sys.executable, timeout=600, runner=counting)
    assert ran == ["eager", "aot_eager", "inductor"]
    assert [(s.backend, s.result) for s in record.stages] == [
        ("eager", "passes"), ("aot_eager", "passes"), ("inductor", "fails")]
    assert record.component == "inductor" and record.stages[-1].signature == seen.signature


@pytest.mark.compile
def test_a_dynamo_crash_is_isolated_once_through_the_real_publish_path(real_mimi_crash, tmp_path: Path):
    done = real_mimi_crash           # swept under aot_eager, verified and published once (tests/real_mimi_crash.py)
    conn = db.connect(done.settings.state_path)
    before = done.log.read_text().count("repro.py")
    publish_once(conn, done.settings, done.run_id, tmp_path / "out2")
    starts = [done.first_starts, done.log.read_text().count("repro.py") - before]
    assert starts == [2, 0]        # the oracle (eager, baseline, flag: one run) + one stage (eager fails), then all stored
    plan = json.loads((done.out / "plan.json").read_text())
    (group, stored), = verdicts.for_run(conn, done.run_id).items()
    conn.close()
    assert stored.verdict.status == "confirmed" and stored.component.component == "dynamo"
    assert stored.verdict.component == stored.component and "PendingUnbackedSymbolNotFound" in group[1]
    key = tracking_key("cso", group[1])
    # One model, no flake re-runs: the evidence rule holds it as watching; the dry run writes its would-be body.
    body = (done.out / "pending" / f"watching-{key}.md").read_text()
    assert key not in {a["key"] for a in plan["actions"]}
    assert "Component: Dynamo tracing (fails under `eager`)." in body
    assert "| `eager` | fails with the same signature |" in body and "`aot_eager` |" not in body
