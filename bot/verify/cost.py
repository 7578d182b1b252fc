"""What the verify step costs: scripts run and seconds spent, per tracking group and stage, and in all.

Every reproducer script the step runs goes through a runner (bot/verify/oracle.py's
Runner) or the maintainer's driver (bot/verify/ablation.py's Drive); `Meter` wraps
them so each run is counted against its group and stage (carry, verify, shrink,
isolate, maintainer). Groups run side by side on threads, so counting takes a lock;
the store is written by the caller's thread only (state/verdicts.py add_cost).
Stdlib only: torch is never imported here.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from bot.verify.oracle import Runner

Group = tuple[str, str]   # (config, signature)


class Meter:
    """Scripts run and seconds spent per (group, stage), shrink tries and kept steps per group; thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._groups: dict[Group, dict[str, Any]] = {}
        self.clock = clock
        self.started = clock()
        self.total = 0            # scripts run in all

    def _entry(self, group: Group) -> dict[str, Any]:
        return self._groups.setdefault(group, {"stages": {}, "scripts": 0, "tries": 0, "kept": 0})

    def count(self, group: Group, stage: str, seconds: float, scripts: int = 1) -> None:
        """`scripts` runs of `group` in `stage` took `seconds`."""
        with self._lock:
            entry = self._entry(group)
            entry["stages"][stage] = round(entry["stages"].get(stage, 0.0) + seconds, 1)
            entry["scripts"] += scripts
            self.total += scripts

    def shrank(self, group: Group, tries: int, kept: int) -> None:
        """A shrink of `group` tried `tries` steps and kept `kept`."""
        with self._lock:
            entry = self._entry(group)
            entry["tries"] += tries
            entry["kept"] += kept

    def take(self, group: Group) -> dict[str, Any] | None:
        """What `group` cost since the last take (None: nothing), and forget it."""
        with self._lock:
            return self._groups.pop(group, None)

    def runner(self, group: Group, stage: str, runner: Runner) -> Runner:
        """`runner`, each of its runs counted against `group` in `stage`."""
        def counted(*args: Any) -> tuple[str, dict[str, Any]]:
            start = self.clock()
            try:
                return runner(*args)
            finally:
                self.count(group, stage, self.clock() - start)
        return counted

    def drive(self, group: Group, stage: str, drive: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        """The maintainer's driver, each of its runs counted against `group` in `stage`."""
        def counted(*args: Any) -> dict[str, Any]:
            start = self.clock()
            try:
                return drive(*args)
            finally:
                self.count(group, stage, self.clock() - start)
        return counted
