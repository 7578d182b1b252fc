"""Extra models registered in-process (test-only models for fault injection), and the lock workers' builder."""
from __future__ import annotations

from typing import Callable

EXTRA: dict[str, tuple[str, Callable]] = {}
# Set only in `flagsweep zoo lock` workers (harness.discovery.lockjob): build(model, device) runs discovery instead.
BUILDER: Callable | None = None


def register(name: str, stratum: str, builder: Callable) -> None:
    """Add a model visible to resolve() and build() in this process; builder(device) -> Built."""
    EXTRA[name] = (stratum, builder)
