"""The one reader of a child process's tagged answer: `TAG {json}` lines on its stdout.

Three children answer this way: a reproducer (`FLAGSWEEP_RESULT`, harness/engine/script_runner.py), the
provider's torch probe (`FLAGSWEEP_TORCH`, bot/builds/provider.py) and a named call in another interpreter
(`FLAGSWEEP_ANSWER`, harness/engine/interpreter.py). Whatever else a child prints (warnings, a traceback, its own
progress lines) is never taken for the answer. A tag that is absent, or a tagged line that is not JSON, is a
`ChildLineError` naming the tag; what the JSON must hold is the reader's type to check (harness.core.record).
Stdlib only.
"""
from __future__ import annotations

import json
from typing import Any


class ChildLineError(ValueError):
    """A child's stdout has no line with the tag, or one that is not JSON: the message names the tag."""

    def __init__(self, tag: str, why: str) -> None:
        super().__init__(f"{tag}: {why}")
        self.tag = tag
        self.why = why


def line(tag: str, value: Any) -> str:
    """The line a child prints to answer `value` under `tag` (no newline)."""
    return f"{tag} {json.dumps(value, sort_keys=True)}"


def tagged(stdout: str, tag: str) -> list[Any]:
    """Every value a child printed under `tag`, in order (none: an empty list); ChildLineError for a bad one."""
    prefix = tag + " "
    values = []
    for text in stdout.splitlines():
        if text.startswith(prefix):
            try:
                values.append(json.loads(text[len(prefix):]))
            except ValueError:
                raise ChildLineError(tag, f"not JSON: {text[len(prefix):][:80]!r}") from None
    return values


def last(stdout: str, tag: str) -> Any:
    """The last value a child printed under `tag`; ChildLineError when there is none or it is not JSON."""
    values = tagged(stdout, tag)
    if not values:
        raise ChildLineError(tag, "no such line in the output")
    return values[-1]
