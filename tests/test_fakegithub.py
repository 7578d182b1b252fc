"""The fake GitHub itself, driven by PyGithub 2.10 over real HTTP."""
from __future__ import annotations


import github
import pytest
import requests

from tests.fakegithub import FakeGitHub


def test_repo_issue_roundtrip_and_edit_state(fake_github: FakeGitHub) -> None:
    gh = fake_github.client()
    repo = gh.get_repo(fake_github.repo)
    assert repo.full_name == fake_github.repo
    issue = repo.create_issue(title="t", body="b <!-- flagsweep:key=k1 -->", labels=["flagsweep", "area/dynamo"])
    assert issue.number == 1 and issue.user.login == fake_github.bot_login
    issue.edit(state="closed", state_reason="not_planned")
    again = repo.get_issue(1)
    assert again.state == "closed" and again.state_reason == "not_planned"
    assert again.closed_by.login == fake_github.bot_login
    again.edit(state="open")
    assert repo.get_issue(1).state_reason == "reopened"
    assert sorted(l.name for l in again.labels) == ["area/dynamo", "flagsweep"]


def test_list_issues_paginates_with_link_and_filters(fake_github: FakeGitHub) -> None:
    for i in range(7):
        fake_github.state.create_issue(fake_github.repo, f"bot {i}", user=fake_github.bot_login, labels=["flagsweep"])
    fake_github.state.create_issue(fake_github.repo, "human", user=fake_github.human)
    fake_github.state.close_issue(fake_github.repo, 2, user=fake_github.human)
    gh = fake_github.client(per_page=3)
    repo = gh.get_repo(fake_github.repo)
    mine = list(repo.get_issues(state="all", creator=fake_github.bot_login))
    assert sorted(i.number for i in mine) == list(range(1, 8))
    pages = fake_github.requests.matching("GET", r"/issues$")
    assert len(pages) == 3                       # 7 issues at 3 per page, followed via Link
    assert all(i.state == "open" for i in repo.get_issues(state="open"))
    assert len(list(repo.get_issues(state="closed"))) == 1
    assert len(list(repo.get_issues(labels=["flagsweep"]))) == 6


def test_comments_create_list_edit_and_reactions(fake_github: FakeGitHub) -> None:
    fake_github.state.create_issue(fake_github.repo, "x", user=fake_github.human)
    gh = fake_github.client()
    issue = gh.get_repo(fake_github.repo).get_issue(1)
    comment = issue.create_comment("first")
    comment.edit("edited")
    assert [c.body for c in issue.get_comments()] == ["edited"]
    comment.create_reaction("eyes")
    comment.create_reaction("eyes")               # a repeat is not a second reaction
    issue.create_reaction("+1")
    assert [r.content for r in comment.get_reactions()] == ["eyes"]
    assert fake_github.state.issues(fake_github.repo)[0].reactions[0].content == "+1"
    with pytest.raises(github.GithubException) as err:
        comment.create_reaction("nope")
    assert err.value.status == 422


def test_labels_with_slash(fake_github: FakeGitHub) -> None:
    gh = fake_github.client()
    repo = gh.get_repo(fake_github.repo)
    repo.create_label("area/x", "ff0000")
    assert [l.name for l in repo.get_labels()] == ["area/x"]
    issue = repo.create_issue(title="t", body="b")
    issue.add_to_labels("area/x", "keep")
    with pytest.raises(github.GithubException) as err:
        issue.remove_from_labels("area/x")           # PyGithub does not encode "/": GitHub 404s
    assert err.value.status == 404
    status = requests.delete(f"{fake_github.base_url}/repos/{fake_github.repo}/issues/1/labels/area%2Fx",
                             headers={"Authorization": f"token {fake_github.token}"}).status_code
    assert status == 200                             # encoded by hand it works
    assert fake_github.state.issues(fake_github.repo)[0].labels == ["keep"]
    issue.set_labels("a/b", "c")
    assert fake_github.state.issues(fake_github.repo)[0].labels == ["a/b", "c"]


def test_search_by_marker_needs_in_body_and_author(fake_github: FakeGitHub) -> None:
    marker = "flagsweep:key=abc123"
    fake_github.state.create_issue(fake_github.repo, "bot", f"body <!-- {marker} -->", user=fake_github.bot_login)
    other = fake_github.state.create_issue(fake_github.repo, "human", "see", user=fake_github.human)
    fake_github.state.add_comment(fake_github.repo, other.number, f"quoting {marker}", user=fake_github.human)
    gh = fake_github.client()
    loose = gh.search_issues(f'"{marker}"', repo=fake_github.repo, **{"is": "issue"})
    assert sorted(i.number for i in loose) == [1, 2]      # the comment matches too, as on GitHub
    strict = gh.search_issues(f'"{marker}"', repo=fake_github.repo, author=fake_github.bot_login,
                              **{"is": "issue", "in": "body"})
    assert [i.number for i in strict] == [1]
    assert fake_github.requests[-1].path == "/search/issues"


def test_search_lag_hides_new_issues(fake_github: FakeGitHub) -> None:
    fake_github.state.search_lag = 60
    fake_github.state.create_issue(fake_github.repo, "new", "m-1", user=fake_github.bot_login)
    assert fake_github.client().search_issues('"m-1"').totalCount == 0


