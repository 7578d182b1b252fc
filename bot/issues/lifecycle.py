"""What becomes of each issue: create, edit, comment, relabel, close, reopen, or nothing.

An issue is written only when its body hash (bot.issues.material) differs from the one stored with its link:
the body when its material content or range changed, with a "what changed" comment when its results did
(not for a range alone), the labels when they changed. A muted issue gets nothing.

A bot-closed tracking issue reopens when its signature returns; a human-closed one is left alone unless the
signature went away after the close and came back (a regression). The bot comments and closes only on a
verified fix (`harness.core.fixes.verdict`), naming the commit that fixed it where the fix's search confirmed one
(bot.issues.culprit.fixed_by): every model that crashed compiles under the flag (a wrong result's:
is judged right) on `verify_nightlies` consecutive nightlies; a model left untested is never "fixed". A quiet nightly (the
signature not seen) is counted on the link, and earns a comment only when models stopped crashing with it.
A summary issue a person closed is left alone.

Comments: a run posts each of its comments on an issue once, however often it is published (the store's
outbox says what was posted: bot.issues.timeline), and an issue gets at most
`max_comments_per_issue_per_day` "what changed" / "signature gone" comments per day (the run's date); later
changes that day rewrite the body only. Reopen, close and shift comments go with a state change and are
not counted against the day. A shifted signature (bot.issues.shifts) moves its issue: one comment, a new
title and body, the link re-keyed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.core import fixes
from harness.core.correctness import is_wrong_signature
from bot.issues.context import RunContext, short, when
from bot.issues.culprit import fixed_by
from bot.issues.material import BodyHash
from bot.issues.summary import SummaryIssue
from bot.issues.tracking import TrackingIssue
from bot.text import render
from state.links import Link
from state.outbox import IssuePayload


@dataclass
class Action:
    """One GitHub write the planner wants, with its rendered text."""

    action: str                  # create | edit | comment | close | reopen | labels
    key: str
    number: int | None           # None for create
    kind: str                    # tracking | summary
    title: str | None = None
    body: str | None = None
    labels: list[str] | None = None
    material: BodyHash | None = None  # stored with the link once done
    config: str | None = None
    signature: str | None = None
    reason: str = ""
    mode: str = ""               # the run's mode (harness.core.modes.Mode.key; '' for eval), kept with the link

    def payload(self) -> IssuePayload:
        """What the outbox stores (the body hash in its stored form)."""
        return IssuePayload(number=self.number, kind=self.kind, title=self.title, body=self.body, labels=self.labels,
                            material=self.material.text() if self.material else None, config=self.config,
                            signature=self.signature, reason=self.reason, mode=self.mode)


@dataclass(frozen=True)
class Held:
    """A new signature not filed tonight: pending (over the filing budget) or watching (evidence so far)."""

    key: str
    status: str                  # pending | watching
    title: str
    body: str


@dataclass
class Plan:
    """The actions planned for a run, in order, the store-only link updates (key, fields) that go with them,
    the links moved to a shifted signature's key (old key, new key, new signature; applied before sending) and
    the new signatures held back (their would-be issues, which a dry run writes out)."""

    actions: list[Action] = field(default_factory=list)
    notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    moves: list[tuple[str, str, str]] = field(default_factory=list)
    held: list[Held] = field(default_factory=list)

    def comment(self, ctx: RunContext, action: Action, *, capped: bool = False) -> None:
        """Plan a comment unless this run already posted it on that issue, or (`capped`) the issue had its
        day's comments."""
        day, run = ctx.date[:10], ctx.view.run.id
        posted = [p for p in ctx.timeline.comments if p.number == action.number]
        if any(p.run_id == run and p.reason == action.reason for p in posted):
            return
        today = sum(1 for p in posted if p.day == day) + sum(
            1 for a in self.actions if a.action == "comment" and a.number == action.number)
        if capped and today >= ctx.settings.max_comments_per_issue_per_day:
            return
        self.actions.append(action)


def news(ctx: RunContext, config: str, signature: str) -> tuple[list[str], list[str]]:
    """(models newly crashing with it, models no longer crashing with it) per the believed diff."""
    new, gone = set(), set()
    for t in ctx.transitions:
        if t.config != config or t.flaky:
            continue
        before, after = t.before.signature, t.after.signature
        if after == signature and before != signature and t.after.effect == "crashes":
            new.add(t.model)
        if before == signature and after != signature:
            gone.add(t.model)
    return sorted(new), sorted(gone)


def active(ctx: RunContext, issue: TrackingIssue, link: Link | None, out: Plan) -> None:
    """A tracking issue whose signature this run shows: file it, refresh it, reopen it."""
    g = issue.group
    base = dict(key=g.key, kind="tracking", config=g.config, signature=g.signature, mode=ctx.mode.key)
    if link is None:
        out.actions.append(Action("create", title=issue.title, body=issue.body, labels=issue.labels, number=None,
                                  material=issue.hash, reason="new signature", **base))
        return
    if link.muted:
        return
    old = BodyHash.parse(link.body_sha)
    new, gone = news(ctx, g.config, g.signature)
    if link.state == "closed":
        if link.closed_by == "human":
            return                     # a person closed it while it still crashes: do not fight them
        out.actions.append(Action("reopen", number=link.number, reason="signature is back", **base))
        out.comment(ctx, Action("comment", number=link.number, reason="reopen", body=render.render(
            "comment_reopen.md.j2", comment_marker=ctx.comment_marker(g.key, "reopen"), date_text=when(ctx.date),
            count=len(issue.models), models=issue.models, regression=link.closed_by == "human-fixed"), **base))
        old = old.without_body()       # refresh the body whatever it was
    if not old.same_body(issue.hash):
        out.actions.append(Action("edit", number=link.number, title=issue.title, body=issue.body,
                                  material=issue.hash, reason="results changed", **base))
        if link.state != "closed" and (new or gone) and old.results != issue.hash.results:
            out.comment(ctx, Action("comment", number=link.number, reason="what changed",
                                    body=changes(ctx, g.key, new, gone, [], quiet=False), **base), capped=True)
    if old.labels != issue.hash.labels:
        out.actions.append(Action("labels", number=link.number, labels=issue.labels, material=issue.hash,
                                  reason="routing labels changed", **base))


