"""Which connections the webhook server keeps, so that slow or idle clients cannot take it offline.

A connection is *waiting* while its request head (request line and headers) is
incomplete: on arrival, and again between requests on a kept-alive connection.
It is *busy* while a request it sent is being answered. The rules ([webhook]):
- a waiting connection gets `header_timeout` seconds to complete its head, then
  it is closed (no answer is owed: there is no request yet);
- one peer address holds at most `max_per_peer` connections; one more is closed
  at once;
- at most `max_connections` are open, and waiting ones may hold all but
  `reserve` of them: a newcomer past that closes the OLDEST waiting connection,
  so a flood of slow clients (reconnecting or not) can delay a delivery by at
  most one header timeout's worth of churn, never refuse it for good;
- busy connections are never closed by these rules (their body has `read_timeout`).
Every connection closed by a limit is counted; /healthz shows the counts.
"""
from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

# An internal of uvicorn: pyproject.toml bounds uvicorn and h11 to the minor releases this was tested with.
from uvicorn.protocols.http.h11_impl import H11Protocol

from bot.settings import WebhookSettings

log = logging.getLogger(__name__)


class ConnectionGate:
    """The open connections of one server, and the counts of those closed by a limit (event-loop thread only)."""

    def __init__(self, cfg: WebhookSettings) -> None:
        self.cfg = cfg
        self.waiting: dict[Any, None] = {}     # oldest first (dicts keep insertion order)
        self.busy: set[Any] = set()
        self.peers: Counter[str] = Counter()
        self.refused = 0                       # closed on arrival or evicted by a cap
        self.timed_out = 0                     # closed for an incomplete head after header_timeout

    def counts(self) -> dict[str, int]:
        """What /healthz shows."""
        return {"open": len(self.waiting) + len(self.busy), "waiting": len(self.waiting), "busy": len(self.busy),
                "refused": self.refused, "timed_out": self.timed_out}

    def admit(self, conn: Any, peer: str) -> bool:
        """Whether a new connection from `peer` may stay; closes the oldest waiting one to make room."""
        if self.peers[peer] >= self.cfg.max_per_peer:
            self._refuse(f"a connection from {peer}: it has {self.peers[peer]} open (max_per_peer)")
            return False
        room = self.cfg.max_connections - max(self.cfg.reserve, len(self.busy))
        if room <= 0:
            self._refuse(f"a connection from {peer}: {len(self.busy)} requests in progress (max_connections)")
            return False
        while len(self.waiting) >= room:
            oldest = next(iter(self.waiting))
            self._refuse(f"the oldest waiting connection (from {oldest.peer}) to make room (reserve)")
            self.forget(oldest)
            oldest.close_waiting()
        self.peers[peer] += 1
        self.waiting[conn] = None
        return True

    def _refuse(self, what: str) -> None:
        """Count a connection closed by a cap; log the 1st, 2nd, 4th, 8th... (a flood must not flood the log)."""
        self.refused += 1
        if self.refused & (self.refused - 1) == 0:
            log.warning("webhook: closing %s; %d connections closed by a limit so far", what, self.refused)

    def to_busy(self, conn: Any) -> None:
        """Its request head is complete."""
        if self.waiting.pop(conn, 0) is None:
            self.busy.add(conn)

    def to_waiting(self, conn: Any) -> None:
        """Its response is sent and the connection is kept alive for another request."""
        if conn in self.busy:
            self.busy.discard(conn)
            self.waiting[conn] = None

    def timed_out_one(self, conn: Any) -> None:
        self.timed_out += 1
        self.forget(conn)

    def forget(self, conn: Any) -> None:
        """It is closed (or about to be): it no longer counts."""
        if self.waiting.pop(conn, 0) is None or conn in self.busy:
            self.busy.discard(conn)
            self.peers[conn.peer] -= 1
            if self.peers[conn.peer] <= 0:
                del self.peers[conn.peer]


def protocol(gate: ConnectionGate) -> type[H11Protocol]:
    """uvicorn's h11 protocol under `gate`'s rules (see the module docstring)."""
    seconds = gate.cfg.header_timeout

    class Protocol(H11Protocol):
        peer = "-"
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.peer = self.client[0] if self.client else "-"
            if not gate.admit(self, self.peer):
                self.peer = "-"                # never counted
                transport.abort()
                return
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(seconds, self._head_too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and not self.cycle.response_complete:
                self._disarm()                 # the head is in: the body has its own timeout
                gate.to_busy(self)

        def on_response_complete(self) -> None:
            if not self.transport.is_closing():
                gate.to_waiting(self)
                self._arm()
            super().on_response_complete()     # may start a pipelined request (then busy again)

        def _head_too_slow(self) -> None:
            self._deadline = None
            if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
                gate.timed_out_one(self)
                log.debug("closing a connection from %s that sent no complete request in %.0fs", self.peer, seconds)
                self.transport.close()

        def close_waiting(self) -> None:
            self._disarm()
            self.transport.abort()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            gate.forget(self)
            super().connection_lost(exc)

    return Protocol
