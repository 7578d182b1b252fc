"""Extra models registered in-process (test-only models for fault injection)."""
from __future__ import annotations

from typing import Callable

EXTRA: dict[str, tuple[str, Callable]] = {}
SECOND: dict[str, object] = {}   # a registered model's second input spec, as a lock entry would seal it


def register(name: str, stratum: str, builder: Callable, second_spec: object = None) -> None:
    """Add a model visible to resolve() and build() in this process; builder(device) -> Built; `second_spec`: the
    second input spec it seals (None: the rule's, from the Built's spec)."""
    EXTRA[name] = (stratum, builder)
    if second_spec is not None:
        SECOND[name] = second_spec
