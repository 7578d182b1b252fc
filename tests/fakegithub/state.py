"""The fake GitHub's in-memory world: users, tokens, repos, issues, comments, labels, reactions.

Tests seed it (a human's issue, a triager's permission) and inspect it after the
bot ran. Every mutation goes through one lock because the server is threaded.
"""
from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

# GitHub's folding of roles into the legacy `permission` field: triage reads as
# "read" and maintain as "write", which is why bots must ask for `role_name`.
ROLE_TO_PERMISSION = {"admin": "admin", "maintain": "write", "write": "write",
                      "triage": "read", "read": "read", "none": "none"}
REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


def iso(ts: float) -> str:
    """GitHub's timestamp format."""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Reaction:
    id: int
    content: str
    user: str
    created: float


@dataclass
class Comment:
    id: int
    issue: int
    body: str
    user: str
    created: float
    updated: float
    reactions: list[Reaction] = field(default_factory=list)


@dataclass
class Issue:
    number: int
    id: int
    title: str
    body: str
    user: str
    created: float
    updated: float
    state: str = "open"
    state_reason: str | None = None
    labels: list[str] = field(default_factory=list)
    closed: float | None = None
    closed_by: str | None = None
    comments: list[int] = field(default_factory=list)
    reactions: list[Reaction] = field(default_factory=list)


@dataclass
class FakeCommit:
    """A commit of a repository's history: its message, author's login, files and parent."""

    sha: str
    message: str
    author: str | None
    files: list[dict[str, Any]]       # {"filename", "status", "previous_filename"?} as GitHub lists them
    parent: str | None
    date: float
    email: str | None = None          # the git author's address (None: `<author>@example.com`)


@dataclass
class Repo:
    owner: str
    name: str
    id: int
    issues: dict[int, Issue] = field(default_factory=dict)
    comments: dict[int, Comment] = field(default_factory=dict)
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)   # name -> {id, color, description}
    roles: dict[str, str] = field(default_factory=dict)              # login -> role name
    commits: dict[str, FakeCommit] = field(default_factory=dict)     # sha -> commit (one linear history)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


class FakeState:
    """Everything the fake GitHub knows; safe to read and seed from tests."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._ids = itertools.count(1000)
        self.users: dict[str, dict[str, Any]] = {}
        self.tokens: dict[str, str] = {}                # token -> login
        self.repos: dict[str, Repo] = {}
        self.apps: dict[int, dict[str, Any]] = {}       # app id -> {slug, installations: {id: repo}}
        self.search_lag: float = 0.0                    # seconds before a new issue is searchable
        self.rate_limit = 5000
        self.used: dict[str, int] = {}                  # "login:resource" -> requests used this hour

    def next_id(self) -> int:
        """A fresh id, unique across all objects."""
        return next(self._ids)

    # -- seeding ---------------------------------------------------------
    def add_user(self, login: str, *, token: str | None = None, type: str = "User") -> str | None:
        """Create a user; with `token`, that token authenticates as them."""
        with self.lock:
            self.users.setdefault(login, {"login": login, "id": self.next_id(), "type": type})
            if token:
                self.tokens[token] = login
            return token

    def add_repo(self, full_name: str) -> Repo:
        """Create (or return) a repository."""
        owner, name = full_name.split("/", 1)
        with self.lock:
            self.add_user(owner)
            if full_name not in self.repos:
                self.repos[full_name] = Repo(owner=owner, name=name, id=self.next_id())
            return self.repos[full_name]

    def set_role(self, full_name: str, login: str, role: str) -> None:
        """Give `login` a role (read, triage, write, maintain, admin, none) on a repository."""
        assert role in ROLE_TO_PERMISSION, role
        with self.lock:
            self.add_user(login)
            self.repo(full_name).roles[login] = role

    def add_app(self, app_id: int, slug: str, installation_id: int, repo: str) -> str:
        """Register a GitHub App installed on `repo`; returns its bot login (`slug[bot]`)."""
        with self.lock:
            login = f"{slug}[bot]"
            self.add_user(login, type="Bot")
            self.apps[app_id] = {"slug": slug, "installations": {installation_id: repo}, "login": login}
            return login

    def create_issue(self, full_name: str, title: str, body: str = "", *, user: str,
                     labels: list[str] | None = None) -> Issue:
        """File an issue as `user` (tests use it to seed humans' issues)."""
        with self.lock:
            repo = self.repo(full_name)
            self.add_user(user)
            now = time.time()
            number = max(repo.issues, default=0) + 1
            for name in labels or []:
                self.ensure_label(repo, name)
            issue = Issue(number=number, id=self.next_id(), title=title, body=body, user=user,
                          created=now, updated=now, labels=list(dict.fromkeys(labels or [])))
            repo.issues[number] = issue
            return issue

    def add_comment(self, full_name: str, number: int, body: str, *, user: str) -> Comment:
        """Comment on an issue as `user`."""
        with self.lock:
            repo = self.repo(full_name)
            issue = repo.issues[number]
            self.add_user(user)
            now = time.time()
            comment = Comment(id=self.next_id(), issue=number, body=body, user=user, created=now, updated=now)
            repo.comments[comment.id] = comment
            issue.comments.append(comment.id)
            issue.updated = now
            return comment

    def close_issue(self, full_name: str, number: int, *, user: str, reason: str = "completed") -> None:
        """Close an issue as `user` (a human closing a bot issue)."""
        with self.lock:
            issue = self.repo(full_name).issues[number]
            issue.state, issue.state_reason, issue.closed, issue.closed_by = "closed", reason, time.time(), user
            issue.updated = time.time()

    def add_commit(self, full_name: str, sha: str, message: str, *, author: str | None,
                   files: list[dict[str, Any]], parent: str | None, email: str | None = None) -> FakeCommit:
        """Add a commit on top of `parent` (None: a root) to a repository's history (`author`: the GitHub account
        it is tied to, None for none; `email`: the address git recorded)."""
        with self.lock:
            repo = self.repo(full_name)
            if author:
                self.add_user(author)
            commit = FakeCommit(sha, message, author, [dict(f) for f in files], parent, time.time(), email)
            repo.commits[sha] = commit
            return commit

    def ensure_label(self, repo: Repo, name: str) -> dict[str, Any]:
        """Labels spring into existence when first used, as on GitHub."""
        if name not in repo.labels:
            repo.labels[name] = {"id": self.next_id(), "color": "ededed", "description": None}
        return repo.labels[name]

    # -- inspection ------------------------------------------------------
    def repo(self, full_name: str) -> Repo:
        """A repository by OWNER/NAME (KeyError if unknown)."""
        return self.repos[full_name]

    def issues(self, full_name: str) -> list[Issue]:
        """All issues of a repository, by number."""
        with self.lock:
            return [self.repos[full_name].issues[n] for n in sorted(self.repos[full_name].issues)]

    def comments(self, full_name: str, number: int) -> list[Comment]:
        """The comments of one issue, oldest first."""
        with self.lock:
            repo = self.repos[full_name]
            return [repo.comments[c] for c in repo.issues[number].comments]

    def snapshot(self, full_name: str) -> list[dict[str, Any]]:
        """A comparable picture of a repository's issues (ids and times left out)."""
        with self.lock:
            return [{"number": i.number, "title": i.title, "body": i.body, "state": i.state,
                     "state_reason": i.state_reason, "user": i.user, "labels": sorted(i.labels),
                     "comments": [(c.user, c.body) for c in self.comments(full_name, i.number)]}
                    for i in self.issues(full_name)]
