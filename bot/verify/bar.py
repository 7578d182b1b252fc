"""The verify step's progress bar on stderr: signatures done / total, and what is being run now.

The engine's bar (harness/engine/progress.py: tqdm on a terminal, a plain line at
most every LOG_EVERY_S seconds otherwise) with the current model and stage as its
postfix. Jobs run on worker threads, so every update takes a lock. On a terminal
the stage lines go into the bar; elsewhere they are also passed on as lines (logs
keep every step).
"""
from __future__ import annotations

import threading
from typing import Callable, TextIO

from harness.engine.progress import Progress


class StepBar(Progress):
    """Signatures done / total, with the current model and stage."""

    def __init__(self, total: int, *, enabled: bool, say: Callable[[str], None] | None = None,
                 stream: TextIO | None = None) -> None:
        self.current = "starting"
        self._lock = threading.Lock()
        self._say = say
        super().__init__(total, enabled=enabled, label="verify", stream=stream)

    def _postfix(self) -> str:
        return self.current

    def doing(self, text: str) -> None:
        """What a job is doing now (a model and a stage)."""
        with self._lock:          # one line at a time: jobs on two threads must not interleave theirs
            self.current = text
            if self.bar is not None:
                self.bar.set_postfix_str(self._shown())
            elif self._say:
                self._say(text)

    def finished(self) -> None:
        """One more signature done."""
        with self._lock:
            self.advance()
