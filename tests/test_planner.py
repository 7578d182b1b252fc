"""The pure planner: plain data in, actions with rendered text out. No store, no network."""
from __future__ import annotations

from typing import Any

from harness.core import fixes
from bot.issues import planner
from bot.issues.routing import compile_rules
from harness.core.effects import effects_for
from harness.core.outcome import Outcome
from state.verdicts import Verdict
from tests.fakegithub import scenario as sc

CSO = "capture_scalar_outputs"


def inputs(results: dict, *, links: dict | None = None, quiet: dict | None = None, transitions: list | None = None,
           trend: dict | None = None) -> planner.PlanInputs:
    outs = [sc.outcome(m, c, spec.get(c, spec.get("baseline", 3)), "decoder_llm")
            for m, spec in sorted(results.items()) for c in sc.CONFIGS]
    return planner.PlanInputs(run={"id": 7, "date": "2026-11-20", "environment": sc.ENV, "configs": sc.CONFIGS,
                                   "options": {"backend": "count"}, "models": sorted(results)},
                              effects=effects_for(outs), outcomes=outs, links=links or {}, quiet=quiet or {},
                              transitions=transitions or [], trend=trend or {})


def links_after(plan: planner.Plan) -> dict[str, dict[str, Any]]:
    """The links a successful publish of `plan` leaves behind (what bot.github.publish stores)."""
    out = {}
    for n, a in enumerate((a for a in plan.actions if a.action == "create"), 1):
        out[a.key] = {"key": a.key, "number": n, "kind": a.kind, "config": a.config, "signature": a.signature,
                      "state": "open", "closed_by": None, "muted": False, "cc": [], "quiet_nightlies": 0,
                      "body_sha": a.material, "title": a.title}
    return out


def test_first_plan_creates_tracking_then_summaries() -> None:
    plan = planner.plan(inputs(sc.corpus()), planner.PlanSettings())
    assert [(a.action, a.kind) for a in plan.actions] == [("create", "tracking")] * 3 + [("create", "summary")] * 2
    keys = [a.key for a in plan.actions]
    assert len(set(keys)) == 5
    assert planner.tracking_key(CSO, sc.SIG_A) in keys
    for a in plan.actions:
        assert a.body.startswith(f"<!-- flagsweep:key={a.key} -->") and len(a.title) <= 256


def test_same_results_plan_nothing() -> None:
    first = planner.plan(inputs(sc.corpus()), planner.PlanSettings())
    again = planner.plan(inputs(sc.corpus(), links=links_after(first)), planner.PlanSettings())
    assert again.actions == [] and again.notes == []


def test_keys_are_stable_and_distinct() -> None:
    assert planner.tracking_key("a", "s") == planner.tracking_key("a", "s")
    assert planner.tracking_key("a", "s") != planner.tracking_key("b", "s") != planner.summary_key("a")


def test_title_counts_follow_the_results() -> None:
    first = planner.plan(inputs(sc.corpus()), planner.PlanSettings())
    worse = sc.corpus()
    worse["Model06ForCausalLM"][CSO] = sc.SIG_A
    plan = planner.plan(inputs(worse, links=links_after(first)), planner.PlanSettings())
    edits = {a.key: a for a in plan.actions if a.action == "edit" and a.kind == "tracking"}
    assert list(edits) == [planner.tracking_key(CSO, sc.SIG_A)]
    assert edits[planner.tracking_key(CSO, sc.SIG_A)].title == \
        "capture_scalar_outputs=True crashes 3/10 models with PendingUnbackedSymbolNotFound"


def test_flaky_crashes_are_not_filed() -> None:
    outs = [sc.outcome("M", "baseline", 3, "decoder_llm"), sc.outcome("M", CSO, sc.SIG_A, "decoder_llm")]
    outs[1].flaky_rate = 0.5
    plan = planner.plan(planner.PlanInputs(run={"id": 1, "date": "d", "configs": sc.CONFIGS}, effects=effects_for(outs),
                                           outcomes=outs), planner.PlanSettings())
    assert [a.kind for a in plan.actions] == ["summary"]


