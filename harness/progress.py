"""A live progress line on stderr: items done/total, ETA, crashes so far.

On a terminal it redraws one line; otherwise (CI logs, tests) it prints a line
at most every LOG_EVERY_S seconds, so logs stay short.
"""
from __future__ import annotations

import sys
import time
from typing import TextIO

LOG_EVERY_S = 15.0
WIDTH = 24


def _fmt(seconds: float) -> str:
    seconds = int(max(0, seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """Counts finished items and draws them; a no-op when disabled."""

    def __init__(self, total: int, done: int = 0, *, enabled: bool = True, label: str = "",
                 stream: TextIO | None = None):
        self.total, self.done, self.crashes = total, done, 0
        self.start_done = done
        self.enabled, self.label = enabled and total > 0, label
        self.stream = stream or sys.stderr
        self.tty = self.enabled and self.stream.isatty()
        self.started = self.last = time.monotonic()
        self.closed = False
        if self.enabled:
            self._draw(force=True)

    def advance(self, crashed: bool = False) -> None:
        """One more item finished."""
        self.done += 1
        self.crashes += int(crashed)
        if self.enabled:
            self._draw(force=self.done >= self.total)

    def line(self) -> str:
        """The text of the progress line."""
        frac = self.done / self.total if self.total else 1.0
        bar = "#" * int(frac * WIDTH) + "." * (WIDTH - int(frac * WIDTH))
        ran = self.done - self.start_done
        elapsed = time.monotonic() - self.started
        eta = _fmt(elapsed / ran * (self.total - self.done)) if ran else "?"
        return (f"{self.label} [{bar}] {self.done}/{self.total} items, {_fmt(elapsed)} elapsed, "
                f"ETA {eta}, {self.crashes} crashed")

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.tty:
            if force or now - self.last >= 0.2:
                self.stream.write("\r\x1b[K" + self.line())
                self.stream.flush()
                self.last = now
        elif force or now - self.last >= LOG_EVERY_S:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self.last = now

    def close(self) -> None:
        """Finish the line (idempotent)."""
        if self.enabled and not self.closed:
            self.closed = True
            if self.tty:
                self.stream.write("\n")
                self.stream.flush()
