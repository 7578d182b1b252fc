"""Issue keys: the stable name of each issue the bot keeps (its marker key), and a reference to one by key.

One tracking issue per (config, signature) of a crash the flag causes (harness.core.tracking), one summary
issue per config. A body may reference another issue by key before that issue has a number: the reference
is resolved to "#N" when the body is sent (`resolve_refs`, called by bot.github.publish).
"""
from __future__ import annotations

import hashlib
import re

REF = "[[flagsweep-ref:{key}]]"
_REF_RE = re.compile(r"\[\[flagsweep-ref:([A-Za-z0-9]+)\]\]")


def tracking_key(config: str, signature: str) -> str:
    """Stable key of a (config, signature) tracking issue."""
    return "t" + hashlib.sha256(f"{config}\n{signature}".encode()).hexdigest()[:16]


def summary_key(config: str) -> str:
    """Stable key of a config's summary issue."""
    return "s" + hashlib.sha256(config.encode()).hexdigest()[:16]


def resolve_refs(body: str, numbers: dict[str, int | None]) -> str:
    """Turn each `REF` into `#N` (or "(issue pending)" while the issue it names has no number yet)."""
    return _REF_RE.sub(lambda m: f"#{numbers[m.group(1)]}" if numbers.get(m.group(1)) else "(issue pending)", body)


def has_refs(body: str | None) -> bool:
    """Whether `body` references another issue by key."""
    return bool(body) and _REF_RE.search(body) is not None
