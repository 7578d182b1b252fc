"""End to end: hand-made nightlies in a real SQLite store → planner → outbox → PyGithub → the fake GitHub over HTTP."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from bot.github import publish
from bot.github.client import GitHubPublisher
from bot.issues.material import BodyHash
from state import db, links, outbox
from tests.fakegithub import FakeGitHub
from tests.fakegithub import scenario as sc
from tests.helpers_publish import make_settings

CSO, CDO, M = sc.CSO, sc.CDO, sc.M
nightly3, quiet_c = sc.nightly3, sc.quiet_c







def run(conn, settings, date: str, results: dict, publisher=None) -> publish.PublishSummary:
    run_id = sc.record_nightly(conn, date, results)
    return publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                               publisher=publisher or publish.open_publisher(settings, dry_run=False, out_dir=None))


def by_title(fake: FakeGitHub) -> dict[str, Any]:
    return {i.title: i for i in fake.state.issues(fake.repo)}


def writes(fake: FakeGitHub, since: int) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in fake.requests[since:] if r.is_write and r.status < 400]


def test_nightly_story_files_updates_closes_and_reopens(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, settings = fake_github, make_settings(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    repo = fake.repo

    # Nightly 1 files one tracking issue per (config, signature) and one summary per config.
    s1 = run(conn, settings, "2026-11-20", sc.corpus())
    titles = sorted(by_title(fake))
    assert titles == [
        "capture_dynamic_output_shape_ops=True crashes 1/10 models with Unsupported",
        "capture_scalar_outputs=True crashes 1/10 models with GuardOnDataDependentSymNode",
        "capture_scalar_outputs=True crashes 2/10 models with PendingUnbackedSymbolNotFound",
        "flagsweep summary: capture_dynamic_output_shape_ops=True: 1 crash, 0 fewer graphs, of 10 testable models",
        "flagsweep summary: capture_scalar_outputs=True: 3 crashes, 2 fewer graphs, of 10 testable models",
    ]
    assert (s1.actions, s1.done, s1.pending) == (5, 5, 0)
    for issue in fake.state.issues(repo):
        assert issue.user == fake.bot_login and issue.labels == ["flagsweep"]
        assert issue.body.count("<!-- flagsweep:key=") == 1
    body_a = by_title(fake)["capture_scalar_outputs=True crashes 2/10 models with PendingUnbackedSymbolNotFound"].body
    sections = ["## Summary", "## Error", "## Affected models", "## Observations", "## Reproducer", "## Environment",
                "## History", "<details><summary>Method"]
    assert [body_a.index(s) for s in sections] == sorted(body_a.index(s) for s in sections)
    summary_cso = next(i for i in fake.state.issues(repo) if i.title.startswith("flagsweep summary: capture_scalar"))
    assert "```mermaid" in summary_cso.body and "[[flagsweep-ref:" not in summary_cso.body
    numbers = {i.title.split(" with ")[-1]: i.number for i in fake.state.issues(repo)}
    assert f"#{numbers['PendingUnbackedSymbolNotFound']} " in summary_cso.body

    # Nightly 2, identical: zero writes, and two reads (the kill switch's label, the listing of the bot's issues).
    mark = len(fake.requests)
    s2 = run(conn, settings, "2026-11-21", sc.corpus())
    assert writes(fake, mark) == [] and s2.actions == 0
    assert [(r.method, r.path, r.query.get("labels")) for r in fake.requests[mark:]] == [
        ("GET", f"/repos/{repo}/issues", "flagsweep: pause"), ("GET", f"/repos/{repo}/issues", None)]

    # Nightly 3: one model fixed, one new crash: exactly the affected issues are edited and commented once.
    mark = len(fake.requests)
    run(conn, settings, "2026-11-22", nightly3())
    issues = by_title(fake)
    a = issues["capture_scalar_outputs=True crashes 1/10 models with PendingUnbackedSymbolNotFound"]
    b = issues["capture_scalar_outputs=True crashes 2/10 models with GuardOnDataDependentSymNode"]
    summ = next(i for t, i in issues.items() if t.startswith("flagsweep summary: capture_scalar"))
    expected = sorted([("PATCH", f"/repos/{repo}/issues/{n}") for n in (a.number, b.number, summ.number)] +
                      [("POST", f"/repos/{repo}/issues/{n}/comments") for n in (a.number, b.number, summ.number)])
    assert sorted(writes(fake, mark)) == expected
    [ca] = fake.state.comments(repo, a.number)
    assert M[1] in ca.body and "no longer crashing" in ca.body
    [cb] = fake.state.comments(repo, b.number)
    assert M[5] in cb.body and "newly crashing" in cb.body

    # Signature C goes quiet: one "not seen" comment, then closed after verify_nightlies=2 verified nightlies.
    c_number = next(i.number for t, i in issues.items() if t.endswith("with Unsupported"))
    run(conn, settings, "2026-11-23", quiet_c(nightly3()))
    assert fake.state.repo(repo).issues[c_number].state == "open"
    assert "Not seen in this nightly" in fake.state.comments(repo, c_number)[-1].body
    mark = len(fake.requests)
    run(conn, settings, "2026-11-24", quiet_c(nightly3()))
    assert fake.state.repo(repo).issues[c_number].state == "closed"
    assert writes(fake, mark) == [("POST", f"/repos/{repo}/issues/{c_number}/comments"),
                                  ("PATCH", f"/repos/{repo}/issues/{c_number}")]
    assert links.get(conn, next(k for k, l in links.all_links(conn).items() if l.number == c_number)).closed_by == "bot"
    mark = len(fake.requests)
    run(conn, settings, "2026-11-25", quiet_c(nightly3()))
    assert writes(fake, mark) == []                                   # closed and quiet: nothing more to say

    # It comes back: reopened, with a comment, and the body refreshed.
    run(conn, settings, "2026-11-26", nightly3())
    c = fake.state.repo(repo).issues[c_number]
    assert c.state == "open" and c.state_reason == "reopened"
    assert "Reopening" in fake.state.comments(repo, c_number)[-1].body
    assert len([i for i in fake.state.issues(repo)]) == 5                 # never a duplicate


def _final_state(fake: FakeGitHub) -> list[dict]:
    return fake.state.snapshot(fake.repo)


class Crash(BaseException):
    """A process dying mid-publish (not an Exception: nothing may catch it)."""


class CrashingPublisher(GitHubPublisher):
    """Dies right after its n-th successful write reached GitHub, before the store hears of it."""

    def __init__(self, settings, after: int) -> None:
        super().__init__(settings)
        self.left = after

    def _call(self, what, fn, *, write, look=None, uncertain=False):
        result = super()._call(what, fn, write=write, look=look, uncertain=uncertain)
        if write:
            self.left -= 1
            if self.left == 0:
                raise Crash(what)
        return result


@pytest.mark.parametrize("crash_after", [1, 3, 6])
def test_crash_mid_publish_then_restart_matches_uninterrupted(tmp_path: Path, crash_after: int) -> None:
    plain, crashy = FakeGitHub.start(), FakeGitHub.start()
    try:
        s_plain = make_settings(plain, tmp_path / "plain")
        conn_plain = db.connect(s_plain.state_path)
        run(conn_plain, s_plain, "2026-11-20", sc.corpus())
        run(conn_plain, s_plain, "2026-11-21", nightly3())

        s_crash = make_settings(crashy, tmp_path / "crash")
        conn = db.connect(s_crash.state_path)
        stories = [("2026-11-20", sc.corpus()), ("2026-11-21", nightly3())]
        crashed = 0
        for date, results in stories:
            run_id = sc.record_nightly(conn, date, results)
            try:
                publish.publish_run(conn, s_crash, run_id, dry_run=False, out_dir=None,
                                    publisher=CrashingPublisher(s_crash.github, crash_after))
            except Crash:
                crashed += 1
                # Restart: a fresh process publishes the same run again.
                summary = publish.publish_run(conn, s_crash, run_id, dry_run=False, out_dir=None,
                                              publisher=publish.open_publisher(s_crash, dry_run=False, out_dir=None))
                assert summary.resumed >= 1 and summary.pending == 0
        assert crashed >= 1
        assert _final_state(crashy) == _final_state(plain)
        assert outbox.counts(conn).get("pending", 0) == 0
    finally:
        plain.stop()
        crashy.stop()


def test_faults_make_no_duplicates(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, settings = fake_github, make_settings(fake_github, tmp_path, max_retries=4)
    conn = db.connect(settings.state_path)
    fake.faults.fail_next(2, status=502, method="POST", path="/issues")
    fake.faults.drop_after_write(1, method="POST", path="/issues")          # the issue is stored, the answer lost
    fake.faults.secondary_rate_limit(1, retry_after=0, method="PATCH")
    pub = GitHubPublisher(settings.github, sleep=lambda s: None)
    s1 = run(conn, settings, "2026-11-20", sc.corpus(), publisher=pub)
    assert s1.pending == 0 and len(fake.state.issues(fake.repo)) == 5
    fake.faults.drop_after_write(2, method="POST", path="/comments")       # comments stored, answers lost
    fake.faults.fail_next(1, status=500, method="PATCH")
    pub = GitHubPublisher(settings.github, sleep=lambda s: None)
    run(conn, settings, "2026-11-21", nightly3(), publisher=pub)
    assert fake.faults.pending() == 0
    assert len(fake.state.issues(fake.repo)) == 5
    for issue in fake.state.issues(fake.repo):
        bodies = [c.body for c in fake.state.comments(fake.repo, issue.number)]
        assert len(bodies) == len(set(bodies)) <= 1
    assert sum(len(fake.state.comments(fake.repo, i.number)) for i in fake.state.issues(fake.repo)) == 3
    assert ("rate limit", 0.0) in pub.waits


def test_github_down_leaves_the_rest_pending_then_resumes(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, settings = fake_github, make_settings(fake_github, tmp_path, max_retries=1)
    conn = db.connect(settings.state_path)
    run_id = sc.record_nightly(conn, "2026-11-20", sc.corpus())
    calls = {"n": 0}

    class Flaky(GitHubPublisher):
        # Two creates go through, then GitHub is down for good (every request answers 503).
        def create_issue(self, *a, **kw):
            calls["n"] += 1
            if calls["n"] == 3:
                fake.faults.fail_next(1000, status=503)
            return super().create_issue(*a, **kw)

    summary = publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                                  publisher=Flaky(settings.github, sleep=lambda s: None))
    assert summary.stopped and "still failing" in summary.stopped
    assert summary.pending == 3 and len(fake.state.issues(fake.repo)) == 2
    assert "stays in the outbox" in summary.render()
    fake.faults.clear()
    again = publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                                publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    assert again.pending == 0 and again.resumed == 3 and again.actions == 0
    assert len(fake.state.issues(fake.repo)) == 5


def test_human_edits_kept_and_human_close_respected(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, settings = fake_github, make_settings(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    run(conn, settings, "2026-11-20", sc.corpus())
    issues = by_title(fake)
    a = issues["capture_scalar_outputs=True crashes 2/10 models with PendingUnbackedSymbolNotFound"]
    b = issues["capture_scalar_outputs=True crashes 1/10 models with GuardOnDataDependentSymNode"]
    a.body = "Triage note: looking into it, see pytorch#1.\n\n" + a.body + "\nMore human notes below."
    fake.state.close_issue(fake.repo, b.number, user=fake.human, reason="not_planned")
    run(conn, settings, "2026-11-21", nightly3())
    a2 = fake.state.repo(fake.repo).issues[a.number]
    assert a2.body.startswith("Triage note: looking into it") and a2.body.endswith("More human notes below.")
    assert "1/10 models" in a2.title and M[1] not in a2.body.split("## Affected models")[1].split("##")[0]
    b2 = fake.state.repo(fake.repo).issues[b.number]
    assert b2.state == "closed" and fake.state.comments(fake.repo, b.number) == []
    # B goes away, then regresses: now the bot reopens the human-closed issue.
    later = copy.deepcopy(nightly3())
    later[M[2]][CSO] = 3
    later[M[5]][CSO] = 3
    run(conn, settings, "2026-11-22", later)
    assert fake.state.repo(fake.repo).issues[b.number].state == "closed"
    run(conn, settings, "2026-11-23", nightly3())
    assert fake.state.repo(fake.repo).issues[b.number].state == "open"
    assert "after it had been fixed" in fake.state.comments(fake.repo, b.number)[-1].body


def test_the_body_hash_the_plan_sends_is_the_one_the_link_keeps(fake_github: FakeGitHub, tmp_path: Path) -> None:
    """The outbox carries each action's body hash in its stored form and the link keeps it as sent; an entry left
    by an earlier publish is applied the same way, and a stale body part alone earns one edit, no relabel."""
    fake, settings = fake_github, make_settings(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    run_id = sc.record_nightly(conn, "2026-11-20", sc.corpus())
    publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                        publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    stored = {k: l.body_sha for k, l in links.all_links(conn).items()}
    assert stored == {e.key: e.payload.material for e in outbox.entries(conn)}
    assert all(BodyHash.parse(text).text() == text for text in stored.values())
    key = next(k for k in stored if k.startswith("t"))
    labels_part = BodyHash.parse(stored[key]).labels
    stale = BodyHash("0" * 20, "1" * 20, labels_part).text()
    left = outbox.IssuePayload(number=links.get(conn, key).number, kind="tracking", labels=["flagsweep"],
                               material=stale)
    outbox.enqueue(conn, "left-over", run_id, [(key, "labels", left)])
    mark = len(outbox.entries(conn))
    summary = publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                                  publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    assert summary.resumed == 1
    assert [(e.key, e.action) for e in outbox.entries(conn)[mark:]] == [(key, "edit")]
    assert links.get(conn, key).body_sha == stored[key]


def test_lost_store_is_rebuilt_from_github(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake = fake_github
    first = make_settings(fake, tmp_path / "a")
    run(db.connect(first.state_path), first, "2026-11-20", sc.corpus())
    before = _final_state(fake)
    fresh = make_settings(fake, tmp_path / "b")                 # the store is gone
    conn = db.connect(fresh.state_path)
    mark = len(fake.requests)
    summary = run(conn, fresh, "2026-11-21", sc.corpus())
    assert summary.synced["rebuilt"] == 5
    assert len(fake.state.issues(fake.repo)) == 5
    # Found by marker, so refreshed in place (the new store's history starts a day later), never filed again.
    assert {m for m, _ in writes(fake, mark)} <= {"PATCH"}
    after = _final_state(fake)
    assert [(i["number"], i["title"], i["comments"]) for i in after] == [(i["number"], i["title"], i["comments"]) for i in before]
    rebuilt = links.all_links(conn, fake.repo)
    assert {l.kind for l in rebuilt.values()} == {"tracking", "summary"}
    assert {l.signature for l in rebuilt.values() if l.kind == "tracking"} == {sc.SIG_A, sc.SIG_B, sc.SIG_C}


def test_dry_run_renders_files_and_touches_nothing(fake_github: FakeGitHub, tmp_path: Path) -> None:
    settings = make_settings(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    run_id = sc.record_nightly(conn, "2026-11-20", sc.corpus())
    out = tmp_path / "out"
    summary = publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(out),
                                  publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(out)))
    files = sorted(p.name for p in out.iterdir())
    assert len(files) == 6 and "plan.json" in files
    plan = json.loads((out / "plan.json").read_text())
    assert [a["action"] for a in plan["actions"]] == ["create"] * 5
    assert summary.out_dir == str(out) and "dry run" in summary.render()
    assert fake_github.requests == [] and links.all_links(conn) == {} and outbox.entries(conn) == []
    tracking = (out / files[0]).read_text()
    assert tracking.startswith("# capture_") and "<!-- flagsweep:key=" in tracking


def test_cli_publish_json_dry_run_then_real(fake_github: FakeGitHub, tmp_path: Path, capsys, monkeypatch) -> None:
    from bot.cli.main import main
    state = tmp_path / "state.sqlite"
    conn = db.connect(state)
    sc.record_nightly(conn, "2026-11-20", sc.corpus())
    toml = tmp_path / "flagsweep.toml"
    toml.write_text(f'[github]\nbase_url = "{fake_github.base_url}"\nmutation_interval = 0\nretry_backoff = 0.0\n'
                    '[verify]\nenabled = false\n[issues]\nmin_models = 1\n')
    monkeypatch.delenv("FLAGSWEEP_GITHUB_TOKEN", raising=False)
    # No credentials: a dry run, said on stderr; stdout holds only the JSON.
    code = main(["--settings", str(toml), "--state", str(state), "publish", "--out", str(tmp_path / "out"), "--json"])
    captured = capsys.readouterr()
    assert code == 0 and "dry run" in captured.err
    data = json.loads(captured.out)
    assert data["dry_run"] is True and data["actions"] == 5 and data["out_dir"] == str(tmp_path / "out")
    assert fake_github.requests == []
    # With a token and a repo: the real thing, through the fake.
    monkeypatch.setenv("FLAGSWEEP_GITHUB_TOKEN", fake_github.token)
    code = main(["--settings", str(toml), "--state", str(state), "publish", "1", "--repo", fake_github.repo])
    out = capsys.readouterr().out
    assert code == 0 and "5 actions: 5 written, 0 skipped (GitHub already had it), 0 pending, 0 failed." in out
    assert len(fake_github.state.issues(fake_github.repo)) == 5
    with pytest.raises(SystemExit) as refused:      # refused by its argument type (issue 31: one OWNER/NAME rule)
        main(["--settings", str(toml), "--state", str(state), "publish", "--repo", "nonsense"])
    assert refused.value.code == 2 and "expected OWNER/NAME, got 'nonsense'" in capsys.readouterr().err


def test_ad_hoc_runs_do_not_count_as_quiet_nightlies(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, settings = fake_github, make_settings(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    run(conn, settings, "2026-11-20", sc.corpus())
    c_number = next(i.number for i in fake.state.issues(fake.repo) if i.title.endswith("with Unsupported"))
    few = {m: r for m, r in quiet_c(sc.corpus()).items() if m in (M[6], M[7])}
    for _ in range(3):                                   # e.g. comment-command sweeps of two other models
        sc.record_nightly(conn, "", few, kind="command")
    run(conn, settings, "2026-11-21", quiet_c(sc.corpus()))
    assert fake.state.repo(fake.repo).issues[c_number].state == "open"      # one quiet nightly, not four
    run(conn, settings, "2026-11-22", quiet_c(sc.corpus()))
    assert fake.state.repo(fake.repo).issues[c_number].state == "closed"


@pytest.mark.parametrize("n_models", [10, 200])
def test_quiet_nightly_reads_do_not_grow_with_models(fake_github: FakeGitHub, tmp_path: Path, n_models: int) -> None:
    settings = make_settings(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    results = sc.corpus(n_models)
    run(conn, settings, "2026-11-20", results)
    mark = len(fake_github.requests)
    run(conn, settings, "2026-11-21", results)
    assert [(r.method, r.path) for r in fake_github.requests[mark:]] == [("GET", f"/repos/{fake_github.repo}/issues")] * 2
