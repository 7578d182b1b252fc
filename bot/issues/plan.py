"""The issue plan of one run (pure): its view and timeline → GitHub actions with rendered text.

A run is one mode (harness.core.modes): its issues are that mode's, and another mode's are left alone.
Tracking issues first (bot.issues.tracking: one per (config, mode, signature) of a crash the flag causes; their
numbers feed the summaries): those that have an issue are refreshed, a shifted signature moves its old issue
(bot.issues.shifts), the open ones whose signature this run did not show count a quiet night or close, and the
new ones are filed, held pending or watched (bot.issues.filing: evidence, then the budget). Then one summary
issue per config (bot.issues.summary). What becomes of each issue is bot.issues.lifecycle's. No I/O: the view
is read once by bot.view.run_view, the timeline by bot.issues.timeline.
"""
from __future__ import annotations

from bot.issues import filing, lifecycle, shifts, summary, tracking
from bot.issues.context import PlanSettings, RunContext
from bot.issues.keys import summary_key
from bot.issues.lifecycle import Held, Plan
from bot.issues.timeline import Timeline
from bot.view.run_view import RunView


def plan(view: RunView, timeline: Timeline, settings: PlanSettings) -> Plan:
    """All the actions for one run."""
    ctx = RunContext(view, timeline, settings)
    out = Plan()
    groups = tracking.groups(ctx)
    new = [g for g in groups if g.key not in view.links]
    keys = {g.key for g in groups}
    moved = shifts.find(ctx, new, [l for k, l in view.links.items() if k not in keys and ctx.owns(l)])
    for group in groups:
        link = view.links.get(group.key)
        if link is not None:
            lifecycle.active(ctx, tracking.issue(ctx, group, link), link, out)
        elif group.key in moved:
            lifecycle.shift(ctx, tracking.issue(ctx, group, moved[group.key]), moved[group.key], out)
    shown = {g.key for g in groups} | {l.key for l in moved.values()}
    for key, link in sorted(view.links.items()):
        if link.kind == "tracking" and key not in shown and link.config in ctx.by_config and ctx.owns(link):
            lifecycle.inactive(ctx, link, out)
    chosen = _file(ctx, [g for g in new if g.key not in moved], out)
    tracked = [g for g in groups if g.key in view.links or g.key in moved] + [c.group for c in chosen.filed]
    for config in sorted(c for c in ctx.by_config if ctx.settings.summarised(c)):
        lifecycle.summary(ctx, summary.issue(ctx, config, tracked, chosen),
                          view.links.get(summary_key(config, ctx.mode)), out)
    return out


def _file(ctx: RunContext, new: list[tracking.Group], out: Plan) -> filing.Filing:
    """File the new signatures the evidence and the budget allow; hold the rest (pending or watching)."""
    candidates = [filing.candidate(ctx, tracking.issue(ctx, g, None)) for g in new]
    chosen = filing.choose(ctx, candidates, _open_after(ctx, out))
    for c in sorted(chosen.filed, key=lambda c: (c.group.config, c.group.signature)):   # chosen by leverage
        lifecycle.active(ctx, c.issue, None, out)
    out.held += [Held(c.group.key, status, c.issue.title, c.issue.body)
                 for status, held in (("pending", chosen.pending), ("watching", chosen.watching)) for c in held]
    return chosen


def _open_after(ctx: RunContext, out: Plan) -> int:
    """Tracking issues open once this plan's closes and reopens are done."""
    links = ctx.view.links.values()
    opened = sum(1 for l in links if l.kind == "tracking" and l.state == "open")
    change = sum(1 if a.action == "reopen" else -1 for a in out.actions
                 if a.kind == "tracking" and a.action in ("reopen", "close"))
    return opened + change
