"""Reproducer work that keeps up with the nightly (issue 24): carried across builds, side by side, budgeted, costed.

Twin runners (tests/test_shrink.py's Twin: answers like a crash that needs a minimum size) stand in for the
subprocesses; the store is a real SQLite file and the verify step and publish path are the real ones.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from bot.github import publish
from bot.verify.context import StepContext
from bot.verify.steps import VerifySteps
from harness.engine.script_runner import ScriptResult
from bot.settings import IssueSettings, Settings, VerifySettings
from bot.verify import reproducers
from bot.verify.step import verify_run
from state import db, verdicts
from tests.checks_runner import answering_checks
from tests.helpers_verify import PY, RUN, Twin, a_run, sig_twin, store_run, verify_setup

RUN2 = a_run({"python": PY, "torch_version": "2.14.1", "torch_git": "def"})


def _night1(tmp_path: Path, twin: Twin):
    outs, groups, builds = verify_setup()
    conn = db.connect(tmp_path / "state.sqlite")
    first = reproducers.verify_all(StepContext.of(conn, RUN, builds,
                                                  seams=VerifySteps(run=sig_twin(twin)), shrink_budget=600.0),
                                   groups, outs)
    return conn, outs, groups, builds, first


def test_a_new_build_carries_the_shrunk_case_and_shrinks_nothing(tmp_path: Path) -> None:
    twin = Twin()
    conn, outs, groups, builds, first = _night1(tmp_path, twin)
    night1 = len(twin.modes)
    second = reproducers.verify_all(StepContext.of(conn, RUN2, builds,
                                                   seams=VerifySteps(run=sig_twin(twin)), shrink_budget=600.0),
                                    groups, outs)
    assert len(twin.modes) - night1 == 3 * len(groups)          # one oracle pass (eager, baseline, flag) each
    assert night1 > 10 * 3 * len(groups) / 2                      # night 1 shrank: many more runs
    for group, found in second.items():
        old = first[group]
        assert found.status == "confirmed" and found.build_version == "2.14.1" and found.key != old.key
        assert found.shrink == old.shrink and found.script == old.script and found.reminimised is None
        assert found.carried_from == "2.13.0 (git abc)"
        assert found.cost.scripts == 1 and found.cost.tries == 0 and set(found.cost.stages) == {"carry"}
    assert old.cost.scripts > 3 and old.cost.tries > 0 and "shrink" in old.cost.stages  # cost in the store
    n = len(twin.modes)
    reproducers.verify_all(StepContext.of(conn, RUN2, builds,
                                          seams=VerifySteps(run=sig_twin(twin)), shrink_budget=600.0),
                           groups, outs)
    assert len(twin.modes) == n                                   # re-publishing build 2 runs nothing


def test_when_the_old_case_stops_failing_it_is_shrunk_again_and_says_why(tmp_path: Path) -> None:
    twin = Twin()
    conn, outs, groups, builds, first = _night1(tmp_path, twin)

    def build2(b, under, python, timeout, mode="flag"):   # torch 2.14.1 fixed the one-layer case: needs two now
        script, result = sig_twin(twin)(b, under, python, timeout, mode)
        if mode == "flag" and b.config["num_hidden_layers"] < 2:
            result = ScriptResult(status="ok", signature=None)
        return script, result

    second = reproducers.verify_all(StepContext.of(conn, RUN2, builds,
                                                   seams=VerifySteps(run=answering_checks(build2)), shrink_budget=600.0),
                                    groups, outs)
    for group, found in second.items():
        assert found.status == "confirmed" and found.carried_from is None
        assert found.reminimised.startswith("the case shrunk on 2.13.0 (git abc) no longer reproduces: ran without")
        assert found.shrink.build.config["num_hidden_layers"] == 2 and found.shrink.stats["tries"] > 0
        assert found.cost.tries > 0 and "carry" in found.cost.stages and "shrink" in found.cost.stages
    from bot.text.render import render
    text = render("tracking_reproducer.md.j2", repro=found, m=None)
    assert "Minimised again from the full model on this build: the case shrunk on 2.13.0" in text


def _plain(v):
    """The verdict less its wall-clock seconds (cost stages, shrink stats): those vary with the machine's load."""
    stats = {k: x for k, x in v.shrink.stats.items() if k != "seconds"}
    return dataclasses.replace(v, cost=dataclasses.replace(v.cost, stages={}),
                               shrink=dataclasses.replace(v.shrink, stats=stats))


