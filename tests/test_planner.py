"""The pure planner: a run view and its timeline in, actions with rendered text out. No store, no network."""
from __future__ import annotations

import dataclasses

from harness.core import fixes
from bot.issues.context import PlanSettings
from bot.issues.keys import summary_key, tracking_key
from bot.issues.material import BodyHash
from bot.issues.lifecycle import Plan
from bot.issues.plan import plan
from bot.issues.routing import compile_rules
from bot.issues.timeline import Seen, Timeline, TrendPoint
from harness.core.outcome import Outcome
from state.links import Link
from state.ranges import Build, Range
from state.verdicts import RunVerdict, Verdict
from tests import issueviews as iv
from tests.fakegithub import scenario as sc
from tests.issueviews import NONE, inputs

CSO = "capture_scalar_outputs"
def links_after(done: Plan) -> dict[str, Link]:
    """The links a successful publish of `done` leaves behind (what bot.github.publish stores)."""
    out = {}
    for n, a in enumerate((a for a in done.actions if a.action == "create"), 1):
        out[a.key] = Link(key=a.key, repo="o/r", number=n, kind=a.kind, config=a.config, signature=a.signature,
                          body_sha=a.material.text(), title=a.title)
    return out


def test_first_plan_creates_tracking_then_summaries() -> None:
    done = plan(inputs(sc.corpus()), NONE, PlanSettings(min_models=1))
    assert [(a.action, a.kind) for a in done.actions] == [("create", "tracking")] * 3 + [("create", "summary")] * 2
    keys = [a.key for a in done.actions]
    assert len(set(keys)) == 5
    assert tracking_key(CSO, sc.SIG_A) in keys
    for a in done.actions:
        assert a.body.startswith(f"<!-- flagsweep:key={a.key} -->") and len(a.title) <= 256


def test_same_results_plan_nothing() -> None:
    first = plan(inputs(sc.corpus()), NONE, PlanSettings(min_models=1))
    again = plan(inputs(sc.corpus(), links=links_after(first)), NONE, PlanSettings(min_models=1))
    assert again.actions == [] and again.notes == []


def test_keys_are_stable_and_distinct() -> None:
    assert tracking_key("a", "s") == tracking_key("a", "s")
    assert tracking_key("a", "s") != tracking_key("b", "s") != summary_key("a")


def test_title_counts_follow_the_results() -> None:
    first = plan(inputs(sc.corpus()), NONE, PlanSettings(min_models=1))
    worse = sc.corpus()
    worse["Model06ForCausalLM"][CSO] = sc.SIG_A
    done = plan(inputs(worse, links=links_after(first)), NONE, PlanSettings(min_models=1))
    edits = {a.key: a for a in done.actions if a.action == "edit" and a.kind == "tracking"}
    assert list(edits) == [tracking_key(CSO, sc.SIG_A)]
    assert edits[tracking_key(CSO, sc.SIG_A)].title == \
        "capture_scalar_outputs=True crashes 3/10 models with PendingUnbackedSymbolNotFound"


def test_flaky_crashes_are_not_filed() -> None:
    outs = [sc.outcome("M", "baseline", 3, "decoder_llm"), sc.outcome("M", CSO, sc.SIG_A, "decoder_llm")]
    outs[1].flaky_rate = 0.5
    done = plan(iv.view(outs, run_id=1, date="d", configs=sc.CONFIGS), NONE, PlanSettings(min_models=1))
    assert [a.kind for a in done.actions] == ["summary"]


def test_timeouts_group_by_status() -> None:
    outs = [sc.outcome("M", "baseline", 3, "decoder_llm"),
            Outcome(model="M", config=CSO, status="timeout", stratum="decoder_llm", attempts=3)]
    done = plan(iv.view(outs, run_id=1, date="d", configs=sc.CONFIGS), NONE, PlanSettings(min_models=1))
    assert done.actions[0].signature == "timeout" and done.actions[0].title.endswith("with timeout")


def _quiet_setup(closed_by: str | None, state: str) -> tuple[str, dict[str, Link]]:
    links = links_after(plan(inputs(sc.corpus()), NONE, PlanSettings(min_models=1)))
    key = tracking_key(CSO, sc.SIG_B)
    links[key] = dataclasses.replace(links[key], state=state, closed_by=closed_by)
    return key, links


def _night(date: str, status: str | None) -> fixes.Night:
    """Model02 on one nightly under CSO: compiled ("ok"), a build status, or not swept (None)."""
    m = "Model02ForCausalLM"
    if status is None:
        return fixes.Night(date, {})
    return fixes.Night(date, {m: (Outcome(m, "baseline", "ok" if status == "ok" else status),
                                  Outcome(m, CSO, status, graphs=3))})


