"""The publisher interface: what every GitHub write goes through, and its errors.

bot.github.client.GitHubPublisher (the only module importing PyGithub) and
bot.github.dryrun.DryRunPublisher (its twin, writing files) both provide it; nothing
here imports PyGithub, so a dry run loads without it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bot.settings import GitHubSettings

log = logging.getLogger(__name__)


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
    state_reason: str | None = None      # completed | not_planned | duplicate | reopened | None


class Publisher(Protocol):
    """Every GitHub write goes through this interface; bot.github.dryrun.DryRunPublisher is the twin."""

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
    def paused(self, label: str) -> IssueRef | None:
        """An open issue carrying `label` (the kill switch), or None: one listing, asked once per publish or job."""
    def finish(self, extra: dict[str, Any] | None = None) -> Path | None:
        """End of a publish or a job: the dry-run twin writes its plan file (returned); GitHub needs nothing."""


class IdentityError(ActionRefused):
    """The credentials write as another account than `[github] bot_login`: every issue would be filed twice."""


def same_login(a: str, b: str) -> bool:
    """GitHub logins compare case-insensitively; an App is `slug` or `slug[bot]`."""
    def norm(login: str) -> str:
        login = login.lower()
        return login[:-5] if login.endswith("[bot]") else login
    return norm(a) == norm(b)


def check_identity(settings: GitHubSettings, login: str) -> str:
    """The login the bot writes as: `login` adopted when bot_login is unset; IdentityError when bot_login names
    another account. (The settings stay as read: a caller that needs the adopted login passes it on.)"""
    if not settings.bot_login:
        log.info("github: writing as %s (bot_login taken from the credentials)", login)
        return login
    if not same_login(settings.bot_login, login):
        raise IdentityError(f"the GitHub credentials write as {login!r}, not as [github] bot_login "
                            f"{settings.bot_login!r}; set bot_login = {login!r} or use that account's credentials "
                            "(nothing was published)")
    return settings.bot_login