def test_timeouts_group_by_status() -> None:
    outs = [sc.outcome("M", "baseline", 3, "decoder_llm"),
            Outcome(model="M", config=CSO, status="timeout", stratum="decoder_llm")]
    plan = planner.plan(planner.PlanInputs(run={"id": 1, "date": "d", "configs": sc.CONFIGS}, effects=effects_for(outs),
                                           outcomes=outs), planner.PlanSettings())
    assert plan.actions[0].signature == "timeout" and plan.actions[0].title.endswith("with timeout")


def _quiet_setup(closed_by: str | None, state: str, quiet: int):
    first = planner.plan(inputs(sc.corpus()), planner.PlanSettings())
    links = links_after(first)
    key = planner.tracking_key(CSO, sc.SIG_B)
    links[key].update(state=state, closed_by=closed_by)
    return key, links


def _night(date: str, status: str | None) -> fixes.Night:
    """Model02 on one nightly under CSO: compiled ("ok"), a build status, or not swept (None)."""
    m = "Model02ForCausalLM"
    if status is None:
        return fixes.Night(date, {})
    return fixes.Night(date, {m: (Outcome(m, "baseline", "ok" if status == "ok" else status),
                                  Outcome(m, CSO, status, graphs=3))})


def test_close_only_after_n_verified_nightlies_never_on_quiet_ones() -> None:
    key, links = _quiet_setup(None, "open", 0)
    gone = sc.corpus()
    gone["Model02ForCausalLM"][CSO] = 3
    sigs = {(CSO, sc.SIG_B): {"models": ["Model02ForCausalLM"], "last_seen": "2026-11-19"}}
    t = [{"model": "Model02ForCausalLM", "config": CSO, "transition": "fixed", "before": {"signature": sc.SIG_B},
          "after": {"signature": None}}]

    def plan(nights, quiet, transitions=None):
        i = inputs(gone, links=links, quiet={(CSO, sc.SIG_B): quiet}, transitions=transitions)
        i.signatures, i.nights = sigs, {(CSO, sc.SIG_B): nights}
        return planner.plan(i, planner.PlanSettings(verify_nightlies=2))

    one = plan([_night("2026-11-20", "ok")], 1, t)
    assert [a.action for a in one.actions if a.key == key] == ["comment"] and (key, {"quiet_nightlies": 1}) in one.notes
    untested_comment = plan([_night("2026-11-20", "create_error")], 1, t)
    [comment] = [a for a in untested_comment.actions if a.key == key]
    assert "Not tested in this nightly, so not counted as fixed: `Model02ForCausalLM` (create_error)" in comment.body
    # Five quiet nightlies on which the model was never tested: the old rule closed, this one does not.
    untested = [_night("2026-11-2" + str(d), s) for d, s in enumerate([None, "create_error", None, "input_error", None])]
    assert [a.action for a in plan(untested, 5).actions if a.key == key] == []
    two = plan([_night("2026-11-20", None), _night("2026-11-21", "ok"), _night("2026-11-22", "ok")], 3)
    assert [a.action for a in two.actions if a.key == key] == ["comment", "close"]
    body = two.actions[[a.key for a in two.actions].index(key)].body
    assert "verified fixed in nightly 2026-11-21; last failing 2026-11-19" in body and "2 consecutive" in body


def test_bot_closed_issue_reopens_when_the_signature_returns() -> None:
    key, links = _quiet_setup("bot", "closed", 0)
    plan = planner.plan(inputs(sc.corpus(), links=links), planner.PlanSettings())
    assert [a.action for a in plan.actions if a.key == key] == ["reopen", "comment", "edit"]


