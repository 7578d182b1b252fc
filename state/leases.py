"""Run leases: one exclusive claim per run being executed.

A process executing a run holds its lease: holder token, pid, host, and a
heartbeat that a background thread (its own connection) renews. Another
process may take the run over only when the holder is gone: its pid no longer
exists on this host (or belongs to a newer process), or its heartbeat stopped
and the lease expired. Taking a lease is one IMMEDIATE transaction, so two
processes racing for one run cannot both win.
"""
from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

from state.runs import now

TTL_S = 120.0                 # a lease whose heartbeat is older than this is free
HEARTBEAT_S = 20.0            # how often the holder renews it


class LeaseHeld(RuntimeError):
    """Another live process holds this run's lease."""

    def __init__(self, run_id: int, pid: int, host: str, age_s: float) -> None:
        super().__init__(f"run {run_id} is being executed by pid {pid} on {host} "
                         f"(heartbeat {age_s:.0f} s ago); stop that process first, or wait for it to finish")
        self.run_id, self.pid, self.host = run_id, pid, host


@dataclass
class Lease:
    """A held lease; `release()` (or the holder's death) frees it."""

    run_id: int
    holder: str
    pid: int
    host: str
    path: str
    ttl: float = TTL_S
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def keep_alive(self, every: float = HEARTBEAT_S) -> None:
        """Renew the heartbeat from a daemon thread until released."""
        self._thread = threading.Thread(target=self._beat, args=(every,), name=f"lease-{self.run_id}", daemon=True)
        self._thread.start()

    def _beat(self, every: float) -> None:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            while not self._stop.wait(every):
                try:
                    renew(conn, self)
                except sqlite3.Error:
                    pass   # a busy store: the next beat tries again, well before the lease expires
        finally:
            conn.close()

    def release(self, conn: sqlite3.Connection) -> None:
        """Stop the heartbeat and free the run."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        conn.execute("DELETE FROM run_leases WHERE run_id = ? AND holder = ?", (self.run_id, self.holder))


def _started(pid: int) -> str | None:
    """A process's start time in clock ticks since boot (Linux), to tell a reused pid from its holder."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _pid_alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass                      # someone else's process: it exists
    return started is None or _started(pid) in (None, started)


def _alive(row: sqlite3.Row | tuple, host: str, at: float) -> bool:
    """Whether a stored lease still binds: not expired, and on this host its process still runs."""
    _, _, pid, lease_host, pid_started, _, _, expires = row
    if expires < at:
        return False
    return lease_host != host or _pid_alive(pid, pid_started)


def acquire(conn: sqlite3.Connection, run_id: int, *, ttl: float = TTL_S) -> Lease:
    """Claim `run_id` for this process; LeaseHeld if a live process holds it (a dead holder's lease is taken over)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        lease = _claim(conn, run_id, ttl)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return lease


def create_held(conn: sqlite3.Connection, create: Callable[[], int], *, ttl: float = TTL_S) -> Lease:
    """Create a run with `create()` and claim it in the same transaction: no other process sees it unclaimed."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        lease = _claim(conn, create(), ttl)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return lease


def _claim(conn: sqlite3.Connection, run_id: int, ttl: float) -> Lease:
    host, pid, at = socket.gethostname(), os.getpid(), time.time()
    row = conn.execute("SELECT run_id, holder, pid, host, pid_started, acquired_at, heartbeat, expires"
                       " FROM run_leases WHERE run_id = ?", (run_id,)).fetchone()
    if row is not None and _alive(tuple(row), host, at):
        raise LeaseHeld(run_id, row[2], row[3], at - row[6])
    lease = Lease(run_id=run_id, holder=uuid.uuid4().hex, pid=pid, host=host, path=_path(conn), ttl=ttl)
    conn.execute("INSERT OR REPLACE INTO run_leases (run_id, holder, pid, host, pid_started, acquired_at,"
                 " heartbeat, expires) VALUES (?,?,?,?,?,?,?,?)",
                 (run_id, lease.holder, pid, host, _started(pid), now(), at, at + ttl))
    return lease


def renew(conn: sqlite3.Connection, lease: Lease) -> None:
    """Push the lease's expiry forward (the heartbeat)."""
    at = time.time()
    conn.execute("UPDATE run_leases SET heartbeat = ?, expires = ? WHERE run_id = ? AND holder = ?",
                  (at, at + lease.ttl, lease.run_id, lease.holder))


def holder(conn: sqlite3.Connection, run_id: int) -> dict | None:
    """The stored lease of a run (pid, host, heartbeat, expires), live or not; None when free."""
    row = conn.execute("SELECT pid, host, heartbeat, expires FROM run_leases WHERE run_id = ?", (run_id,)).fetchone()
    return dict(zip(("pid", "host", "heartbeat", "expires"), row)) if row else None


def _path(conn: sqlite3.Connection) -> str:
    return conn.execute("PRAGMA database_list").fetchone()[2]
