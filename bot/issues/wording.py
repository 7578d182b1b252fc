"""The planner's words helpers: one-line templates, date phrases, and bodies that fit GitHub's limit."""
from __future__ import annotations

from typing import Any

from bot.text import render, markdown

ROW_LIMITS = (200, 100, 50, 20, 5)       # table rows tried, largest first, until the body fits


def when(stamp: str) -> str:
    """'in nightly 2026-11-20' for a nightly date, 'on 2026-11-20 13:47 UTC' for a run's start time."""
    return line("date_phrase.txt.j2", stamp=str(stamp))


def line(template: str, **values: Any) -> str:
    """A one-line template (a title, a date phrase) rendered without its trailing newline."""
    return render.render(template, **values).strip("\n")


def short(stamp: str) -> str:
    """A date, or a run's start time to the minute."""
    return str(stamp)[:16].replace("T", " ")


def render_fitting(template: str, ctx: dict[str, Any]) -> str:
    """Render with the largest table size that keeps the body under GitHub's limit."""
    for limit in ROW_LIMITS:
        body = render.render(template, limit=limit, **ctx)
        if markdown.fits(body):
            return body
    cut = body[: markdown.MAX_BODY - 200]
    return cut + "\n\n… (truncated)\n" + markdown.END + "\n"
