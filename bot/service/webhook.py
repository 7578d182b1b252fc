"""The webhook request logic: verify, dedupe, store a job, answer at once (HTTP: bot.service.server).

Nothing slow happens on the request thread: a delivery becomes a row in `jobs`
and the job runner picks it up. GitHub gives up on a delivery after 10 seconds
and marks it failed, so we answer well before that.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import sqlite3
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from bot.commands.parse import QUICK, Command, new_command_lines, parse_line
from bot.settings import Settings, repo_key
from state import deliveries, jobs

log = logging.getLogger(__name__)

HANDLED_ACTIONS = {("issue_comment", "created"), ("issue_comment", "edited")}


def sign(secret: str, body: bytes) -> str:
    """The X-Hub-Signature-256 value GitHub would send for `body`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_signature(secret: str | None, body: bytes, header: str | None) -> bool:
    """Whether `header` is the HMAC-SHA256 of `body` under `secret` (constant-time compare)."""
    if not secret or not header or not header.startswith("sha256="):
        return False
    return hmac.compare_digest(sign(secret, body).encode(), header.strip().encode())


# The fields of a comment delivery that decide() reads, with their JSON types; optional ones may be absent or null.
COMMENT_FIELDS: list[tuple[str, type, bool]] = [
    ("comment", dict, False), ("comment.id", int, False), ("comment.body", str, False),
    ("comment.user", dict, False), ("comment.user.login", str, False), ("comment.author_association", str, False),
    ("issue", dict, False), ("issue.number", int, False),
    ("repository", dict, False), ("repository.full_name", str, False),
    ("sender", dict, False), ("sender.login", str, False),
    ("installation", dict, True), ("installation.id", int, True),
    ("changes", dict, True), ("changes.body", dict, True), ("changes.body.from", str, True),
]


