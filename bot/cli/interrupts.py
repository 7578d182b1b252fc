"""SIGTERM (a CI cancel, `kill`, systemd stopping a unit) ends a command the way Ctrl-C does.

Python's default for SIGTERM is to die at once: no `finally`, so a run stays
`running`, its workers and lease outlive it. Raising KeyboardInterrupt instead
lets the engine stop the workers, mark the run interrupted (resumable) and
release its lease.
"""
from __future__ import annotations

import contextlib
import signal
from typing import Any, Iterator


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt (main thread only)."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
