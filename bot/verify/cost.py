"""What the verify step costs: scripts run and seconds spent, per tracking group and stage, and in all.

Every reproducer script the step runs goes through a runner or the maintainer's driver
(bot/verify/steps.py: `VerifySteps.run`, `VerifySteps.drive`); `Meter` wraps
them so each run is counted against its group and stage (carry, verify, shrink,
isolate, maintainer). Groups run side by side on threads, so counting takes a lock;
the store is written by the caller's thread only (state/verdicts.py add_cost).
Torch is never imported here.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, TypeVar, cast

from state.verdicts import VerdictCost

Group = tuple[str, str]   # (config, signature)
F = TypeVar("F", bound=Callable[..., Any])   # a runner or a driver (bot/verify/steps.py)


class Meter:
    """Scripts run and seconds spent per (group, stage), shrink tries and kept steps per group; thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._groups: dict[Group, VerdictCost] = {}
        self.clock = clock
        self.started = clock()
        self.total = 0            # scripts run in all

    def _add(self, group: Group, cost: VerdictCost) -> None:
        self._groups[group] = self._groups.get(group, VerdictCost()) + cost

    def count(self, group: Group, stage: str, seconds: float, scripts: int = 1) -> None:
        """`scripts` runs of `group` in `stage` took `seconds`."""
        with self._lock:
            self._add(group, VerdictCost(stages={stage: seconds}, scripts=scripts))
            self.total += scripts

    def shrank(self, group: Group, tries: int, kept: int) -> None:
        """A shrink of `group` tried `tries` steps and kept `kept`."""
        with self._lock:
            self._add(group, VerdictCost(tries=tries, kept=kept))

    def take(self, group: Group) -> VerdictCost | None:
        """What `group` cost since the last take (None: nothing), and forget it."""
        with self._lock:
            return self._groups.pop(group, None)

    def timed(self, group: Group, stage: str, call: F) -> F:
        """`call` (a reproducer runner or the maintainer's driver), each of its runs counted against `group` in `stage`."""
        def counted(*args: Any) -> Any:
            start = self.clock()
            try:
                return call(*args)
            finally:
                self.count(group, stage, self.clock() - start)
        return cast(F, counted)
