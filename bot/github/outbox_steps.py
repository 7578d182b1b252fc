"""The outbox's steps: how each action is sent to the Publisher and which links it updates once done.

One table, `STEPS`, chooses by action: `send` talks to the Publisher, `apply` updates the links in the transaction
that marks the entry done (bot.github.publish drains the outbox through it). Each takes the entry's payload, of the
type the outbox stores for that action (state.outbox.PAYLOADS).
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any, Callable

from bot.github import resolutions as resolutions_mod
from bot.github.port import ActionRefused, IssueRef, Publisher
from bot.issues import keys
from bot.issues.material import BodyHash
from state import links as links_mod, outbox, resolutions


@dataclass(frozen=True)
class Out:
    """One outbox entry on its way out: the store, the publisher, the repository, and whether an earlier attempt
    may have reached GitHub (then a create or comment looks for itself first)."""

    conn: sqlite3.Connection
    pub: Publisher
    repo: str
    entry: outbox.Entry
    uncertain: bool

    def number(self, p: outbox.IssuePayload) -> int:
        """The issue the entry writes to: as planned, else as linked since (a create done by an earlier entry)."""
        if p.number:
            return int(p.number)
        link = links_mod.get(self.conn, self.entry.key, self.repo)
        if link is None:
            raise ActionRefused(f"{self.entry.action} {self.entry.key}: no issue number known")
        return link.number

    def body(self, p: outbox.IssuePayload) -> str | None:
        """The body with references to other issues resolved to their numbers (as linked now)."""
        if not keys.has_refs(p.body):
            return p.body
        numbers = {k: l.number for k, l in links_mod.all_links(self.conn, self.repo).items()}
        return keys.resolve_refs(p.body or "", numbers)


Sent = tuple[outbox.Result, bool]         # (the result the outbox keeps, whether GitHub changed)


def _send_create(out: Out, p: outbox.IssuePayload) -> Sent:
    link = links_mod.get(out.conn, out.entry.key, out.repo)
    if link is not None:              # filed by an earlier publish (or adopted by the sync): edit instead
        return outbox.Result(link.number, adopted=True), out.pub.edit_issue(link.number, title=p.title,
                                                                            body=out.body(p))
    number = out.pub.create_issue(out.entry.key, p.title, out.body(p) or "", p.labels or [], look=out.uncertain)
    return outbox.Result(number), True


def _send_edit(out: Out, p: outbox.IssuePayload) -> Sent:
    number = out.number(p)
    return outbox.Result(number), out.pub.edit_issue(number, title=p.title, body=out.body(p))


def _send_comment(out: Out, p: outbox.IssuePayload) -> Sent:
    number = out.number(p)
    said = out.pub.comment(number, out.body(p) or "", look=out.uncertain)
    return outbox.Result(number, comment=said, posted=True), True


def _send_close(out: Out, p: outbox.IssuePayload) -> Sent:
    number = out.number(p)
    return outbox.Result(number), out.pub.close(number)


def _send_reopen(out: Out, p: outbox.IssuePayload) -> Sent:
    number = out.number(p)
    return outbox.Result(number), out.pub.reopen(number)


def _send_labels(out: Out, p: outbox.IssuePayload) -> Sent:
    number = out.number(p)
    return outbox.Result(number), out.pub.set_labels(number, p.labels or [])


def _send_react(out: Out, p: outbox.Reaction) -> Sent:
    out.pub.react(p.comment_id, p.content)
    return outbox.Result(), True


def _body_sha(p: outbox.IssuePayload) -> str | None:
    """The body hash the link keeps, re-written in today's form (an older stored form parses the same)."""
    return BodyHash.parse(p.material).text() if p.material else None


def _apply_create(out: Out, p: outbox.IssuePayload, result: outbox.Result) -> None:
    existing = links_mod.get(out.conn, out.entry.key, out.repo)
    links_mod.upsert(out.conn, links_mod.Link(
        key=out.entry.key, repo=out.repo, number=result.number, kind=p.kind or "tracking", config=p.config,
        signature=p.signature, mode=p.mode, state="open", body_sha=_body_sha(p), title=p.title,
        cc=existing.cc if existing else [], muted=existing.muted if existing else False))
    _resolved(out, p, None)


def _apply_edit(out: Out, p: outbox.IssuePayload, result: outbox.Result) -> None:
    links_mod.update(out.conn, out.entry.key, body_sha=_body_sha(p), **({"title": p.title} if p.title else {}))


def _apply_labels(out: Out, p: outbox.IssuePayload, result: outbox.Result) -> None:
    links_mod.update(out.conn, out.entry.key, body_sha=_body_sha(p))


def _apply_close(out: Out, p: outbox.IssuePayload, result: outbox.Result) -> None:
    links_mod.update(out.conn, out.entry.key, state="closed", closed_by="bot")
    _resolved(out, p, "completed")


def _apply_reopen(out: Out, p: outbox.IssuePayload, result: outbox.Result) -> None:
    links_mod.update(out.conn, out.entry.key, state="open", closed_by=None, quiet_nightlies=0)
    _resolved(out, p, "reopened")


def _apply_nothing(out: Out, p: outbox.Payload, result: outbox.Result) -> None:
    """A comment or a reaction changes no link."""


def _resolved(out: Out, p: outbox.IssuePayload, state_reason: str | None) -> None:
    """What the bot's own write did to a tracking issue's resolution (as the next listing will show it)."""
    if p.kind != "tracking":
        return
    link = links_mod.get(out.conn, out.entry.key, out.repo)
    ref = IssueRef(number=link.number, title="", body="", state=link.state, author="", key=out.entry.key,
                   state_reason=state_reason)
    resolutions.record(out.conn, out.repo, [resolutions_mod.resolve(ref, link)])


@dataclass(frozen=True)
class Step:
    """One outbox action: `send` talks to the Publisher, `apply` updates the links in the transaction that marks
    the entry done. Each takes the entry's payload, of the type the outbox stores for that action."""

    send: Callable[[Out, Any], Sent]
    apply: Callable[[Out, Any, outbox.Result], None]


STEPS: dict[str, Step] = {
    "create": Step(_send_create, _apply_create),
    "edit": Step(_send_edit, _apply_edit),
    "comment": Step(_send_comment, _apply_nothing),
    "close": Step(_send_close, _apply_close),
    "reopen": Step(_send_reopen, _apply_reopen),
    "labels": Step(_send_labels, _apply_labels),
    "react": Step(_send_react, _apply_nothing),
}


def step(action: str) -> Step:
    """The send and apply of `action`; ActionRefused for one this publisher does not know."""
    if action not in STEPS:
        raise ActionRefused(f"unknown action {action}")
    return STEPS[action]