def shift(ctx: RunContext, issue: TrackingIssue, link: Link, out: Plan) -> None:
    """A signature that moved: the issue of the old one says so once, takes the new title and body and key."""
    g = issue.group
    out.moves.append((link.key, g.key, g.signature))
    if link.muted:
        return
    base = dict(key=g.key, kind="tracking", config=g.config, signature=g.signature, mode=ctx.mode.key)
    out.comment(ctx, Action("comment", number=link.number, reason="signature moved", body=render.render(
        "comment_shift.md.j2", comment_marker=ctx.comment_marker(g.key, "moved"), date_text=when(ctx.date),
        old=link.signature or "", new=g.signature, models=issue.models), **base))
    out.actions.append(Action("edit", number=link.number, title=issue.title, body=issue.body, material=issue.hash,
                              reason="signature moved", **base))
    if BodyHash.parse(link.body_sha).labels != issue.hash.labels:
        out.actions.append(Action("labels", number=link.number, labels=issue.labels, material=issue.hash,
                                  reason="routing labels changed", **base))


def inactive(ctx: RunContext, link: Link, out: Plan) -> None:
    """A tracking issue whose signature this run did not show: count the quiet night, close on a verified fix."""
    config, sig = link.config or "", link.signature or ""
    seen = ctx.timeline.seen(config, sig)
    quiet = seen.quiet
    base = dict(key=link.key, kind="tracking", config=config, signature=sig, mode=ctx.mode.key)
    if link.state == "closed":
        if link.closed_by == "human" and quiet >= 1:
            out.notes.append((link.key, {"closed_by": "human-fixed"}))
        return
    if link.muted:
        return
    if link.quiet_nightlies != quiet:
        out.notes.append((link.key, {"quiet_nightlies": quiet}))
    found = fixes.verdict(sig, list(seen.models), seen.nights, ctx.settings.verify_nightlies, seen.last_seen)
    if found.close:
        out.comment(ctx, Action("comment", number=link.number, reason="closing", body=render.render(
            "comment_close.md.j2", comment_marker=ctx.comment_marker(link.key, "close"), config=config,
            fixed_in=when(found.fixed_in or ctx.date), last_failing=short(found.last_failing or "earlier"),
            streak=found.streak, models=list(seen.models), quiet=quiet, wrong_result=is_wrong_signature(sig),
            fix_range=ctx.view.ranges.get((config, sig, "fixed")),
            fixed_by=fixed_by(ctx.view.culprits.get((config, sig, "fixed")), ctx.settings.culprit_repo)), **base))
        out.actions.append(Action("close", number=link.number, reason=f"verified fixed on {found.streak} nightlies",
                                  **base))
        return
    _, gone = news(ctx, config, sig)
    if gone:
        out.comment(ctx, Action("comment", number=link.number, reason="signature gone", body=changes(
            ctx, link.key, [], gone, [], quiet=True, untested=found.untested), **base), capped=True)


def summary(ctx: RunContext, issue: SummaryIssue, link: Link | None, out: Plan) -> None:
    """A config's summary issue: file it, or refresh it with a comment on what changed."""
    base = dict(key=issue.key, kind="summary", config=issue.config, signature=None, mode=ctx.mode.key)
    if link is None:
        out.actions.append(Action("create", number=None, title=issue.title, body=issue.body, labels=issue.labels,
                                  material=issue.hash, reason="new config", **base))
        return
    if link.state == "closed" or link.muted:
        return                          # closed by a person: leave it be
    if BodyHash.parse(link.body_sha).same_body(issue.hash):
        return
    out.actions.append(Action("edit", number=link.number, title=issue.title, body=issue.body, material=issue.hash,
                              reason="results changed", **base))
    other: dict[str, list[str]] = {}
    for t in ctx.transitions:
        if t.config == issue.config and not t.flaky and t.transition not in ("unchanged", "still_crashing"):
            other.setdefault(t.transition.replace("_", " "), []).append(t.model)
    if other:
        out.comment(ctx, Action("comment", number=link.number, reason="what changed", body=changes(
            ctx, issue.key, [], [], sorted(other.items()), quiet=False), **base), capped=True)


def changes(ctx: RunContext, key: str, new: list[str], fixed: list[str], other: list[tuple[str, list[str]]], *,
            quiet: bool, untested: dict[str, str] | None = None) -> str:
    """The "what changed" comment: models newly crashing, no longer crashing, other transitions."""
    return render.render("comment_changes.md.j2", comment_marker=ctx.comment_marker(key, "changes"),
                         date_text=when(ctx.date), previous_text=ctx.previous_text, new=new, fixed=fixed, other=other,
                         quiet=quiet, verify_nightlies=ctx.settings.verify_nightlies,
                         untested=sorted((untested or {}).items()), limit=50)
