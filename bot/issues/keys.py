"""Issue keys: the stable name of each issue the bot keeps (its marker key), and a reference to one by key.

One tracking issue per (config, signature) of a crash the flag causes (harness.core.tracking), one summary
issue per config. A body may reference another issue by key before that issue has a number: the reference
is resolved to "#N" when the body is sent (bot.github.publish.resolve_refs).
"""
from __future__ import annotations

import hashlib

REF = "[[flagsweep-ref:{key}]]"


def tracking_key(config: str, signature: str) -> str:
    """Stable key of a (config, signature) tracking issue."""
    return "t" + hashlib.sha256(f"{config}\n{signature}".encode()).hexdigest()[:16]


def summary_key(config: str) -> str:
    """Stable key of a config's summary issue."""
    return "s" + hashlib.sha256(config.encode()).hexdigest()[:16]
