"""What a comment-command handler works with: its context, the GitHub port, the permission and rate gate.

Plain types and small rules, kept apart from the handlers (bot/commands/handlers.py) so
that each stays short; tests build a Context with twins of its steps (bot/commands/steps.py).
"""
from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from bot.commands.steps import CommandSteps
from bot.settings import ROLES, Settings
from state import budgets


class GitHubPort(Protocol):
    """What the handlers need from GitHub (bot.github.client.Publisher and its dry-run twin provide it)."""

    def comment(self, number: int, body: str, *, look: bool = False) -> Any: ...
    def react(self, comment_id: int, content: str) -> Any: ...
    def user_permission(self, login: str) -> str: ...
    def paused(self, label: str) -> Any: ...


class JobsHealth(Protocol):
    """The service's stuck, failed and retrying jobs, for `status` (bot.service.daemon.Service.jobs_health)."""

    def __call__(self, conn: sqlite3.Connection) -> dict[str, Any] | None: ...


def no_jobs(conn: sqlite3.Connection) -> None:
    """Outside the service no runner holds jobs: `status` lists none."""
    return None


class UserError(ValueError):
    """A problem with what the user asked; the message is posted back."""


class RetryLater(RuntimeError):
    """GitHub was unavailable mid-job: try the job again later; `result` holds the commands already answered."""

    def __init__(self, message: str, result: dict[str, Any]) -> None:
        super().__init__(message)
        self.result = result


def role_at_least(role: str | None, minimum: str) -> bool:
    """Whether a repository role (read, triage, write, maintain, admin) reaches `minimum`."""
    role = (role or "none").lower()
    # GitHub's legacy permission field says "read" for triage and "write" for maintain;
    # the publisher should hand us the role name, but an unknown word counts as none.
    rank = {r: i for i, r in enumerate(ROLES)}
    return rank.get(role, 0) >= rank.get(minimum.lower(), rank["triage"])


@dataclass
class PermissionGate:
    """Permission (cached briefly, in memory) and the per-user hourly budget (in the store: a restart resets nothing).

    The budget counts commands that start work, refusals, usage replies and "paused" replies alike
    (`state.budgets`).
    """

    ttl: float = 300.0
    per_hour: int = 5
    clock: Callable[[], float] = time.time    # wall clock: the budget is stored and outlives the process
    roles: dict[str, tuple[float, str]] = field(default_factory=dict)

    def role(self, login: str, lookup: Callable[[str], str]) -> str:
        """The user's role, from the cache when fresh."""
        now = self.clock()
        hit = self.roles.get(login.lower())
        if hit and now - hit[0] < self.ttl:
            return hit[1]
        role = lookup(login) or "none"
        self.roles[login.lower()] = (now, role)
        return role

    def spend(self, conn: sqlite3.Connection, login: str, where: tuple[str, int], kind: str) -> bool:
        """Count one `kind` (run, refused, usage, paused) against the user's hourly budget; False when it is spent."""
        return budgets.spend(conn, login, where, kind, at=self.clock(), per_hour=self.per_hour)

    def told(self, conn: sqlite3.Connection, login: str, kind: str, where: tuple[str, int] | None = None) -> bool:
        """Whether the user got a `kind` answer in the last hour (on the issue `where`, when given)."""
        return budgets.told(conn, login, kind, since=self.clock() - budgets.WINDOW, where=where)

    def tell(self, conn: sqlite3.Connection, login: str, where: tuple[str, int], kind: str) -> None:
        """Note that the user got a `kind` answer that the budget does not count (`limited`)."""
        budgets.note(conn, login, where, kind, at=self.clock())


@dataclass
class Context:
    """What a handler may use; the expensive actions are its steps, passed in explicitly."""

    conn: sqlite3.Connection
    settings: Settings
    github: GitHubPort
    gate: PermissionGate
    dry_run: bool = True
    out_dir: Path = Path("flagsweep-out")
    retry: bool = False               # an earlier attempt of this job met a GitHub outage
    steps: CommandSteps = field(default_factory=CommandSteps)
    jobs_health: JobsHealth = no_jobs