def _awaiting(quiet: int, nights: list[fixes.Night]) -> Timeline:
    """B not seen for `quiet` nightlies, last seen on Model02 on 2026-11-19, with what `nights` did to it."""
    seen = Seen(CSO, sc.SIG_B, models=("Model02ForCausalLM",), last_seen="2026-11-19", quiet=quiet,
                nights=tuple(nights))
    return Timeline(signatures={(CSO, sc.SIG_B): seen})


def test_close_only_after_n_verified_nightlies_never_on_quiet_ones() -> None:
    key, links = _quiet_setup(None, "open")
    gone = sc.corpus()
    gone["Model02ForCausalLM"][CSO] = 3
    t = [iv.transition("Model02ForCausalLM", CSO, "fixed", sc.SIG_B, None)]

    def night_plan(nights, quiet, transitions=None):
        return plan(inputs(gone, links=links, transitions=transitions), _awaiting(quiet, nights),
                    PlanSettings(verify_nightlies=2, min_models=1))

    one = night_plan([_night("2026-11-20", "ok")], 1, t)
    assert [a.action for a in one.actions if a.key == key] == ["comment"] and (key, {"quiet_nightlies": 1}) in one.notes
    untested_comment = night_plan([_night("2026-11-20", "create_error")], 1, t)
    [comment] = [a for a in untested_comment.actions if a.key == key]
    assert "Not tested in this nightly, so not counted as fixed: `Model02ForCausalLM` (create_error)" in comment.body
    # Five quiet nightlies on which the model was never tested: the old rule closed, this one does not.
    untested = [_night("2026-11-2" + str(d), s) for d, s in enumerate([None, "create_error", None, "input_error", None])]
    assert [a.action for a in night_plan(untested, 5).actions if a.key == key] == []
    two = night_plan([_night("2026-11-20", None), _night("2026-11-21", "ok"), _night("2026-11-22", "ok")], 3)
    assert [a.action for a in two.actions if a.key == key] == ["comment", "close"]
    body = two.actions[[a.key for a in two.actions].index(key)].body
    assert "verified fixed in nightly 2026-11-21; last failing 2026-11-19" in body and "2 consecutive" in body


def test_bot_closed_issue_reopens_when_the_signature_returns() -> None:
    key, links = _quiet_setup("bot", "closed")
    done = plan(inputs(sc.corpus(), links=links), NONE, PlanSettings(min_models=1))
    assert [a.action for a in done.actions if a.key == key] == ["reopen", "comment", "edit"]


def test_human_closed_issue_is_left_alone_unless_it_regresses_after_a_fix() -> None:
    key, links = _quiet_setup("human", "closed")
    done = plan(inputs(sc.corpus(), links=links), NONE, PlanSettings(min_models=1))
    assert [a for a in done.actions if a.key == key] == []
    gone = sc.corpus()
    gone["Model02ForCausalLM"][CSO] = 3
    one_quiet = Timeline(signatures={(CSO, sc.SIG_B): Seen(CSO, sc.SIG_B, quiet=1)})
    quiet = plan(inputs(gone, links=links), one_quiet, PlanSettings(min_models=1))
    assert (key, {"closed_by": "human-fixed"}) in quiet.notes and not [a for a in quiet.actions if a.key == key]
    links[key].closed_by = "human-fixed"
    back = plan(inputs(sc.corpus(), links=links), NONE, PlanSettings(min_models=1))
    reopen = [a for a in back.actions if a.key == key]
    assert [a.action for a in reopen] == ["reopen", "comment", "edit"] and "after it had been fixed" in reopen[1].body


def test_muted_issue_gets_nothing() -> None:
    key, links = _quiet_setup(None, "open")
    links[key].muted = True
    worse = sc.corpus()
    worse["Model06ForCausalLM"][CSO] = sc.SIG_B
    done = plan(inputs(worse, links=links), NONE, PlanSettings(min_models=1))
    assert [a for a in done.actions if a.key == key] == []


def test_routing_cc_and_labels_reach_the_issue() -> None:
    rules = compile_rules([{"signature": "^PendingUnbacked", "cc": ["ezyang"], "labels": ["module: dynamic shapes"]}])
    done = plan(inputs(sc.corpus()), NONE, PlanSettings(rules=rules, min_models=1))
    a = next(a for a in done.actions if a.signature == sc.SIG_A)
    assert a.labels == ["flagsweep", "module: dynamic shapes"] and "cc @ezyang" in a.body
    b = next(a for a in done.actions if a.signature == sc.SIG_B)
    assert "cc @" not in b.body
    # A routing change alone re-labels the existing issue without a comment.
    again = plan(inputs(sc.corpus(), links=links_after(plan(inputs(sc.corpus()), NONE, PlanSettings(min_models=1)))), NONE,
                 PlanSettings(rules=rules, min_models=1))
    assert sorted(a.action for a in again.actions if a.key == tracking_key(CSO, sc.SIG_A)) == ["edit", "labels"]