def test_human_closed_issue_is_left_alone_unless_it_regresses_after_a_fix() -> None:
    key, links = _quiet_setup("human", "closed", 0)
    plan = planner.plan(inputs(sc.corpus(), links=links), planner.PlanSettings())
    assert [a for a in plan.actions if a.key == key] == []
    gone = sc.corpus()
    gone["Model02ForCausalLM"][CSO] = 3
    quiet = planner.plan(inputs(gone, links=links, quiet={(CSO, sc.SIG_B): 1}), planner.PlanSettings())
    assert (key, {"closed_by": "human-fixed"}) in quiet.notes and not [a for a in quiet.actions if a.key == key]
    links[key]["closed_by"] = "human-fixed"
    back = planner.plan(inputs(sc.corpus(), links=links), planner.PlanSettings())
    reopen = [a for a in back.actions if a.key == key]
    assert [a.action for a in reopen] == ["reopen", "comment", "edit"] and "after it had been fixed" in reopen[1].body


def test_muted_issue_gets_nothing() -> None:
    key, links = _quiet_setup(None, "open", 0)
    links[key]["muted"] = True
    worse = sc.corpus()
    worse["Model06ForCausalLM"][CSO] = sc.SIG_B
    plan = planner.plan(inputs(worse, links=links), planner.PlanSettings())
    assert [a for a in plan.actions if a.key == key] == []


def test_routing_cc_and_labels_reach_the_issue() -> None:
    rules = compile_rules([{"signature": "^PendingUnbacked", "cc": ["ezyang"], "labels": ["module: dynamic shapes"]}])
    plan = planner.plan(inputs(sc.corpus()), planner.PlanSettings(rules=rules))
    a = next(a for a in plan.actions if a.signature == sc.SIG_A)
    assert a.labels == ["flagsweep", "module: dynamic shapes"] and "cc @ezyang" in a.body
    b = next(a for a in plan.actions if a.signature == sc.SIG_B)
    assert "cc @" not in b.body
    # A routing change alone re-labels the existing issue without a comment.
    again = planner.plan(inputs(sc.corpus(), links=links_after(planner.plan(inputs(sc.corpus()), planner.PlanSettings()))),
                         planner.PlanSettings(rules=rules))
    assert sorted(a.action for a in again.actions if a.key == planner.tracking_key(CSO, sc.SIG_A)) == ["edit", "labels"]


def test_trend_has_one_point_per_change() -> None:
    counts = [{"crashes": 3, "reduces_graphs": 2}] * 3 + [{"crashes": 4, "reduces_graphs": 2}]
    trend = {CSO: [{"date": f"2026-11-{17 + i}", "counts": c} for i, c in enumerate(counts)]}
    plan = planner.plan(inputs(sc.corpus(), trend=trend), planner.PlanSettings())
    body = next(a.body for a in plan.actions if a.kind == "summary" and a.config == CSO)
    assert 'x-axis ["2026-11-17", "2026-11-20"]' in body and "line [3, 4]" in body


def test_verified_reproducer_is_embedded_and_unconfirmed_is_said() -> None:
    key_a, key_b = planner.tracking_key(CSO, sc.SIG_A), planner.tracking_key(CSO, sc.SIG_B)
    i = inputs(sc.corpus())
    build = dict(fingerprint="fp", build_version="2.13.0", build_git="abc")
    i.reproducers = {(CSO, sc.SIG_A): Verdict(CSO, sc.SIG_A, "Model00ForCausalLM", status="confirmed",
                                              script="import torch\nprint(1)\n", **build),
                     (CSO, sc.SIG_B): Verdict(CSO, sc.SIG_B, "Model02ForCausalLM", status="unconfirmed",
                                              reason="ran without crashing in a fresh interpreter", **build)}
    plan = planner.plan(i, planner.PlanSettings())
    a = next(x for x in plan.actions if x.key == key_a).body
    b = next(x for x in plan.actions if x.key == key_b).body
    assert "Verified" in a and "```python\nimport torch" in a and "<details><summary>repro.py" in a
    assert "No reproducer was confirmed" in b and "ran without crashing" in b and "```python" not in b
    # A group the verify step gave no verdict (verification off) says so.
    c = next(x for x in plan.actions if x.config != CSO and x.kind == "tracking").body
    assert "Reproducer verification was not run for this publish." in c