def test_verdicts_and_reproducers_do_not_depend_on_the_worker_count(tmp_path: Path) -> None:
    outs, groups, builds = verify_setup()
    seen = []
    for workers in (1, 2):
        conn = db.connect(tmp_path / f"w{workers}.sqlite")
        found = reproducers.verify_all(StepContext.of(conn, RUN, builds,
                                                      seams=VerifySteps(run=sig_twin(Twin())), shrink_budget=600.0, workers=workers),
                                       groups, outs)
        seen.append({g: _plain(v) for g, v in found.items()})
        conn.close()
    assert seen[0] == seen[1] and len(seen[0]) == 3
    assert all(v.shrink and v.shrink.stats["tries"] > 0 for v in seen[0].values())


def test_over_the_budget_signatures_wait_as_pending_and_a_later_run_finishes_them(tmp_path: Path) -> None:
    conn, run_id = store_run(tmp_path)
    settings = Settings(state_path=tmp_path / "state.sqlite", issues=IssueSettings(min_models=1))
    clock = [0.0]
    twin = Twin(clock=clock, cost=10.0)            # every script "takes" 10 s on the fake clock
    found = verify_run(conn, run_id, VerifySettings(timeout=600, shrink_budget=600, max_minutes=0.5),
                       seams=VerifySteps(run=sig_twin(twin), clock=lambda: clock[0]))
    pending = {g for g, rv in found.items() if rv.pending}
    done = {g for g, rv in found.items() if rv.verdict is not None}
    assert len(pending) == 2 and len(done) == 1 and not pending & done
    (first,) = [found[g].verdict for g in done]
    assert first.status == "confirmed" and not first.shrunk     # verified, shrink cut by the budget: finished later
    cost = verdicts.step_cost(conn, run_id)
    assert cost.pending == 2 and cost.scripts == 1 and cost.groups == 3      # one checks run: eager, baseline, flag
    out = tmp_path / "out"
    publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(out),
                        publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(out)))
    plan = json.loads((out / "plan.json").read_text())
    created = [a for a in plan["actions"] if a["action"] == "create" and a["key"].startswith("t")]   # tracking
    filed = {(out / a["file"]).read_text() for a in created}
    assert len(created) == 1 and all("Verified: in fresh interpreters" in body for body in filed)
    summaries = "".join((out / a["file"]).read_text() for a in plan["actions"] if a["key"].startswith("s"))
    assert "Verification pending" in summaries
    again = verify_run(conn, run_id, VerifySettings(timeout=600, shrink_budget=600, max_minutes=600),
                       seams=VerifySteps(run=sig_twin(twin), clock=lambda: clock[0]))
    assert not any(rv.pending for rv in again.values())
    assert all(rv.verdict.status == "confirmed" and rv.verdict.shrunk for rv in again.values())


def test_the_report_says_where_the_verify_steps_time_went(tmp_path: Path) -> None:
    from bot.report import report
    conn, run_id = store_run(tmp_path)
    verify_run(conn, run_id, VerifySettings(timeout=600, shrink_budget=600), seams=VerifySteps(run=sig_twin(Twin())))
    context = report.build_context(conn, run_id)
    cost = verdicts.step_cost(conn, run_id)
    assert context["verify_cost"]["step"]["scripts"] == cost.scripts > 0
    assert {r["signature"] for r in context["verify_cost"]["rows"]} == {sig for _, sig in verdicts.for_run(conn, run_id)}
    md, html = report.render_md(context), report.render_html(context)
    assert f"Verify step: {cost.seconds:.0f} s, {cost.scripts} scripts on" in md
    assert '<section id="verify-cost">' in html and f"{cost.scripts} scripts on" in html
    assert all("shrink tries" in line for line in md.splitlines() if line.startswith("- `capture_"))