def test_trend_has_one_point_per_change() -> None:
    counts = [(3, 2)] * 3 + [(4, 2)]
    trend = {CSO: tuple(TrendPoint(f"2026-11-{17 + i}", c, r) for i, (c, r) in enumerate(counts))}
    done = plan(inputs(sc.corpus()), Timeline(trend=trend), PlanSettings(min_models=1))
    body = next(a.body for a in done.actions if a.kind == "summary" and a.config == CSO)
    assert 'x-axis ["2026-11-17", "2026-11-20"]' in body and "line [3, 4]" in body


def test_verified_reproducer_is_embedded_and_unconfirmed_is_said() -> None:
    key_a, key_b = tracking_key(CSO, sc.SIG_A), tracking_key(CSO, sc.SIG_B)
    build = dict(fingerprint="fp", build_version="2.13.0", build_git="abc")
    found = [Verdict(CSO, sc.SIG_A, "Model00ForCausalLM", status="confirmed", script="import torch\nprint(1)\n",
                     **build),
             Verdict(CSO, sc.SIG_B, "Model02ForCausalLM", status="unconfirmed",
                     reason="ran without crashing in a fresh interpreter", **build)]
    done = plan(inputs(sc.corpus(), verdicts=[RunVerdict(v.config, v.signature, v) for v in found]), NONE,
                PlanSettings(min_models=1))
    a = next(x for x in done.actions if x.key == key_a).body
    b = next(x for x in done.actions if x.key == key_b).body
    assert "Verified" in a and "```python\nimport torch" in a and "<details><summary>The harness script" in a
    assert "Not verified: ran without crashing" in b and "```python" not in b
    # A group the verify step gave no verdict (verification off) says so.
    c = next(x for x in done.actions if x.config != CSO and x.kind == "tracking").body
    assert "Reproducer verification was not run for this publish." in c


def test_command_cc_handles_join_routing_without_repeats() -> None:
    rules = compile_rules([{"signature": "^PendingUnbacked", "cc": ["ezyang"]}])
    links = links_after(plan(inputs(sc.corpus()), NONE, PlanSettings(rules=rules, min_models=1)))
    key = tracking_key(CSO, sc.SIG_A)
    links[key].cc = ["@ezyang", "@alice", "not a handle!"]
    done = plan(inputs(sc.corpus(), links=links), NONE, PlanSettings(rules=rules, min_models=1))
    [edit] = [a for a in done.actions if a.key == key]
    assert "cc @ezyang @alice\n" in edit.body and "not a handle" not in edit.body


def _range(kind: str, status: str = "found", reason: str | None = None, sig: str = sc.SIG_A) -> Range:
    return Range(run_id=7, config=CSO, signature=sig, kind=kind, status=status,
                 good=Build("2026-11-03", "2.14.0.dev20261103+cpu", "a" * 40),
                 bad=Build("2026-11-04", "2.14.0.dev20261104+cpu", "b" * 40), models=["M"], installs=3, reason=reason)


def test_a_range_alone_rewrites_the_body_without_a_what_changed_comment() -> None:
    key = tracking_key(CSO, sc.SIG_A)
    worse = sc.corpus()
    worse["Model06ForCausalLM"][CSO] = sc.SIG_A
    t = [iv.transition("Model06ForCausalLM", CSO, "new_crash", None, sc.SIG_A, effect="crashes")]
    first = plan(inputs(sc.corpus()), NONE, PlanSettings(min_models=1))
    night = plan(inputs(worse, links=links_after(first), transitions=t), NONE, PlanSettings(min_models=1))
    assert [a.action for a in night.actions if a.key == key] == ["edit", "comment"]
    edited = next(a.material for a in night.actions if a.key == key and a.action == "edit")
    links = links_after(first)
    links[key].body_sha = edited.text()
    ranged = inputs(worse, links=links, transitions=t,
                    ranges=[_range("new_crash", "bounded", "stopped after 8 installs")])
    again = plan(ranged, NONE, PlanSettings(min_models=1))
    [edit] = [a for a in again.actions if a.key == key]          # the body, and no second "what changed"
    assert edit.action == "edit" and f"compare/{'a' * 40}...{'b' * 40}" in edit.body
    assert "Regression range (bounded): last good nightly 2026-11-03" in edit.body
    assert "stopped after 8 installs" in edit.body
    assert (edit.material.results, edit.material.labels) == (edited.results, edited.labels)
    assert edited.range == "" and edit.material.range != ""


