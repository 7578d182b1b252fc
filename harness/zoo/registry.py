"""Extra models registered in-process (test-only models for fault injection)."""
from __future__ import annotations

from typing import Callable

EXTRA: dict[str, tuple[str, Callable]] = {}


def register(name: str, stratum: str, builder: Callable) -> None:
    """Add a model visible to resolve() and build() in this process; builder(device) -> Built."""
    EXTRA[name] = (stratum, builder)
