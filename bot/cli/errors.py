"""Errors that reach the top of a command, turned into one line and an exit code.

Argument values are checked up front (`bot.cli.arguments`); these are the errors
that can only show up once a command runs: a damaged or unwritable store, a
file that cannot be written, workers that cannot start, a bad routing rule, a malformed unsafe flag table.
Anything not listed here is a bug and keeps its traceback.
"""
from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from typing import Any

from bot.issues.routing import RoutingError
from harness.core.unsafe import UnsafeTableError
from harness.engine.pool import PoolError
from state.db import StoreError
from state.runs import UnreadableRun

log = logging.getLogger(__name__)


@dataclass
class Known:
    """What to print (after `flagsweep: `) and the exit code."""

    message: str
    code: int = 2


def describe(exc: BaseException, settings: Any) -> Known | None:
    """One line for a known kind of failure, or None (a bug: let the traceback show)."""
    log.debug("command failed", exc_info=exc)
    if isinstance(exc, UnreadableRun):
        # One run the store holds but cannot read (the listings leave it out, named): the command failed, exit 1.
        return Known(str(exc), code=1)
    if isinstance(exc, StoreError):
        # A corrupted, foreign or newer state file: say so, never reset it.
        return Known(f"state: {exc}")
    if isinstance(exc, sqlite3.DatabaseError):
        return Known(f"state: {settings.state_path}: {_store_problem(exc, settings.state_path)}")
    if isinstance(exc, PoolError):
        return Known(_one_line(str(exc)))
    if isinstance(exc, RoutingError):
        return Known(f"settings: {exc}")
    if isinstance(exc, UnsafeTableError):   # the reviewed table beside harness/core/unsafe.py, edited badly
        return Known(f"unsafe flag table: {exc}")
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return Known(f"{where}{exc.strerror or exc}")
    return None


def _store_problem(exc: sqlite3.DatabaseError, path: Any) -> str:
    text = str(exc)
    if "malformed" in text or "corrupt" in text:
        return (f"the state file is damaged ({text}); keep it for recovery "
                f"(sqlite3 {path} .recover) and pass --state for a new store")
    if "readonly" in text or "read-only" in text:
        return f"cannot write the state file ({text}); check the permissions of the file and of its folder"
    return text


def _one_line(text: str) -> str:
    """The first line of a multi-line message, with its last line as the reason."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) <= 1:
        return text.strip()
    return f"{lines[0]} {lines[-1]}"
