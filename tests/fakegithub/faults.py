"""Switchable faults for the fake GitHub: 5xx, secondary rate limits, slowness, dropped connections.

Each fault is a rule that matches requests (by method and a path substring) and
fires for the next `count` matching requests, then disappears.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass


OUTAGE = 10 ** 9    # firings of an outage: more than any test sends before ending it


@dataclass(eq=False)
class Fault:
    kind: str                 # status | secondary | primary | slow | drop
    count: int
    method: str | None = None
    path: str | None = None   # substring of the request path
    status: int = 500
    retry_after: float | None = None
    delay: float = 0.0
    after: int = 0            # matching requests let through before the fault starts firing

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (self.path is None or self.path in path)


class Faults:
    """The fault switchboard a test holds as `fake_github.faults`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Fault] = []
        self.fired: list[tuple[str, str, str]] = []    # (kind, method, path) of every fault that fired

    def _add(self, fault: Fault) -> Fault:
        with self._lock:
            self._rules.append(fault)
        return fault

    def fail_next(self, n: int = 1, *, status: int = 500, method: str | None = None, path: str | None = None) -> Fault:
        """The next `n` matching requests answer `status` (nothing is stored)."""
        return self._add(Fault("status", n, method, path, status=status))

    def secondary_rate_limit(self, n: int = 1, *, retry_after: float | None = 1, method: str | None = None,
                             path: str | None = None) -> Fault:
        """403 'secondary rate limit' with `Retry-After` (None: no header, as GitHub sometimes does)."""
        return self._add(Fault("secondary", n, method, path, status=403, retry_after=retry_after))

    def primary_rate_limit(self, n: int = 1, *, reset_in: float = 1, method: str | None = None,
                           path: str | None = None) -> Fault:
        """403 with X-RateLimit-Remaining: 0 and a reset `reset_in` seconds from now."""
        return self._add(Fault("primary", n, method, path, status=403, retry_after=reset_in))

    def slow(self, delay: float, n: int = 1, *, method: str | None = None, path: str | None = None) -> Fault:
        """The next `n` matching requests are processed, then answered after `delay` seconds."""
        return self._add(Fault("slow", n, method, path, delay=delay))

    def drop_after_write(self, n: int = 1, *, method: str | None = "POST", path: str | None = None) -> Fault:
        """The write is stored, then the connection is closed without an answer (PyGithub's re-send trap)."""
        return self._add(Fault("drop", n, method, path))

    def outage(self, *, status: int = 500, method: str | None = None, path: str | None = None,
               after: int = 0) -> Fault:
        """Every matching request (past the first `after`) answers `status` until `end(fault)`: an endpoint down for a while."""
        return self._add(Fault("status", OUTAGE, method, path, status=status, after=after))

    def end(self, fault: Fault) -> None:
        """Lift one fault (an outage is over); requests after this reach the state again."""
        with self._lock:
            if fault in self._rules:
                self._rules.remove(fault)

    def clear(self) -> None:
        """Remove every pending fault."""
        with self._lock:
            self._rules.clear()

    def pending(self) -> int:
        """How many fault firings are still armed."""
        with self._lock:
            return sum(f.count for f in self._rules)

    def take(self, method: str, path: str, kinds: tuple[str, ...]) -> Fault | None:
        """Consume one firing of the first matching fault of one of `kinds`."""
        with self._lock:
            for fault in self._rules:
                if fault.kind in kinds and fault.count > 0 and fault.matches(method, path):
                    if fault.after > 0:
                        fault.after -= 1
                        continue
                    fault.count -= 1
                    if fault.count == 0:
                        self._rules.remove(fault)
                    self.fired.append((fault.kind, method, path))
                    return fault
        return None
