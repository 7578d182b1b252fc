"""What every stage of one run's verify step shares: the store, the run and its builds, the interpreter, the seams,
the budget and the meter. `step.verify_run` builds it once and hands it whole to verify, isolate and ablate.
Stdlib only: torch is never imported here.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any, Callable

from bot.verify.cost import Meter
from bot.verify.steps import VerifySteps
from harness.core.model_build import ModelBuild
from state.runs import Run


@dataclass(frozen=True)
class StepContext:
    """One run's verify step, as its stages see it (the store is written on the caller's thread only)."""

    conn: sqlite3.Connection
    run: Run
    builds: dict[str, ModelBuild]          # the run's stored build per model
    python: str | None                     # the interpreter reproducers run under (None: the run recorded none)
    seams: VerifySteps = VerifySteps()
    timeout: float = 600.0                 # seconds per reproducer run
    shrink_budget: float = 0.0             # seconds per confirmed reproducer to shrink it in (0: embed it as built)
    workers: int = 1                       # groups run side by side
    deadline: float | None = None          # on the meter's clock: no group starts after it, and a shrink stops there
    meter: Meter = field(default_factory=Meter)    # what each group costs, on the step's clock
    progress: Callable[[str], None] | None = None

    @classmethod
    def of(cls, conn: sqlite3.Connection, run: Run, builds: dict[str, ModelBuild], *, python: str | None = None,
           **knobs: Any) -> "StepContext":
        """The context of `run` (`python` default: the interpreter the run's workers used, from its environment)."""
        return cls(conn, run, builds, python or run.environment.python, **knobs)

    def left(self) -> float:
        """Seconds to the deadline (inf: none)."""
        return float("inf") if self.deadline is None else self.deadline - self.meter.clock()

    def past_deadline(self) -> bool:
        """No group may start now."""
        return self.left() <= 0

    def say(self, text: str) -> None:
        """One progress line (nothing when no one listens)."""
        if self.progress:
            self.progress(text)
