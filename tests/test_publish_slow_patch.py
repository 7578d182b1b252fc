"""A PATCH whose answer times out is looked for, not re-sent; the summary says what was written (issue 12, item 11)."""
from __future__ import annotations

from pathlib import Path

from bot.github import publish
from bot.text import markdown
from bot.github.client import GitHubPublisher
from state import db
from tests.fakegithub import FakeGitHub
from tests.fakegithub import scenario as sc
from tests.helpers_publish import make_settings


def _body(key: str, inner: str) -> str:
    return f"{markdown.marker(key)}\n{markdown.BEGIN}\n{inner}\n{markdown.END}\n"


def _patches(fake: FakeGitHub, number: int) -> int:
    return len(fake.requests.matching("PATCH", rf"/issues/{number}$"))


def test_an_edit_answered_too_late_is_found_not_resent(fake_github: FakeGitHub) -> None:
    fake = fake_github
    issue = fake.state.create_issue(fake.repo, "old title", _body("k1", "old"), user=fake.bot_login)
    slept: list[float] = []
    pub = GitHubPublisher(fake.settings(request_timeout=1, retry_backoff=0.5), sleep=slept.append)
    fake.faults.slow(2.5, 10, method="PATCH")           # every PATCH is stored, then answered after the timeout
    assert pub.edit_issue(issue.number, title="new title", body=_body("k1", "new")) is True
    assert _patches(fake, issue.number) == 1 and len(slept) == 1
    stored = fake.state.issues(fake.repo)[0]
    assert stored.title == "new title" and "new" in stored.body
    assert pub.close(issue.number) is True and _patches(fake, issue.number) == 2
    assert fake.state.issues(fake.repo)[0].state == "closed"
    fake.faults.clear()


def test_an_edit_that_did_not_land_is_sent_again_within_bounds(fake_github: FakeGitHub) -> None:
    fake = fake_github
    issue = fake.state.create_issue(fake.repo, "t", _body("k2", "old"), user=fake.bot_login)
    pub = GitHubPublisher(fake.settings(retry_backoff=0.5), sleep=lambda s: None)
    fake.faults.fail_next(1, status=502, method="PATCH")     # refused before storing: the look finds the old text
    assert pub.edit_issue(issue.number, body=_body("k2", "new")) is True
    assert _patches(fake, issue.number) == 2 and "new" in fake.state.issues(fake.repo)[0].body


def test_the_summary_says_written_skipped_and_pending(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, settings = fake_github, make_settings(fake_github, tmp_path, max_retries=0)
    conn = db.connect(settings.state_path)
    run_id = sc.record_nightly(conn, "2026-11-20", sc.corpus())
    first = publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                                publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    assert (first.written, first.unchanged) == (5, 0)
    assert "5 actions: 5 written, 0 skipped" in first.render()
    # The store forgets what it wrote (e.g. a restored backup): the plan edits, GitHub already has that text.
    conn.execute("UPDATE issue_links SET body_sha = NULL")
    again = publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                                publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    assert again.written == 0 and again.unchanged == again.done > 0
    out = again.render()
    assert f"0 written, {again.unchanged} skipped" in out and "written  " not in out
    assert all(row["result"] == "unchanged" for row in again.rows)
    # GitHub goes down: what was left is listed as pending, not "0 actions".
    conn.execute("UPDATE issue_links SET body_sha = NULL")
    fake.faults.fail_next(1000, status=503)
    stopped = publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                                  publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    fake.faults.clear()
    assert stopped.stopped and stopped.pending == 0 and stopped.written == 0   # stopped at the sync: nothing queued
    conn.execute("UPDATE issue_links SET body_sha = NULL")
    calls = {"n": 0}

    class DownAfterOne(GitHubPublisher):
        def edit_issue(self, *a, **kw):
            calls["n"] += 1
            if calls["n"] == 2:
                fake.faults.fail_next(1000, status=503)
            return super().edit_issue(*a, **kw)

    halted = publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                                 publisher=DownAfterOne(settings.github, sleep=lambda s: None))
    assert halted.stopped and halted.done >= 1 and halted.pending == halted.actions - halted.done > 0
    rows = [row["result"] for row in halted.rows]
    assert rows == ["unchanged"] * halted.done + ["pending"] * halted.pending
    # Still down: the next publish stops while resuming; it says what is left, not "0 actions".
    still = publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                                publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    left = halted.pending
    assert still.stopped and [row["result"] for row in still.rows] == ["pending"] * left
    assert f"{left} actions: 0 written, 0 skipped (GitHub already had it), {left} pending, 0 failed." in still.render()
    fake.faults.clear()
    resumed = publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                                  publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    assert resumed.resumed == halted.pending and resumed.pending == 0
    assert f"{len(resumed.rows)} actions: 0 written, {len(resumed.rows)} skipped" in resumed.render()
