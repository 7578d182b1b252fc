"""The issue plan of one run (pure): its view and timeline → GitHub actions with rendered text.

Tracking issues first (bot.issues.tracking: one per (config, signature) of a crash the flag causes; their
numbers feed the summaries), then the open ones whose signature this run did not show, then one summary
issue per config (bot.issues.summary); what becomes of each is bot.issues.lifecycle's. No I/O: the view is
read once by bot.view.run_view, the timeline by bot.issues.timeline.
"""
from __future__ import annotations

from bot.issues import lifecycle, summary, tracking
from bot.issues.context import PlanSettings, RunContext
from bot.issues.keys import summary_key
from bot.issues.lifecycle import Plan
from bot.issues.timeline import Timeline
from bot.view.run_view import RunView


def plan(view: RunView, timeline: Timeline, settings: PlanSettings) -> Plan:
    """All the actions for one run."""
    ctx = RunContext(view, timeline, settings)
    out = Plan()
    groups = tracking.groups(ctx)
    for group in groups:
        link = view.links.get(group.key)
        lifecycle.active(ctx, tracking.issue(ctx, group, link), link, out)
    shown = {g.key for g in groups}
    for key, link in sorted(view.links.items()):
        if link.kind == "tracking" and key not in shown and link.config in ctx.by_config:
            lifecycle.inactive(ctx, link, out)
    for config in sorted(ctx.by_config):
        lifecycle.summary(ctx, summary.issue(ctx, config, groups), view.links.get(summary_key(config)), out)
    return out
