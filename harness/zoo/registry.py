"""Extra models registered in-process (test-only models for fault injection)."""
from __future__ import annotations

from typing import Callable

EXTRA: dict[str, tuple[str, Callable]] = {}
SECOND: dict[str, object] = {}   # a registered model's second input spec, as a lock entry would seal it
MODES: dict[str, object] = {}    # a registered model's modes record, as a lock entry would seal it


def register(name: str, stratum: str, builder: Callable, second_spec: object = None, modes: object = None) -> None:
    """Add a model visible to resolve() and build() in this process; builder(device) -> Built; `second_spec`: the
    second input spec it seals (None: the rule's, from the Built's spec); `modes`: the modes record it seals
    (harness.zoo.mode_record; None: none, every mode run as before)."""
    EXTRA[name] = (stratum, builder)
    if second_spec is not None:
        SECOND[name] = second_spec
    if modes is not None:
        MODES[name] = modes