def test_the_close_comment_carries_the_fix_range() -> None:
    key, links = _quiet_setup(None, "open")
    gone = sc.corpus()
    gone["Model02ForCausalLM"][CSO] = 3
    timeline = _awaiting(3, [_night("2026-11-21", "ok"), _night("2026-11-22", "ok")])
    done = plan(inputs(gone, links=links, ranges=[_range("fixed", sig=sc.SIG_B)]), timeline,
                PlanSettings(verify_nightlies=2, min_models=1))
    [comment] = [a for a in done.actions if a.key == key and a.action == "comment"]
    assert "verified fixed in nightly 2026-11-21" in comment.body
    assert ("Fix range: last failing nightly 2026-11-03 (`aaaaaaaaaa`) .. first fixed nightly 2026-11-04 "
            f"(`bbbbbbbbbb`): [aaaaaaaaaa...bbbbbbbbbb](https://github.com/pytorch/pytorch/compare/{'a' * 40}..."
            f"{'b' * 40})") in comment.body


# The hashes the previous version of the planner stored for this plan (the `results[+range].labels` strings):
# a store it wrote must read back as unchanged, or every issue would be rewritten once.
STORED_BEFORE = {
    tracking_key("capture_dynamic_output_shape_ops", sc.SIG_C): "e82ff24e154de73372b6.baafe276627074c42b3d",
    tracking_key(CSO, sc.SIG_B): "63a734cbab29a8c7612a.baafe276627074c42b3d",
    tracking_key(CSO, sc.SIG_A): "49c652d58bbe3cf31425+106cf158c5ad3d580bcb.baafe276627074c42b3d",
    summary_key("capture_dynamic_output_shape_ops"): "6c47a5c65bfb3bca7dfa.baafe276627074c42b3d",
    summary_key(CSO): "a23d51321bbc3e15ba1a.baafe276627074c42b3d",
}


def test_a_store_written_by_the_previous_version_plans_no_rewrite() -> None:
    found = Range(run_id=7, config=CSO, signature=sc.SIG_A, kind="new_crash", status="found",
                  good=Build("2026-11-03", "v", "a" * 40), bad=Build("2026-11-04", "w", "b" * 40), models=["M"],
                  installs=3)
    first = plan(inputs(sc.corpus(), ranges=[found]), NONE, PlanSettings(min_models=1))
    assert {a.key: a.material.text() for a in first.actions} == STORED_BEFORE
    links = links_after(first)
    for key, text in STORED_BEFORE.items():
        links[key].body_sha = text
    assert plan(inputs(sc.corpus(), links=links, ranges=[found]), NONE, PlanSettings(min_models=1)).actions == []


def test_the_body_hash_reads_back_every_form_it_was_stored_in() -> None:
    results, regression, labels = "1" * 20, "2" * 20, "3" * 20
    for text in (f"{results}.{labels}", f"{results}+{regression}.{labels}", f".{labels}"):
        assert BodyHash.parse(text).text() == text
    assert BodyHash.parse(f"{results}+{regression}.{labels}") == BodyHash(results, regression, labels)
    assert BodyHash.parse(f".{labels}") == BodyHash(labels=labels)           # a link rebuilt from GitHub's labels
    assert BodyHash.parse(None) == BodyHash.parse("") == BodyHash()          # never stored: nothing known
    stored = BodyHash(results, regression, labels)
    assert stored.same_body(BodyHash(results, regression, "other labels"))
    assert not stored.same_body(BodyHash(results, "", labels)) and not stored.same_body(stored.without_body())


def test_a_link_without_a_stored_hash_is_rewritten_and_relabelled_once() -> None:
    first = plan(inputs(sc.corpus()), NONE, PlanSettings(min_models=1))
    cleared = links_after(first)
    for link in cleared.values():
        link.body_sha = None
    again = plan(inputs(sc.corpus(), links=cleared), NONE, PlanSettings(min_models=1))
    kinds = {(a.kind, a.action) for a in again.actions}
    assert kinds == {("tracking", "edit"), ("tracking", "labels"), ("summary", "edit")}
    assert not [a for a in again.actions if a.action == "comment"]          # nothing changed: nothing to say
    relinked = links_after(first)
    for a in again.actions:
        relinked[a.key].body_sha = a.material.text()
    assert plan(inputs(sc.corpus(), links=relinked), NONE, PlanSettings(min_models=1)).actions == []