def test_permission_role_name_distinguishes_triage(fake_github: FakeGitHub) -> None:
    fake_github.state.set_role(fake_github.repo, "tri", "triage")
    repo = fake_github.client().get_repo(fake_github.repo)
    assert repo.get_collaborator_permission("tri") == "read"        # GitHub folds triage into read
    assert repo.get_collaborator_role_name("tri") == "triage"
    assert repo.get_collaborator_role_name(fake_github.human) == "none"
    with pytest.raises(github.UnknownObjectException):
        repo.get_collaborator_role_name("nobody-at-all")


def test_user_rate_limit_and_headers(fake_github: FakeGitHub) -> None:
    gh = fake_github.client()
    assert gh.get_user().login == fake_github.bot_login
    assert gh.get_rate_limit().resources.core.limit == 5000
    resp = requests.get(fake_github.base_url + f"/repos/{fake_github.repo}", headers={"Authorization": f"token {fake_github.token}"})
    assert {"X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Limit"} <= set(resp.headers)
    etag = resp.headers["ETag"]
    again = requests.get(fake_github.base_url + f"/repos/{fake_github.repo}",
                         headers={"Authorization": f"token {fake_github.token}", "If-None-Match": etag})
    assert again.status_code == 304
    bad = requests.get(fake_github.base_url + "/user", headers={"Authorization": "token wrong"})
    assert bad.status_code == 401


def test_text_limits_are_enforced(fake_github: FakeGitHub) -> None:
    repo = fake_github.client().get_repo(fake_github.repo)
    with pytest.raises(github.GithubException) as err:
        repo.create_issue(title="x" * 257, body="b")
    assert err.value.status == 422
    with pytest.raises(github.GithubException) as err:
        repo.create_issue(title="t", body="b" * 65537)
    assert err.value.status == 422
    assert fake_github.state.issues(fake_github.repo) == []


def test_app_installation_auth(fake_github: FakeGitHub) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    login = fake_github.state.add_app(42, "flagsweep", 7, fake_github.repo)
    auth = github.Auth.AppAuth(42, pem).get_installation_auth(7)
    gh = github.Github(auth=auth, base_url=fake_github.base_url, retry=None,
                       seconds_between_requests=0, seconds_between_writes=0)
    issue = gh.get_repo(fake_github.repo).create_issue(title="from app", body="b")
    assert issue.user.login == login == "flagsweep[bot]"
    assert fake_github.requests.matching("POST", r"^/app/installations/7/access_tokens$")


def test_fault_500_then_success(fake_github: FakeGitHub) -> None:
    fake_github.faults.fail_next(2, method="GET")
    gh = fake_github.client()
    with pytest.raises(github.GithubException) as err:
        gh.get_repo(fake_github.repo)
    assert err.value.status == 500
    with pytest.raises(github.GithubException):
        gh.get_repo(fake_github.repo)
    assert gh.get_repo(fake_github.repo).full_name == fake_github.repo
    assert fake_github.faults.pending() == 0


def test_secondary_rate_limit_with_retry_after(fake_github: FakeGitHub) -> None:
    fake_github.faults.secondary_rate_limit(1, retry_after=1, method="POST")
    repo = fake_github.client().get_repo(fake_github.repo)
    with pytest.raises(github.RateLimitExceededException) as err:
        repo.create_issue(title="t", body="b")
    assert err.value.headers.get("retry-after") == "1"
    assert fake_github.state.issues(fake_github.repo) == []


def test_dropped_connection_after_write_is_pygithubs_resend_trap(fake_github: FakeGitHub) -> None:
    # With PyGithub's default retry a POST whose answer is lost is sent again: two issues, no error.
    fake_github.faults.drop_after_write(1, method="POST")
    gh = github.Github(auth=github.Auth.Token(fake_github.token), base_url=fake_github.base_url,
                       seconds_between_requests=0, seconds_between_writes=0)
    gh.get_repo(fake_github.repo).create_issue(title="t", body="b")
    assert len(fake_github.state.issues(fake_github.repo)) == 2
    # With retry=None the client sees the error, and the write is stored all the same.
    fake_github.faults.drop_after_write(1, method="POST")
    with pytest.raises(requests.exceptions.ConnectionError):
        fake_github.client().get_repo(fake_github.repo).create_issue(title="t", body="b")
    assert len(fake_github.state.issues(fake_github.repo)) == 3


def test_slow_response(fake_github: FakeGitHub) -> None:
    fake_github.faults.slow(2.5, 1, method="GET")
    gh = fake_github.client(timeout=1)
    with pytest.raises(requests.exceptions.ReadTimeout):
        gh.get_repo(fake_github.repo)
    assert gh.get_repo(fake_github.repo).name == "models"
    assert [r.fault for r in fake_github.requests][:1] == ["slow"]


def test_request_log_counts_reads_and_writes(fake_github: FakeGitHub) -> None:
    gh = fake_github.client(lazy=True)
    repo = gh.get_repo(fake_github.repo)
    repo.create_issue(title="t", body="b").create_comment("c")
    assert [(r.method, r.path) for r in fake_github.requests.writes()] == [
        ("POST", f"/repos/{fake_github.repo}/issues"), ("POST", f"/repos/{fake_github.repo}/issues/1/comments")]
    assert fake_github.requests.writes()[0].body == {"title": "t", "body": "b"}
    assert fake_github.requests.reads() == []
