"""Signature shifts: the same models stop failing with signature A and start failing with B under one config.

A torch change that moves where a crash is raised renames its signature; the models stay. Then A's issue is
not closed and B's opened: A's issue gets one comment and becomes B's (bot.issues.lifecycle.shift). "The same
models" is `same_models`: at least `SHARE` of each side is in the other. Only an open issue whose signature
the night did not show can move, to a signature that has no issue yet, each at most once. A crash never moves to
a wrong result nor the reverse: a model that stops crashing and gives wrong results is two findings, not a rename.
"""
from __future__ import annotations

from bot.issues.context import RunContext
from bot.issues.tracking import Group
from harness.core.correctness import is_wrong_signature
from state.links import Link

SHARE = 0.8     # both ways: of the models that left A, and of B's models


def same_models(a: set[str], b: set[str]) -> bool:
    """Whether two model sets are the same models: at least SHARE of each is in the other."""
    both = len(a & b)
    return bool(both) and both >= SHARE * len(a) and both >= SHARE * len(b)


def find(ctx: RunContext, new: list[Group], links: list[Link]) -> dict[str, Link]:
    """{key of a new group: the link of the issue it moves} for each shift of this night."""
    moved: dict[str, Link] = {}
    for link in sorted(links, key=lambda l: l.key):
        if link.kind != "tracking" or link.state != "open":
            continue
        left = _left(ctx, link.config or "", link.signature or "")
        kind = is_wrong_signature(link.signature or "")
        matches = [g for g in new if g.config == link.config and g.key not in moved and g.wrong_result == kind
                   and same_models(left, set(g.models))]
        if matches:
            best = max(matches, key=lambda g: (len(left & set(g.models)), g.signature))
            moved[best.key] = link
    return moved


def _left(ctx: RunContext, config: str, signature: str) -> set[str]:
    """The models that stopped crashing with `signature` tonight (per the believed diff)."""
    return {t.model for t in ctx.transitions if t.config == config and not t.flaky
            and t.before.signature == signature and t.after.signature != signature}
