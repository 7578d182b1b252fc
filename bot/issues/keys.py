"""Issue keys: the stable name of each issue the bot keeps (its marker key), and a reference to one by key.

One tracking issue per (config, mode, signature) of a crash the flag causes (harness.core.tracking), one summary
issue per (config, mode). The default mode (eval) adds nothing to a key: its issues keep the keys they had before
modes existed; another mode adds its axes (harness.core.modes.Mode.key), never its name. A body may reference another issue by key before that issue has a number: the reference
is resolved to "#N" when the body is sent (`resolve_refs`, called by bot.github.publish).
"""
from __future__ import annotations

import hashlib
import re

from harness.core.modes import DEFAULT, Mode

REF = "[[flagsweep-ref:{key}]]"
_REF_RE = re.compile(r"\[\[flagsweep-ref:([A-Za-z0-9]+)\]\]")


def tracking_key(config: str, signature: str, mode: Mode = DEFAULT) -> str:
    """Stable key of a (config, mode, signature) tracking issue."""
    return "t" + _hash(f"{config}\n{signature}", mode)


def summary_key(config: str, mode: Mode = DEFAULT) -> str:
    """Stable key of a config's summary issue in one mode."""
    return "s" + _hash(config, mode)


def _hash(text: str, mode: Mode) -> str:
    return hashlib.sha256((f"{text}\n{mode.key}" if mode.key else text).encode()).hexdigest()[:16]



def resolve_refs(body: str, numbers: dict[str, int | None]) -> str:
    """Turn each `REF` into `#N` (or "(issue pending)" while the issue it names has no number yet)."""
    return _REF_RE.sub(lambda m: f"#{numbers[m.group(1)]}" if numbers.get(m.group(1)) else "(issue pending)", body)


def has_refs(body: str | None) -> bool:
    """Whether `body` references another issue by key."""
    return bool(body) and _REF_RE.search(body) is not None
