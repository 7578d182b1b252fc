"""Flake confirmation: re-run each new crash and each fix in fresh workers before believing it.

An item whose result does not repeat every time (a crash repeats only with its
signature) is marked flaky with its crash rate (over the first attempt and the
re-runs), re-recorded with that rate, kept
out of the new-crash counts and out of the signature history, and reported apart.
"""
from __future__ import annotations

import dataclasses
import sqlite3
from typing import Any

from harness.core.diff import Side, Transition
from harness.core.effects import effects_for
from harness.core.outcome import Outcome
from harness.core.tracking import tracking_groups
from state import history
from state import runs as runs_mod
from state.db import transaction

# Only a change is worth re-checking: steady states were already seen twice.
CONFIRMED_TRANSITIONS = ("new_crash", "fixed")


def _failed(o: Outcome) -> bool:
    return o.status != "ok"


def _failed_as(first: Outcome | None, o: Outcome) -> bool:
    """A re-run failed the way the first attempt did (its signature): a re-run that fails otherwise (another
    error, a timeout) does not confirm the crash."""
    return _failed(o) and (first is None or not first.signature or o.signature == first.signature)


def crash_rate(first_failed: bool, reruns_failed: list[bool]) -> float:
    """Share of all attempts (the first one and the re-runs) that failed."""
    attempts = [first_failed] + list(reruns_failed)
    return sum(attempts) / len(attempts)


def judge(transition: str, reruns_failed: list[bool]) -> float | None:
    """None when every re-run repeats the change; else the crash rate (the item is flaky). Pure."""
    first_failed = transition == "new_crash"
    if all(f == first_failed for f in reruns_failed):
        return None
    return round(crash_rate(first_failed, reruns_failed), 3)


def first_night(conn: sqlite3.Connection, run_id: int) -> list[Transition]:
    """A run with nothing to compare with: each of its tracked crashes is new, so each is confirmed like one."""
    outcomes = history.group_outcomes(conn, run_id)
    groups = tracking_groups(effects_for(outcomes), outcomes)
    return [Transition(e.model, config, "new_crash", Side(), Side())
            for (config, _sig), effects in sorted(groups.items()) for e in effects]


def _run_items(items: list[tuple[str, str]], *, configs: dict, base_settings: dict, options: Any,
               progress: bool) -> list[Outcome]:
    """Adapter over the engine's item runner: each item in a fresh worker, nothing stored."""
    from harness.engine.engine import run_items

    return run_items(items, configs=configs, base_settings=base_settings, options=options, fresh_workers=True,
                     progress=progress)


def confirm(conn: sqlite3.Connection, run_id: int, transitions: list[Transition], *, configs: dict[str, dict],
            base_settings: dict, options: Any, runs: int = 2, progress: bool = True) -> list[Transition]:
    """Re-run every `new_crash`/`fixed` item `runs` more times; return the transitions, flaky ones marked."""
    targets = [t for t in transitions if t.transition in CONFIRMED_TRANSITIONS and not t.flaky]
    if runs <= 0 or not targets:
        return list(transitions)
    items = [(t.model, t.config) for t in targets for _ in range(runs)]
    results = _run_items(items, configs=configs, base_settings=base_settings, options=options, progress=progress)
    reruns: dict[tuple[str, str], list[Outcome]] = {}
    for (model, config), outcome in zip(items, results):
        reruns.setdefault((model, config), []).append(outcome)
    marked: dict[tuple[str, str], float] = {}
    touched: set[tuple[str, str]] = set()
    for t in targets:
        key = (t.model, t.config)
        stored = runs_mod.find_outcome(conn, history.run_group(conn, run_id) or [run_id], *key)
        first = stored[1] if stored is not None else None
        rate = judge(t.transition, [_failed_as(first, o) if t.transition == "new_crash" else _failed(o)
                                    for o in reruns[key]])
        if stored is not None:
            holder, outcome = stored
            outcome.attempts = 1 + len(reruns[key])
            outcome.flaky_rate = rate
            runs_mod.record_outcome(conn, holder, outcome)
            if outcome.crashed and outcome.signature:
                touched.add((outcome.config, outcome.signature))
        if rate is not None:
            marked[key] = rate
    for config, sig in sorted(touched):
        # A crash now known to be flaky leaves the signature history (or re-enters it once confirmed).
        with transaction(conn):
            history.refresh_signature(conn, config, sig, options.mode.key)
    return [dataclasses.replace(t, flaky_rate=marked[(t.model, t.config)]) if (t.model, t.config) in marked else t
            for t in transitions]
