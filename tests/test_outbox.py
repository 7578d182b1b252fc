"""The outbox payload: one type per action, written by `outbox.enqueue`, read back strictly, sent and applied by
publish's one table of actions, against the fake GitHub over HTTP."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.github import outbox_steps, publish
from bot.github.client import GitHubPublisher
from bot.github.port import ActionRefused
from bot.issues.lifecycle import Action
from bot.issues.material import BodyHash
from bot.text import markdown
from harness.core.record import RecordError
from state import db, links, outbox
from tests.fakegithub import FakeGitHub

KEY = "t-capture_scalar_outputs-abc"
MATERIAL = BodyHash("0" * 20, "1" * 20, "2" * 20).text()


def body(inner: str) -> str:
    return f"{markdown.marker(KEY)}\n{markdown.BEGIN}\n{inner}\n{markdown.END}\n"


def issue(**fields) -> outbox.IssuePayload:
    base = dict(number=None, kind="tracking", config="capture_scalar_outputs", signature="abc")
    return outbox.IssuePayload(**{**base, **fields})


def store(tmp_path: Path):
    return db.connect(tmp_path / "state.sqlite")


def insert(conn, action: str, payload: str) -> None:
    conn.execute("INSERT INTO outbox (batch, seq, key, action, payload, created_at) VALUES ('b', 0, ?, ?, ?, 'now')",
                 (KEY, action, payload))


def test_the_table_sends_and_applies_every_action_the_outbox_stores() -> None:
    assert list(outbox_steps.STEPS) == list(outbox.PAYLOADS)
    with pytest.raises(ActionRefused, match="unknown action merge"):
        outbox_steps.step("merge")


def test_every_action_round_trips_through_the_store(tmp_path: Path) -> None:
    conn = store(tmp_path)
    samples = {"create": issue(title="t", body="b", labels=["x"], material=MATERIAL, reason="new signature"),
               "edit": issue(number=3, title="t2", body="b2", material=MATERIAL), "comment": issue(number=3, body="c"),
               "close": issue(number=3, reason="verified"), "reopen": issue(number=3), "labels": issue(
                   number=3, labels=["y"], material=MATERIAL), "react": outbox.Reaction(comment_id=9, content="eyes")}
    assert set(samples) == set(outbox.PAYLOADS)
    outbox.enqueue(conn, "b", None, [(KEY, action, p) for action, p in samples.items()])
    assert {e.action: e.payload for e in outbox.entries(conn)} == samples


def test_the_planners_payload_is_stored_as_it_always_was(tmp_path: Path) -> None:
    """The stored JSON keeps the nine keys of every earlier version, so rows already in a store read back."""
    conn = store(tmp_path)
    action = Action("edit", key=KEY, number=3, kind="tracking", title="t", body="b", material=BodyHash.parse(MATERIAL),
                    config="c", signature="s", reason="results changed")
    outbox.enqueue(conn, "b", None, [(action.key, action.action, action.payload())])
    stored = json.loads(conn.execute("SELECT payload FROM outbox").fetchone()[0])
    assert stored == {"number": 3, "kind": "tracking", "title": "t", "body": "b", "labels": None,
                      "material": MATERIAL, "config": "c", "signature": "s", "reason": "results changed"}
    assert outbox.entries(conn)[0].payload == action.payload()


@pytest.mark.parametrize("action, payload, named", [
    ("edit", {"number": 3, "kind": "tracking", "titel": "typo"}, "unknown field 'titel'"),
    ("edit", {"number": 3, "title": "t"}, "missing field 'kind'"),
    ("comment", {"kind": "summary", "body": "b"}, "missing field 'number'"),
    ("react", {"comment_id": 9}, "missing field 'content'"),
    ("react", {"comment_id": 9, "content": "eyes", "number": 3}, "unknown field 'number'"),
    ("merge", {"number": 3, "kind": "tracking"}, "unknown action 'merge'"),
])
def test_a_stored_payload_that_does_not_parse_names_the_field(tmp_path: Path, action: str, payload: dict,
                                                               named: str) -> None:
    conn = store(tmp_path)
    insert(conn, action, json.dumps(payload))
    with pytest.raises(RecordError, match=named):
        outbox.unfinished(conn)


def test_enqueue_refuses_a_payload_of_another_action(tmp_path: Path) -> None:
    conn = store(tmp_path)
    with pytest.raises(ValueError, match="'react' stores a Reaction, not a IssuePayload"):
        outbox.enqueue(conn, "b", None, [(KEY, "react", issue(number=3))])
    with pytest.raises(ValueError, match="unknown outbox action 'merge'"):
        outbox.enqueue(conn, "b", None, [(KEY, "merge", issue(number=3))])
    assert outbox.entries(conn) == []


def drain(conn, fake: FakeGitHub, *actions: tuple[str, outbox.Payload]) -> publish.PublishSummary:
    outbox.enqueue(conn, outbox.new_batch(), None, [(KEY, a, p) for a, p in actions])
    summary = publish.PublishSummary(run_id=0, dry_run=False, repo=fake.repo)
    pub = GitHubPublisher(fake.settings(retry_backoff=0.0))
    assert publish._drain(conn, pub, fake.repo, summary, lambda _: None) is False
    return summary


def test_each_action_is_sent_and_applied_once(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, conn = fake_github, store(tmp_path)
    drain(conn, fake, ("create", issue(title="first", body=body("one"), labels=["flagsweep"], material=MATERIAL)))
    link = links.get(conn, KEY, fake.repo)
    gh = fake.state.issues(fake.repo)[0]
    assert (link.number, link.title, link.body_sha, link.kind, link.state) == (gh.number, "first", MATERIAL,
                                                                               "tracking", "open")
    assert gh.labels == ["flagsweep"]
    other = BodyHash("3" * 20, "1" * 20, "4" * 20).text()
    summary = drain(conn, fake, ("edit", issue(title="second", body=body("two"), material=other)),
                    ("comment", issue(body="a comment")), ("labels", issue(labels=["flagsweep", "area"],
                                                                            material=MATERIAL)))
    assert (summary.done, summary.written, [r["where"] for r in summary.rows]) == (3, 3, [f"#{gh.number}"] * 3)
    assert (gh.title, "two" in gh.body, sorted(gh.labels)) == ("second", True, ["area", "flagsweep"])
    assert [c.body for c in fake.state.comments(fake.repo, gh.number)] == ["a comment"]
    assert (links.get(conn, KEY, fake.repo).title, links.get(conn, KEY, fake.repo).body_sha) == ("second", MATERIAL)
    drain(conn, fake, ("close", issue(number=gh.number)))
    assert (gh.state, links.get(conn, KEY, fake.repo).closed_by) == ("closed", "bot")
    drain(conn, fake, ("reopen", issue(number=gh.number)))
    reopened = links.get(conn, KEY, fake.repo)
    assert (gh.state, reopened.state, reopened.closed_by) == ("open", "open", None)
    asked = fake.state.add_comment(fake.repo, gh.number, "@flagsweep-bot help", user=fake.human)
    drain(conn, fake, ("react", outbox.Reaction(comment_id=asked.id, content="eyes")))
    assert [(r.user, r.content) for r in asked.reactions] == [(fake.bot_login, "eyes")]
    assert set(outbox.counts(conn)) == {"done"}


def test_an_action_without_a_number_or_link_is_refused(fake_github: FakeGitHub, tmp_path: Path) -> None:
    conn = store(tmp_path)
    summary = drain(conn, fake_github, ("close", issue(reason="verified")))
    assert summary.failed == 1 and [r["title"] for r in summary.rows] == ["(verified)"]
    assert outbox.entries(conn)[0].error == f"close {KEY}: no issue number known"
