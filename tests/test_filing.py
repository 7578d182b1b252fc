"""The planner's filing rules end to end: hand-made nightlies in a real store → publish → PyGithub → the fake GitHub.

The filing budget (new issues per night, open issues at most, pending by leverage), the evidence rule (watching
until a confirmed crash has enough models or nights), signature shifts (comment and re-key, not close + open),
and comments: one per issue and run however often it is published, and at most the day's budget.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from bot.github import publish
from bot.issues import keys
from bot.issues.context import PlanSettings
from bot.issues.plan import plan
from bot.issues.timeline import Timeline
from bot.settings import IssueSettings, Settings, VerifySettings
from harness.core.outcome import Outcome
from state import db, links
from tests import issueviews as iv
from tests.fakegithub import FakeGitHub
from tests.fakegithub import scenario as sc

CSO, M = sc.CSO, sc.M
# Twelve signatures under capture_scalar_outputs, blocking 7, 6, 6, 5, ... 2 models (leverage order = list order).
COUNTS = [7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 2]
SIGS = [f"RuntimeError: failure number {i:02d} in op_{i}" for i in range(len(COUNTS))]


def settings_for(fake: FakeGitHub, tmp: Path, **issues: Any) -> Settings:
    return Settings(state_path=tmp / "state.sqlite", github=fake.settings(retry_backoff=0.0),
                    issues=IssueSettings(**issues), verify=VerifySettings(enabled=False))


def twelve() -> dict[str, dict[str, sc.Spec]]:
    """A nightly of 49 models where the twelve signatures crash COUNTS models each."""
    results: dict[str, dict[str, sc.Spec]] = {}
    n = 0
    for sig, count in zip(SIGS, COUNTS):
        for _ in range(count):
            results[f"Model{n:02d}ForCausalLM"] = {"baseline": 3, CSO: sig}
            n += 1
    return results


def night(conn, settings: Settings, date: str, results: dict) -> publish.PublishSummary:
    run_id = sc.record_nightly(conn, date, results)
    return publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                               publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))


def tracked(fake: FakeGitHub) -> dict[str, Any]:
    """The tracking issues on GitHub, by the signature their body names."""
    out = {}
    for i in fake.state.issues(fake.repo):
        sig = next((s for s in SIGS + [sc.SIG_A, sc.SIG_B, sc.SIG_C, SHIFTED] if f"`{s}`" in i.body), None)
        if sig and not i.title.startswith("flagsweep summary"):
            out[sig] = i
    return out


def summary_body(fake: FakeGitHub, config: str = CSO) -> str:
    return next(i.body for i in fake.state.issues(fake.repo) if i.title.startswith(f"flagsweep summary: {config}"))


def test_twelve_signatures_file_five_a_night_in_leverage_order(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, settings = fake_github, settings_for(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    s1 = night(conn, settings, "2026-11-20", twelve())
    assert set(tracked(fake)) == set(SIGS[:5]) and s1.held == {"pending": 7, "watching": 0}
    body = summary_body(fake)
    assert "Pending (over the filing budget" in body
    pending_lines = [l for l in body.splitlines() if l.startswith("- `capture_scalar_outputs=True crashes")]
    assert len(pending_lines) == 7
    assert [next(s for s in SIGS if s in l) for l in pending_lines] == SIGS[5:]     # leverage order, titles shown
    assert "crashes 4/49 models" in pending_lines[0]

    night(conn, settings, "2026-11-21", twelve())
    assert set(tracked(fake)) == set(SIGS[:10])
    night(conn, settings, "2026-11-22", twelve())
    filed = tracked(fake)
    assert set(filed) == set(SIGS)
    assert sorted(SIGS, key=lambda s: filed[s].number) == SIGS      # filed in leverage order, night by night
    assert "Pending (over the filing budget" not in summary_body(fake)


def test_max_open_holds_and_a_closed_issue_frees_room(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, settings = fake_github, settings_for(fake_github, tmp_path, max_open=3)
    conn = db.connect(settings.state_path)
    night(conn, settings, "2026-11-20", twelve())
    assert set(tracked(fake)) == set(SIGS[:3])
    s2 = night(conn, settings, "2026-11-21", twelve())
    assert set(tracked(fake)) == set(SIGS[:3]) and s2.held["pending"] == 9
    # A maintainer closes one: the next night files the most leveraged pending one, and only it.
    fake.state.close_issue(fake.repo, tracked(fake)[SIGS[0]].number, user="maintainer")
    night(conn, settings, "2026-11-22", twelve())
    assert set(tracked(fake)) == set(SIGS[:4])
    assert sum(1 for i in fake.state.issues(fake.repo) if i.state == "open" and not i.title.startswith("flagsweep "
                                                                                                          "summary")) == 3


def test_a_one_model_signature_is_watched_a_night_then_filed(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, settings = fake_github, settings_for(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    s1 = night(conn, settings, "2026-11-20", sc.corpus())
    assert set(tracked(fake)) == {sc.SIG_A}                     # two models: filed at once
    assert s1.held == {"pending": 0, "watching": 2}
    body = summary_body(fake)
    assert "Watching (a new tracking issue needs a confirmed crash and 2 models or 2 consecutive nightlies)" in body
    assert f"`{sc.SIG_B}`: 1 model, seen on 1 consecutive nightly, confirmed" in body
    night(conn, settings, "2026-11-21", sc.corpus())
    assert set(tracked(fake)) == {sc.SIG_A, sc.SIG_B, sc.SIG_C}
    assert "Watching" not in summary_body(fake)


def test_dry_run_writes_held_issues_under_pending(fake_github: FakeGitHub, tmp_path: Path) -> None:
    settings = settings_for(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    run_id = sc.record_nightly(conn, "2026-11-20", sc.corpus())
    out = tmp_path / "out"
    publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(out),
                        publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(out)))
    held = sorted(p.name for p in (out / "pending").iterdir())
    assert held == sorted(f"watching-{keys.tracking_key(c, s)}.md" for c, s in [(CSO, sc.SIG_B), (sc.CDO, sc.SIG_C)])
    text = (out / "pending" / f"watching-{keys.tracking_key(CSO, sc.SIG_B)}.md").read_text()
    assert text.startswith("# capture_scalar_outputs=True crashes 1/10 models") and "## Reproducer" in text
    assert fake_github.requests == []


def test_an_unconfirmed_crash_is_watched_whatever_its_models() -> None:
    outs = [o for m in M[:3] for o in (sc.outcome(m, "baseline", 3, "decoder_llm"),
                                       Outcome(model=m, config=CSO, status="error", stratum="decoder_llm",
                                               error_type="RuntimeError", signature="RuntimeError: x"))]
    done = plan(iv.view(outs, configs={"baseline": {}, CSO: {}}), Timeline(), PlanSettings())
    assert [a.kind for a in done.actions if a.action == "create"] == ["summary"]
    assert [(h.status, h.title) for h in done.held] == [("watching", "capture_scalar_outputs crashes 3/3 models "
                                                                      "with RuntimeError")]
    summary = next(a for a in done.actions if a.kind == "summary")
    assert "3 models, seen on 1 consecutive nightly, not confirmed yet" in summary.body


SHIFTED = "Unsupported: data-dependent branching moved to a generic graph break"


def test_a_signature_shift_comments_and_rekeys_instead_of_close_and_open(fake_github: FakeGitHub,
                                                                        tmp_path: Path) -> None:
    fake, settings = fake_github, settings_for(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    night(conn, settings, "2026-11-20", sc.corpus())
    a = tracked(fake)[sc.SIG_A]
    moved = sc.corpus()
    moved[M[0]][CSO] = moved[M[1]][CSO] = SHIFTED                 # the same two models, a new signature
    night(conn, settings, "2026-11-21", moved)
    now = fake.state.repo(fake.repo).issues[a.number]
    assert now.state == "open" and now.title.endswith("with Unsupported") and f"`{SHIFTED}`" in now.body
    assert sc.SIG_A not in tracked(fake)
    [comment] = fake.state.comments(fake.repo, a.number)
    assert "Moved in nightly 2026-11-21" in comment.body and SHIFTED in comment.body and M[0] in comment.body
    new_key = keys.tracking_key(CSO, SHIFTED)
    assert links.get(conn, new_key).number == a.number and links.get(conn, keys.tracking_key(CSO, sc.SIG_A)) is None
    assert f"<!-- flagsweep:key={new_key} -->" in now.body
    assert [i.number for i in fake.state.issues(fake.repo) if i.title.startswith("capture_scalar")
            and i.title.endswith("with Unsupported")] == [a.number]
    # The next night is quiet: nothing written (the stored hash matches the moved issue's body).
    mark = len(fake.requests)
    night(conn, settings, "2026-11-22", moved)
    assert [r for r in fake.requests[mark:] if r.is_write] == []


def test_a_partial_overlap_is_no_shift() -> None:
    from bot.issues import shifts
    assert shifts.same_models({"a", "b", "c", "d", "e"}, {"a", "b", "c", "d"})         # 4/5 and 4/4
    assert not shifts.same_models({"a", "b", "c", "d", "e"}, {"a", "b", "c"})          # 3/5 of those that left
    assert not shifts.same_models({"a"}, {"a", "b"})                                   # 1/2 of the new ones
    assert not shifts.same_models(set(), set())


def test_publishing_the_same_run_twice_posts_no_second_comment(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, settings = fake_github, settings_for(fake_github, tmp_path, min_models=1)
    conn = db.connect(settings.state_path)
    night(conn, settings, "2026-11-20", sc.corpus())
    run_id = sc.record_nightly(conn, "2026-11-21", sc.nightly3())
    publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                        publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    b = tracked(fake)[sc.SIG_B]
    assert len(fake.state.comments(fake.repo, b.number)) == 1
    # The body changes (a cc rule added), the same run is published again: the body is rewritten, no comment.
    settings = replace(settings, routing=[{"signature": "GuardOnDataDependent", "cc": ["alice"]}])
    s = publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                            publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    assert "@alice" in fake.state.repo(fake.repo).issues[b.number].body and s.written >= 1
    assert len(fake.state.comments(fake.repo, b.number)) == 1


def test_one_comment_per_issue_per_day(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, settings = fake_github, settings_for(fake_github, tmp_path, min_models=1)
    conn = db.connect(settings.state_path)
    night(conn, settings, "2026-11-20", sc.corpus())
    night(conn, settings, "2026-11-21", sc.nightly3())            # M05 newly crashes with B: one comment
    b = tracked(fake)[sc.SIG_B]
    later = sc.nightly3()
    later[M[6]][CSO] = sc.SIG_B                                    # a later run the same day: M06 too
    night(conn, settings, "2026-11-21", later)
    issue = fake.state.repo(fake.repo).issues[b.number]
    assert M[6] in issue.body and issue.title.startswith("capture_scalar_outputs=True crashes 3/10")
    assert len(fake.state.comments(fake.repo, b.number)) == 1     # the body only
    night(conn, settings, "2026-11-22", sc.nightly3())            # the next day: M06 fixed, commented again
    assert len(fake.state.comments(fake.repo, b.number)) == 2



def test_only_the_summary_configs_get_a_summary_issue(fake_github: FakeGitHub, tmp_path: Path) -> None:
    # An every-flag sweep names one config per flag: summaries only for [issues] summary_configs (the readiness
    # table has the rest); crashes under any flag are still filed as tracking issues, under the budget.
    fake = fake_github
    settings = settings_for(fake, tmp_path, summary_configs=["dynamo.*"])
    conn = db.connect(settings.state_path)
    night(conn, settings, "2026-11-20", twelve())
    titles = [i.title for i in fake.state.issues(fake.repo)]
    assert len(tracked(fake)) == 5 and not [t for t in titles if t.startswith("flagsweep summary")]
    assert PlanSettings(summary_configs=["*"]).summarised(CSO) and PlanSettings().summarised(CSO)
    assert not PlanSettings().summarised("dynamo.allow_rnn")
