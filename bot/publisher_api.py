"""The publisher interface: what every GitHub write goes through, and its errors.

bot.publisher.GitHubPublisher (the only module importing PyGithub) and
bot.dryrun.DryRunPublisher (its twin, writing files) both provide it; nothing
here imports PyGithub, so a dry run loads without it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class GitHubUnavailable(RuntimeError):
    """GitHub kept failing or asked us to wait longer than allowed: stop, keep the rest for later."""


class ActionRefused(RuntimeError):
    """GitHub refused the request for good (404, 422, a permission 403): do not retry it."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class IssueRef:
    """What the bot knows of one issue on GitHub."""

    number: int
    title: str
    body: str
    state: str
    author: str
    key: str | None = None
    labels: list[str] = field(default_factory=list)


class Publisher(Protocol):
    """Every GitHub write goes through this interface; bot.dryrun.DryRunPublisher is the twin."""

    dry_run: bool

    def create_issue(self, key: str, title: str, body: str, labels: list[str], *, look: bool = True) -> int: ...
    def edit_issue(self, number: int, *, title: str | None = None, body: str | None = None) -> bool: ...
    def comment(self, number: int, body: str, *, look: bool = False) -> int | None: ...
    def close(self, number: int, reason: str = "completed") -> bool: ...
    def reopen(self, number: int) -> bool: ...
    def set_labels(self, number: int, labels: list[str]) -> bool: ...
    def react(self, comment_id: int, content: str) -> None: ...
    def find_by_marker(self, key: str) -> IssueRef | None: ...
    def user_permission(self, login: str) -> str: ...
    def list_own_issues(self) -> list[IssueRef]: ...