def test_command_cc_handles_join_routing_without_repeats() -> None:
    rules = compile_rules([{"signature": "^PendingUnbacked", "cc": ["ezyang"]}])
    first = planner.plan(inputs(sc.corpus()), planner.PlanSettings(rules=rules))
    links = links_after(first)
    key = planner.tracking_key(CSO, sc.SIG_A)
    links[key]["cc"] = ["@ezyang", "@alice", "not a handle!"]
    plan = planner.plan(inputs(sc.corpus(), links=links), planner.PlanSettings(rules=rules))
    [edit] = [a for a in plan.actions if a.key == key]
    assert "cc @ezyang @alice\n" in edit.body and "not a handle" not in edit.body


def _range(kind: str, status: str = "found", reason: str | None = None) -> dict[str, Any]:
    from state.ranges import Build, Range
    return Range(run_id=7, config=CSO, signature=sc.SIG_A, kind=kind, status=status,
                 good=Build("2026-11-03", "2.14.0.dev20261103+cpu", "a" * 40),
                 bad=Build("2026-11-04", "2.14.0.dev20261104+cpu", "b" * 40), models=["M"], installs=3,
                 reason=reason).to_dict()


def test_a_range_alone_rewrites_the_body_without_a_what_changed_comment() -> None:
    key = planner.tracking_key(CSO, sc.SIG_A)
    worse = sc.corpus()
    worse["Model06ForCausalLM"][CSO] = sc.SIG_A
    t = [{"model": "Model06ForCausalLM", "config": CSO, "transition": "new_crash", "before": {"signature": None},
          "after": {"signature": sc.SIG_A, "effect": "crashes"}, "flaky": False}]
    first = planner.plan(inputs(sc.corpus()), planner.PlanSettings())
    night = planner.plan(inputs(worse, links=links_after(first), transitions=t), planner.PlanSettings())
    assert [a.action for a in night.actions if a.key == key] == ["edit", "comment"]
    ranged = inputs(worse, links=links_after(night) | {key: {**links_after(first)[key],
                    "body_sha": next(a.material for a in night.actions if a.key == key and a.action == "edit")}},
                    transitions=t)
    ranged.ranges = {(CSO, sc.SIG_A, "new_crash"): _range("new_crash", "bounded", "stopped after 8 installs")}
    again = planner.plan(ranged, planner.PlanSettings())
    [edit] = [a for a in again.actions if a.key == key]          # the body, and no second "what changed"
    assert edit.action == "edit" and f"compare/{'a' * 40}...{'b' * 40}" in edit.body
    assert "Regression range (bounded): last good nightly 2026-11-03" in edit.body
    assert "stopped after 8 installs" in edit.body


def test_the_close_comment_carries_the_fix_range() -> None:
    key, links = _quiet_setup(None, "open", 0)
    gone = sc.corpus()
    gone["Model02ForCausalLM"][CSO] = 3
    i = inputs(gone, links=links, quiet={(CSO, sc.SIG_B): 3})
    i.signatures = {(CSO, sc.SIG_B): {"models": ["Model02ForCausalLM"], "last_seen": "2026-11-19"}}
    i.nights = {(CSO, sc.SIG_B): [_night("2026-11-21", "ok"), _night("2026-11-22", "ok")]}
    i.ranges = {(CSO, sc.SIG_B, "fixed"): {**_range("fixed"), "signature": sc.SIG_B}}
    plan = planner.plan(i, planner.PlanSettings(verify_nightlies=2))
    [comment] = [a for a in plan.actions if a.key == key and a.action == "comment"]
    assert "verified fixed in nightly 2026-11-21" in comment.body
    assert ("Fix range: last failing nightly 2026-11-03 (`aaaaaaaaaa`) .. first fixed nightly 2026-11-04 "
            f"(`bbbbbbbbbb`): [aaaaaaaaaa...bbbbbbbbbb](https://github.com/pytorch/pytorch/compare/{'a' * 40}..."
            f"{'b' * 40})") in comment.body