def malformed(event: str, payload: dict[str, Any]) -> str | None:
    """What is wrong with the shape of a verified payload we would act on (None: nothing)."""
    action = payload.get("action")
    if action is not None and not isinstance(action, str):
        return f"action: expected str, got {type(action).__name__}"
    if (event, action) not in HANDLED_ACTIONS:
        return None
    for path, kind, optional in COMMENT_FIELDS:
        parent: Any = payload
        for key in path.split(".")[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if parent is None:
            continue                    # an optional parent that is absent (a required one was named already)
        value = parent.get(path.split(".")[-1])
        if value is None and optional:
            continue
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            return f"{path}: expected {kind.__name__}, got {type(value).__name__}"
        wrong = _out_of_range(value)
        if wrong:
            return f"{path}: {wrong}"
    return None


MAX_ID = 2**63 - 1   # GitHub's ids and numbers are positive and fit the store's 64-bit integers


def _out_of_range(value: Any) -> str | None:
    """What makes a field of the right type unusable downstream (None: nothing): an id the store cannot hold,
    text that cannot be written as UTF-8 (a lone surrogate, which JSON's \\u escapes can carry)."""
    if isinstance(value, int) and not 1 <= value <= MAX_ID:
        return f"expected an integer from 1 to {MAX_ID}, got {value}"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"not valid Unicode text ({exc.reason} at character {exc.start})"
    return None


def comment_key(payload: dict[str, Any]) -> str:
    """A comment delivery's identity apart from its delivery id: the comment id and a hash of what it asks
    (action, body, previous body), so a captured delivery re-sent under a new X-GitHub-Delivery is a duplicate."""
    comment = payload["comment"]
    previous = ((payload.get("changes") or {}).get("body") or {}).get("from")
    asked = json.dumps([payload.get("action"), comment["body"], previous])
    return f"{comment['id']}:{hashlib.sha256(asked.encode()).hexdigest()}"


@dataclass
class Decision:
    """What to do with a verified delivery: queue a job, or ignore it with a reason."""

    outcome: str                      # queued | ignored
    reason: str
    job: jobs.CommentJob | None = field(default=None)
    kind: str = "command"             # the job kind: command (work lane) | quick (quick lane)


def is_own(login: str | None, bot_login: str) -> bool:
    """Whether a comment author is the bot itself (a GitHub App writes as `<slug>[bot]`)."""
    if not login:
        return False
    login = login.lower()
    bot = bot_login.lower()
    return login in (bot, bot + "[bot]") or (bot.endswith("[bot]") and login == bot[:-5])


def decide(event: str, payload: dict[str, Any], settings: Settings) -> Decision:
    """Pure: what a verified delivery should become."""
    if event == "ping":
        return Decision("ignored", "pong")
    action = payload.get("action")
    if (event, action) not in HANDLED_ACTIONS:
        return Decision("ignored", f"event {event}.{action} not handled")
    comment = payload.get("comment") or {}
    issue = payload.get("issue") or {}
    repo = (payload.get("repository") or {}).get("full_name")
    author = (comment.get("user") or {}).get("login")
    # Our own comments quote commands in replies: answering them would loop.
    # Until GitHub has told us who we are (bot_login unset, no credentials), we are the account our handle names.
    if is_own(author, settings.github.bot_login or settings.commands.handle.lstrip("@")):
        return Decision("ignored", "own comment")
    if settings.github.repo and repo and repo_key(repo) != repo_key(settings.github.repo):   # the one rule
        return Decision("ignored", f"repository {repo} is not {settings.github.repo}")
    body = comment.get("body") or ""
    previous = None
    if action == "edited":
        previous = ((payload.get("changes") or {}).get("body") or {}).get("from")
        if previous is None:
            return Decision("ignored", "edit without a body change")
    handle = settings.commands.handle
    lines = new_command_lines(body, previous, handle)
    if not lines:
        return Decision("ignored", "no new command")
    # Only the lines a job runs are parsed (at most max_per_comment): parsing is slow, and this is the request thread.
    parsed = [parse_line(line, handle) for line in list(dict.fromkeys(lines))[:settings.commands.max_per_comment]]
    # Questions and bookkeeping go to the quick lane; anything that sweeps waits its turn.
    quick = all(not isinstance(c, Command) or c.name in QUICK for c in parsed)
    job = jobs.CommentJob(
        repo=repo, issue=issue.get("number"), comment_id=comment.get("id"), author=author,
        author_association=comment.get("author_association"), body=body, previous=previous,
        is_pull_request="pull_request" in issue, installation_id=(payload.get("installation") or {}).get("id"))
    return Decision("queued", "command", job, kind="quick" if quick else "command")


@dataclass(frozen=True)
class Health:
    """What GET /healthz answers: whether the bot is healthy (200; 503 when not), and what else it says of itself
    (the daemon's jobs, queue, nightlies; the server adds its connections), first key "ok"."""

    ok: bool
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The answer's JSON body."""
        return {"ok": self.ok, **self.details}


class WebhookApp:
    """The request logic, shared by the server's worker threads (one store connection behind a lock)."""

    def __init__(self, conn: sqlite3.Connection, settings: Settings, *,
                 notify: Callable[[], None] | None = None,
                 health: Callable[[], Health] | None = None) -> None:
        self.conn = conn
        self.settings = settings
        self.notify = notify or (lambda: None)
        self.health = health or (lambda: Health(ok=True))
        self.lock = threading.Lock()

    def handle(self, headers: Any, body: bytes) -> tuple[int, dict[str, Any]]:
        """Process one POSTed delivery; returns (HTTP status, JSON answer)."""
        if not verify_signature(self.settings.webhook.secret, body, headers.get("X-Hub-Signature-256")):
            return 401, {"error": "missing or wrong X-Hub-Signature-256"}
        event = headers.get("X-GitHub-Event")
        delivery = headers.get("X-GitHub-Delivery")
        if not event or not delivery:
            return 400, {"error": "missing X-GitHub-Event or X-GitHub-Delivery"}
        try:
            payload = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return 400, {"error": f"malformed JSON: {exc}"}
        except RecursionError:   # json's decoder recurses per level: a body of [[[[... would be a 500
            return 400, {"error": "malformed JSON: nested too deeply"}
        if not isinstance(payload, dict):
            return 400, {"error": "payload is not a JSON object"}
        wrong = malformed(event, payload)
        if wrong:
            log.warning("delivery %s: %s payload ignored: %s", delivery, event, wrong)
            return 400, {"error": f"unexpected payload: {wrong}"}
        decision = decide(event, payload, self.settings)
        key = comment_key(payload) if decision.job is not None else None
        with self.lock:
            if not deliveries.record(self.conn, delivery, event, decision.outcome, key):
                return 200, {"status": "duplicate", "delivery": delivery}
            job_id = None
            if decision.job is not None:
                job = replace(decision.job, delivery=delivery)
                job_id = jobs.enqueue(self.conn, decision.kind, job.to_payload())
        if job_id is not None:
            self.notify()
            log.info("delivery %s: queued job %s", delivery, job_id)
            return 202, {"status": "queued", "job": job_id}
        if decision.reason == "pong":
            return 200, {"status": "pong"}
        return 202, {"status": "ignored", "reason": decision.reason}

    def healthz(self) -> tuple[int, dict[str, Any]]:
        """The health answer: 200 when healthy, 503 (same body) when stopping or a job is stuck."""
        with self.lock:
            health = self.health()
        return (200 if health.ok else 503), health.to_dict()
