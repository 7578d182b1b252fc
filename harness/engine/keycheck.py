"""Runs in the torch under test: what it has of each config key.

The bot process never imports torch; `harness.engine.configs.probe` calls probe_here in the
interpreter that will run the workers (through harness.engine.interpreter) and judges its answer.
"""
from __future__ import annotations

import difflib
import functools
from typing import Any

from harness.engine.configs import ConfigError, split_key


def entry_type(entry: Any) -> str:
    """The type torch declares for a config entry (aliases have a sentinel default: trust value_type first)."""
    value_type = getattr(entry, "value_type", None)
    if isinstance(value_type, type):
        return value_type.__name__
    return type(getattr(entry, "default", None)).__name__


def probe_here(keys: list[str]) -> dict[str, dict[str, Any]]:
    """Each key in this interpreter's torch: "present" (declared type, type of the current value),
    "missing" (with close matches) or "malformed" (with the reason)."""
    import importlib

    import torch  # noqa: F401  (no torch here is an error of its own, not "every key missing")

    found: dict[str, dict[str, Any]] = {}
    entries: dict[str, dict[str, Any]] = {}
    for key in keys:
        try:
            module_name, attr = split_key(key)
        except ConfigError as exc:
            found[key] = {"status": "malformed", "reason": str(exc)}
            continue
        if module_name not in entries:
            try:
                entries[module_name] = dict(importlib.import_module(module_name)._config)
            except (ImportError, AttributeError):
                entries[module_name] = {}   # this torch has no such config module: every key is missing
        table = entries[module_name]
        if attr in table:
            current = functools.reduce(getattr, attr.split("."), importlib.import_module(module_name))
            found[key] = {"status": "present", "type": entry_type(table[attr]), "current": type(current).__name__}
        elif any(name.startswith(attr + ".") for name in table):
            found[key] = {"status": "malformed", "reason": f"{key!r} is a group of settings, not one setting"}
        else:
            close = difflib.get_close_matches(attr, list(table), n=3, cutoff=0.8)
            found[key] = {"status": "missing", "close": [f"{module_name}.{a}" for a in close]}
    return found
