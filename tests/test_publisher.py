"""The PyGithub publisher against the fake: our own retry loop, idempotent writes, reads the service uses."""
from __future__ import annotations

import pytest

from bot.text import markdown
from bot.github.client import ActionRefused, GitHubPublisher, GitHubUnavailable
from tests.fakegithub import FakeGitHub


def publisher(fake: FakeGitHub, **kw) -> tuple[GitHubPublisher, list[float]]:
    slept: list[float] = []
    settings = fake.settings(retry_backoff=0.5, **kw)
    return GitHubPublisher(settings, sleep=slept.append), slept


def body(key: str, inner: str = "hello") -> str:
    return f"{markdown.marker(key)}\n{markdown.BEGIN}\n{inner}\n{markdown.END}\n"


def test_create_is_found_again_not_doubled(fake_github: FakeGitHub) -> None:
    pub, _ = publisher(fake_github)
    n = pub.create_issue("k1", "title", body("k1"), ["flagsweep", "area/x"])
    assert pub.create_issue("k1", "title", body("k1"), ["flagsweep"], look=True) == n
    assert len(fake_github.state.issues(fake_github.repo)) == 1
    assert fake_github.state.issues(fake_github.repo)[0].labels == ["flagsweep", "area/x"]


def test_dropped_answer_after_create_is_not_resent(fake_github: FakeGitHub) -> None:
    pub, slept = publisher(fake_github)
    fake_github.faults.drop_after_write(1, method="POST", path="/issues")
    n = pub.create_issue("k2", "t", body("k2"), [], look=False)
    assert [i.number for i in fake_github.state.issues(fake_github.repo)] == [n]
    assert slept == [0.5]


def test_dropped_answer_after_comment_is_not_resent(fake_github: FakeGitHub) -> None:
    issue = fake_github.state.create_issue(fake_github.repo, "t", body("k3"), user=fake_github.bot_login)
    pub, _ = publisher(fake_github)
    fake_github.faults.drop_after_write(1, method="POST", path="/comments")
    cid = pub.comment(issue.number, "<!-- flagsweep:comment=k3/1/changes -->\nnews")
    comments = fake_github.state.comments(fake_github.repo, issue.number)
    assert [c.id for c in comments] == [cid]


def test_retry_after_is_honoured_exactly(fake_github: FakeGitHub) -> None:
    pub, slept = publisher(fake_github, max_wait=60)
    fake_github.faults.secondary_rate_limit(1, retry_after=7, method="POST")
    pub.create_issue("k4", "t", body("k4"), [], look=False)
    assert slept == [7.0] and pub.waits == [("rate limit", 7.0)]
    assert len(fake_github.state.issues(fake_github.repo)) == 1


def test_primary_rate_limit_waits_for_the_reset(fake_github: FakeGitHub) -> None:
    pub, slept = publisher(fake_github, max_wait=60)
    fake_github.faults.primary_rate_limit(1, reset_in=30, method="GET")
    assert pub.user_permission(fake_github.human) == "none"
    assert len(slept) == 1 and 25 <= slept[0] <= 32


def test_a_wait_longer_than_max_wait_stops_at_once(fake_github: FakeGitHub) -> None:
    pub, slept = publisher(fake_github, max_wait=10)
    fake_github.faults.secondary_rate_limit(1, retry_after=3600, method="POST")
    with pytest.raises(GitHubUnavailable, match="max_wait"):
        pub.create_issue("k5", "t", body("k5"), [], look=False)
    assert slept == []


def test_persistent_5xx_gives_up_within_bounds(fake_github: FakeGitHub) -> None:
    pub, slept = publisher(fake_github, max_retries=3)
    fake_github.faults.fail_next(100, status=502)
    with pytest.raises(GitHubUnavailable, match="after 4 attempts"):
        pub.edit_issue(1, body=body("k"))
    assert slept == [0.5, 1.0, 2.0]
    fake_github.faults.clear()


def test_4xx_is_refused_not_retried(fake_github: FakeGitHub) -> None:
    pub, slept = publisher(fake_github)
    with pytest.raises(ActionRefused) as err:
        pub.edit_issue(999, body=body("k"))
    assert err.value.status == 404 and slept == []


