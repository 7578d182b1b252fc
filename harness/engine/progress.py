"""A live progress bar on stderr (tqdm): items done/total, rate, ETA, crashes so far.

On a terminal tqdm redraws one line; otherwise (CI logs, tests, a pipe) a plain
line is written at most every LOG_EVERY_S seconds, so logs stay short. It stays on
under `sweep --json` (stdout holds the JSON, the bar is on stderr). tqdm is imported only when a bar
is enabled: worker processes that import this package never pay for it. The label and the postfix name models,
configs and stages, so both are written through `harness.core.terminal.visible`, as all terminal text is.
"""
from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from harness.core.terminal import visible

LOG_EVERY_S = 15.0


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):   # a closed or fake stream
        return False


class Progress:
    """Counts finished items and draws them; a no-op when disabled."""

    def __init__(self, total: int, done: int = 0, *, enabled: bool = True, label: str = "",
                 stream: TextIO | None = None):
        self.total, self.done, self.crashes = total, done, 0
        self.start_done = done
        self.enabled, self.label = enabled and total > 0, visible(label)
        self.stream = stream or sys.stderr
        self.tty = self.enabled and _isatty(self.stream)
        self.started = self.last = time.monotonic()
        self.closed = False
        self.bar: Any = None
        if self.tty:
            from tqdm import tqdm
            self.bar = tqdm(total=total, initial=done, desc=self.label, unit="item", file=self.stream,
                            dynamic_ncols=True, mininterval=0.2, leave=True, postfix=self._shown())
        elif self.enabled:
            self._log()

    def _postfix(self) -> str:
        return f"{self.crashes} crashed"

    def _shown(self) -> str:
        """The postfix as the terminal gets it (a subclass's postfix names a model and a stage)."""
        return visible(self._postfix())

    def advance(self, crashed: bool = False) -> None:
        """One more item finished."""
        self.done += 1
        self.crashes += int(crashed)
        if self.bar is not None:
            if crashed:
                self.bar.set_postfix_str(self._shown(), refresh=False)
            self.bar.update(1)
        elif self.enabled and (self.done >= self.total or time.monotonic() - self.last >= LOG_EVERY_S):
            self._log()

    def line(self) -> str:
        """The text of the progress line (tqdm's meter, in ASCII for logs)."""
        from tqdm import tqdm
        elapsed = time.monotonic() - self.started
        # tqdm's rate counts from `initial`: a resumed sweep's ETA uses only the items run now.
        return tqdm.format_meter(self.done, self.total, elapsed, ncols=100, prefix=self.label, ascii=True,
                                 unit="item", postfix=self._shown(), initial=self.start_done)

    def _log(self) -> None:
        self.stream.write(self.line() + "\n")
        self.stream.flush()
        self.last = time.monotonic()

    def close(self) -> None:
        """Finish the line (idempotent)."""
        if self.enabled and not self.closed:
            self.closed = True
            if self.bar is not None:
                self.bar.close()
