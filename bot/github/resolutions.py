"""How one of the bot's tracking issues ended, read from the listing of its issues (no extra request).

The rule behind the measured precision (the counting is state.resolutions'): a `invalid` label is a maintainer's
verdict whatever the state; an open issue is `open`; a close the bot made (its link says so: GitHub's listing
does not name the closer) is `fixed_by_bot`; else GitHub's `state_reason` says how a maintainer closed it.
"""
from __future__ import annotations

from bot.github.port import IssueRef
from state.links import Link
from state.resolutions import Resolution

INVALID_LABEL = "invalid"


def resolve(ref: IssueRef, link: Link | None) -> Resolution:
    """The resolution of one tracking issue as GitHub shows it now."""
    reason = ref.state_reason
    if any(label.lower() == INVALID_LABEL for label in ref.labels):
        kind = "invalid"
    elif ref.state == "open":
        kind = "open"
    elif link is not None and link.closed_by == "bot":
        kind = "fixed_by_bot"
    elif reason in ("duplicate", "not_planned"):
        kind = reason
    else:
        kind = "completed"
    return Resolution(number=ref.number, key=ref.key or "", resolution=kind, state_reason=reason,
                      reopened=reason == "reopened")