def test_edit_splices_and_skips_equal_text(fake_github: FakeGitHub) -> None:
    issue = fake_github.state.create_issue(fake_github.repo, "t", "note from a human\n" + body("k6", "old"),
                                           user=fake_github.bot_login)
    pub, _ = publisher(fake_github)
    assert pub.edit_issue(issue.number, title="t", body=body("k6", "new")) is True
    assert issue.body == "note from a human\n" + body("k6", "new")
    before = len(fake_github.requests.writes())
    assert pub.edit_issue(issue.number, title="t", body=body("k6", "new")) is False
    assert len(fake_github.requests.writes()) == before


def test_mutations_are_spaced(fake_github: FakeGitHub) -> None:
    clock = [100.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        clock[0] += s
    pub = GitHubPublisher(fake_github.settings(mutation_interval=1.0), sleep=sleep, clock=lambda: clock[0])
    issue = fake_github.state.create_issue(fake_github.repo, "t", body("k7"), user=fake_github.bot_login)
    pub.close(issue.number)
    clock[0] += 0.25
    pub.reopen(issue.number)
    assert slept == [pytest.approx(0.75)]
    assert issue.state == "open"


def test_labels_with_slash_and_close_reopen(fake_github: FakeGitHub) -> None:
    issue = fake_github.state.create_issue(fake_github.repo, "t", body("k8"), user=fake_github.bot_login, labels=["old/x"])
    pub, _ = publisher(fake_github)
    pub.set_labels(issue.number, ["flagsweep", "module: dynamic shapes", "area/dynamo"])
    assert issue.labels == ["flagsweep", "module: dynamic shapes", "area/dynamo"]
    pub.close(issue.number)
    assert issue.state == "closed" and issue.closed_by == fake_github.bot_login


def test_find_by_marker_ignores_humans_quoting_it(fake_github: FakeGitHub) -> None:
    state = fake_github.state
    for i in range(120):                 # push the bot's issue off the first listing page
        state.create_issue(fake_github.repo, f"bot {i}", body(f"other{i}"), user=fake_github.bot_login)
    mine = state.create_issue(fake_github.repo, "mine", body("target"), user=fake_github.bot_login)
    for i in range(110):
        state.create_issue(fake_github.repo, f"later {i}", body(f"later{i}"), user=fake_github.bot_login)
    human = state.create_issue(fake_github.repo, "quote", f"see {markdown.marker('target')}", user=fake_github.human)
    state.add_comment(fake_github.repo, human.number, "flagsweep:key=target", user=fake_github.human)
    pub, _ = publisher(fake_github)
    found = pub.find_by_marker("target")
    assert found is not None and found.number == mine.number and found.author == fake_github.bot_login
    assert fake_github.requests[-1].path == "/search/issues"
    assert pub.find_by_marker("nothing-like-it") is None


def test_list_own_issues_pages_through_everything(fake_github: FakeGitHub) -> None:
    for i in range(205):
        fake_github.state.create_issue(fake_github.repo, f"bot {i}", body(f"k{i}"), user=fake_github.bot_login)
    fake_github.state.create_issue(fake_github.repo, "human", body("kh"), user=fake_github.human)
    pub, _ = publisher(fake_github)
    refs = pub.list_own_issues()
    assert len(refs) == 205 and {r.key for r in refs} == {f"k{i}" for i in range(205)}
    # 100 per page; the GET /user that tells the publisher who it is happens at most once per process
    # (a port the OS hands out again to a later fake finds the login already known)
    paths = [r.path for r in fake_github.requests.reads()]
    assert paths.count("/user") <= 1
    assert [p for p in paths if p != "/user"] == ["/repos/octo/models/issues"] * 3


def test_user_permission_distinguishes_triage(fake_github: FakeGitHub) -> None:
    fake_github.state.set_role(fake_github.repo, "tri", "triage")
    fake_github.state.set_role(fake_github.repo, "maint", "maintain")
    pub, _ = publisher(fake_github)
    assert pub.user_permission("tri") == "triage"
    assert pub.user_permission("maint") == "maintain"
    assert pub.user_permission("ghost-user") == "none"


def test_react_to_a_comment(fake_github: FakeGitHub) -> None:
    issue = fake_github.state.create_issue(fake_github.repo, "t", "b", user=fake_github.human)
    comment = fake_github.state.add_comment(fake_github.repo, issue.number, "@flagsweep-bot help", user=fake_github.human)
    pub, _ = publisher(fake_github)
    pub.react(comment.id, "eyes")
    pub.react(comment.id, "eyes")
    assert [(r.user, r.content) for r in comment.reactions] == [(fake_github.bot_login, "eyes")]


def test_github_app_auth(fake_github: FakeGitHub) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    login = fake_github.state.add_app(1234, "flagsweep", 99, fake_github.repo)
    settings = fake_github.settings(token=None, app_id=1234, private_key=pem, installation_id=99, bot_login=login)
    assert settings.has_credentials
    pub = GitHubPublisher(settings, sleep=lambda s: None)
    n = pub.create_issue("kapp", "t", body("kapp"), [], look=False)
    assert fake_github.state.repo(fake_github.repo).issues[n].user == "flagsweep[bot]"
    found = pub.find_by_marker("kapp")
    assert found is not None and found.number == n


def test_dry_run_twin_records_and_can_append(tmp_path) -> None:
    from bot.github.dryrun import DryRunPublisher
    out = tmp_path / "out"
    pub = DryRunPublisher(out)
    n = pub.create_issue("k", "Title", body("k"), ["flagsweep"])
    pub.comment(n, "hello")
    pub.close(n)
    pub.finish()
    assert sorted(p.name for p in out.iterdir()) == ["001-create-k.md", "002-comment-k.md", "003-close-k.md", "plan.json"]
    assert (out / "001-create-k.md").read_text().startswith("# Title\n\n<!-- flagsweep:key=k -->")
    more = DryRunPublisher(out, clean=False)
    more.comment(5, "reply")
    assert (out / "004-comment-5.md").read_text() == "reply" and (out / "001-create-k.md").exists()
    assert DryRunPublisher(out, permissions={"alice": "triage"}).user_permission("alice") == "triage"
    assert sorted(p.name for p in out.iterdir()) == []


def test_the_service_lanes_dry_run_files_take_numbers_from_the_store_and_overwrite_nothing(tmp_path) -> None:
    """Issue 31 item 4: both job lanes open a files twin on one folder at once; each reply keeps its own file."""
    import json

    from bot.service.daemon import github_port
    from bot.settings import Settings
    from state import db

    conn = db.connect(tmp_path / "state.sqlite")
    settings = Settings(state_path=tmp_path / "state.sqlite")
    out = tmp_path / "out"
    with github_port(settings, True, out, conn) as quick, github_port(settings, True, out, conn) as work:
        for i in range(5):                                    # interleaved, as two lanes answer side by side
            quick.comment(7, f"quick {i}")
            work.comment(7, f"work {i}")
    folder = out / "commands"
    replies = sorted(p.read_text() for p in folder.glob("*-comment-7.md"))
    assert replies == sorted([f"quick {i}" for i in range(5)] + [f"work {i}" for i in range(5)])
    plans = sorted(folder.glob("plan-*.json"))
    assert len(plans) == 2                                     # one plan per job, neither replacing the other
    assert sum(len(json.loads(p.read_text())["actions"]) for p in plans) == 10
    # A later service on a fresh store (its counter at 0) still writes beside the old files, not over them.
    fresh = db.connect(tmp_path / "other.sqlite")
    with github_port(settings, True, out, fresh) as again:
        again.comment(7, "after a new store")
    assert len(list(folder.glob("*-comment-7.md"))) == 11 and len(list(folder.glob("plan-*.json"))) == 3


def test_bad_credentials_stop_instead_of_failing_each_action(fake_github: FakeGitHub) -> None:
    # Rejected at start-up (who am I?): a refusal before anything is sent.
    with pytest.raises(ActionRefused, match="rejected the credentials"):
        GitHubPublisher(fake_github.settings(token="expired"), sleep=lambda s: None)
    # Rejected later (expired mid-publish): every action would fail alike, so stop and keep them.
    pub = GitHubPublisher(fake_github.settings(), sleep=lambda s: None)
    del fake_github.state.tokens[fake_github.token]      # the token expires after start-up
    with pytest.raises(GitHubUnavailable, match="credentials"):
        pub.create_issue("k", "t", body("k"), [], look=False)


def test_a_write_answered_too_late_is_found_not_resent(fake_github: FakeGitHub) -> None:
    # The other requests get room on a loaded machine (5 s); the slow answer still comes after the client gave up.
    pub, slept = publisher(fake_github, request_timeout=5)
    fake_github.faults.slow(8.0, 1, method="POST", path="/comments")     # stored, answer after the client gave up
    issue = fake_github.state.create_issue(fake_github.repo, "t", body("k9"), user=fake_github.bot_login)
    cid = pub.comment(issue.number, "<!-- flagsweep:comment=k9/1/changes -->\nnews")
    assert [c.id for c in fake_github.state.comments(fake_github.repo, issue.number)] == [cid]
    assert len(slept) == 1
