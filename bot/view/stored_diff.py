"""The diff of two stored runs: the I/O shell that loads what harness.core.diff compares."""
from __future__ import annotations

import sqlite3
from typing import Sequence

from harness.core.diff import DiffResult, diff
from harness.core.outcome import Effect, Outcome
from state import history, runs as runs_mod


def diff_stored(conn: sqlite3.Connection, run_a: int, run_b: int) -> DiffResult:
    """Diff run_a → run_b with their outcomes, effects and config settings (shards of a nightly count as one run)."""
    a, b = runs_mod.get_run(conn, run_a), runs_mod.get_run(conn, run_b)
    return diff(history.group_outcomes(conn, run_a), history.group_outcomes(conn, run_b),
                before_effects=history.effects(conn, run_a), after_effects=history.effects(conn, run_b),
                before_configs=a.configs if a else None, after_configs=b.configs if b else None,
                transformers=(_transformers(a), _transformers(b)),
                recipes=(_recipes(a), _recipes(b)))


def diff_runs(conn: sqlite3.Connection, before: runs_mod.Run, after: runs_mod.Run) -> DiffResult:
    """Diff two runs already read (their outcomes and effects are read here, the runs are not read again)."""
    return diff(history.group_outcomes(conn, before.id), history.group_outcomes(conn, after.id),
                before_effects=history.effects(conn, before.id), after_effects=history.effects(conn, after.id),
                before_configs=before.configs, after_configs=after.configs,
                transformers=(_transformers(before), _transformers(after)),
                recipes=(_recipes(before), _recipes(after)))


def diff_loaded(conn: sqlite3.Connection, before: runs_mod.Run, after: runs_mod.Run, outcomes: Sequence[Outcome],
                effects: Sequence[Effect]) -> DiffResult:
    """Diff `before` → `after` where `after` is already loaded with its outcomes and effects (reads `before` only)."""
    return diff(history.group_outcomes(conn, before.id), list(outcomes),
                before_effects=history.effects(conn, before.id), after_effects=list(effects),
                before_configs=before.configs, after_configs=after.configs,
                transformers=(_transformers(before), _transformers(after)),
                recipes=(_recipes(before), _recipes(after)))


def _transformers(run: runs_mod.Run | None) -> str | None:
    """The transformers version a run built its models with (None: unknown)."""
    return run.environment.transformers_version if run else None


def _recipes(run: runs_mod.Run | None) -> str | None:
    """The recipe fingerprint (the zoo's lock and build code) a run built its models with (None: unknown)."""
    return run.environment.recipe_fingerprint if run else None
