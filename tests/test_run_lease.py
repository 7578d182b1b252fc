"""One exclusive claim per run (issue 12, item 2), and SIGTERM to `nightly` (item 3), with real processes."""
from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from state import db, leases, runs
from tests import historydata as hd
from harness.core.run_environment import RunEnvironment

ROOT = Path(__file__).resolve().parent.parent


# --- the store's side: fast, two connections, real pids ------------------------------------------------

@pytest.fixture
def run_in_store(tmp_path):
    conn = db.connect(tmp_path / "s.sqlite")
    run_id = runs.create_run(conn, environment=RunEnvironment.from_dict(hd.ENV), models=["M"], configs={"baseline": {}})
    yield conn, run_id, tmp_path / "s.sqlite"
    conn.close()


def _set_holder(path: Path, run_id: int, *, pid: int, host: str, expires_in: float) -> None:
    conn = sqlite3.connect(str(path))
    conn.execute("UPDATE run_leases SET pid = ?, host = ?, pid_started = NULL, expires = ? WHERE run_id = ?",
                 (pid, host, time.time() + expires_in, run_id))
    conn.commit()
    conn.close()


def test_a_live_lease_is_refused_naming_pid_and_host(run_in_store):
    conn, run_id, path = run_in_store
    mine = leases.acquire(conn, run_id)
    other = db.connect(path)
    with pytest.raises(leases.LeaseHeld) as err:
        leases.acquire(other, run_id)
    assert f"pid {os.getpid()} on {socket.gethostname()}" in str(err.value)
    mine.release(conn)
    leases.acquire(other, run_id).release(other)       # free again once released


def test_a_dead_holder_or_an_expired_heartbeat_is_taken_over(run_in_store):
    conn, run_id, path = run_in_store
    leases.acquire(conn, run_id)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _set_holder(path, run_id, pid=gone.pid, host=socket.gethostname(), expires_in=3600)
    taken = leases.acquire(db.connect(path), run_id)                         # pid gone on this host
    _set_holder(path, run_id, pid=1, host="elsewhere", expires_in=-1)
    taken = leases.acquire(db.connect(path), run_id)                         # heartbeat expired
    assert leases.holder(conn, run_id)["pid"] == os.getpid() and taken.holder
    _set_holder(path, run_id, pid=1, host="elsewhere", expires_in=3600)
    with pytest.raises(leases.LeaseHeld, match="pid 1 on elsewhere"):     # another host, still beating
        leases.acquire(db.connect(path), run_id)


def test_the_heartbeat_keeps_a_lease_alive(run_in_store):
    conn, run_id, path = run_in_store
    lease = leases.acquire(conn, run_id, ttl=0.5)
    lease.keep_alive(every=0.05)
    first = leases.holder(conn, run_id)["expires"]
    deadline = time.monotonic() + 10
    while leases.holder(conn, run_id)["expires"] == first and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leases.holder(conn, run_id)["expires"] > first
    lease.release(conn)
    assert leases.holder(conn, run_id) is None


# --- two real sweeps on one store ----------------------------------------------------------------------

def _quiet_settings(state: Path) -> Path:
    """A settings file beside `state` with the accuracy calls off: the lease and the signal are the point, not the
    later calls (each item otherwise makes three more, with eager references, before its row is stored)."""
    path = state.with_suffix(".toml")
    path.write_text("[accuracy]\nenabled = false\n")
    return path


def _sweep(state: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "bot.cli.main", "--settings", str(_quiet_settings(state)), "--state", str(state),
            "sweep", "--import", "tests.fault_models", *args]


def _rows(state: Path) -> int:
    try:
        conn = sqlite3.connect(str(state), timeout=30)
        try:
            return conn.execute("SELECT count(*) FROM outcomes").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


def _wait(predicate, timeout: float = 180.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _kill_groups(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)        # workers run in their own sessions
        except (ProcessLookupError, PermissionError):
            pass


@pytest.mark.compile
def test_resume_of_a_live_run_is_refused_then_taken_over_when_its_holder_dies(tmp_path):
    state = tmp_path / "s.sqlite"
    # One worker; Fault_hang's baseline is stored, then it hangs under the flag (timeout 300 s).
    first = subprocess.Popen(_sweep(state, "--models", "Fault_hang", "--configs", "capture_scalar_outputs",
                                    "--workers", "1", "--timeout", "300"),
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    workers: list[int] = []
    try:
        assert _wait(lambda: _rows(state) >= 1), "the first sweep stored nothing"
        workers = _children(first.pid)
        second = subprocess.run(_sweep(state, "--resume"), cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        line = second.stderr.strip().splitlines()[-1]
        assert f"pid {first.pid} on {socket.gethostname()}" in line and "Traceback" not in second.stderr
        assert _rows(state) == 1 and first.poll() is None        # the live run was left alone
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        _kill_groups(workers)
        third = subprocess.run(_sweep(state, "--resume", "--timeout", "5", "--json"), cwd=ROOT,
                               capture_output=True, text=True, timeout=300)
        assert third.returncode == 0, third.stderr[-2000:]
        doc = json.loads(third.stdout)
        assert doc["run"]["status"] == "finished" and len(doc["outcomes"]) == 2
        assert leases.holder(db.connect(state), doc["run"]["id"]) is None    # released at the end
    finally:
        if first.poll() is None:
            first.kill()
        _kill_groups(workers)


# --- SIGTERM to `nightly` ---------------------------------------------------------------------------------

# `nightly` has no --import: this driver registers the test models in the parent and the workers, then runs
# the real command line. Everything else (signal, engine, store) is the real thing.
NIGHTLY_DRIVER = """
import sys
import tests.fault_models
from bot.settings import SweepSettings
_options = SweepSettings.options
def _with_test_models(self, python=None, extra_modules=None):
    return _options(self, python, ["tests.fault_models"])
SweepSettings.options = _with_test_models
from bot.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.compile
def test_sigterm_to_nightly_marks_the_run_interrupted_stops_workers_and_frees_the_lease(tmp_path):
    state, settings = tmp_path / "s.sqlite", tmp_path / "s.toml"
    # accuracy off: the signal is the point, not the later calls (the baseline's row is stored sooner)
    settings.write_text("[sweep]\nworkers = 1\ntimeout = 300\n[verify]\nenabled = false\n[accuracy]\nenabled = false\n")
    proc = subprocess.Popen([sys.executable, "-c", NIGHTLY_DRIVER, "--settings", str(settings), "--state", str(state),
                             "nightly", "--torch", "current", "--dry-run", "--out", str(tmp_path / "out"),
                             "--models", "Fault_hang", "--configs", "capture_scalar_outputs"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers: list[int] = []
    try:
        assert _wait(lambda: _rows(state) >= 1), "the nightly stored nothing"
        workers = _children(proc.pid)
        assert workers
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err and "Traceback" not in err
    conn = db.connect(state)
    (run,) = runs.list_runs(conn)
    assert run.kind == "nightly" and run.status == "interrupted"
    assert leases.holder(conn, run.id) is None
    alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()
             and "harness.engine.worker" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")]
    _kill_groups(alive)
    assert alive == []


def test_a_new_run_is_created_already_claimed(tmp_path):
    conn = db.connect(tmp_path / "s.sqlite")
    lease = leases.create_held(conn, lambda: runs.create_run(conn, environment=RunEnvironment.from_dict(hd.ENV), models=["M"],
                                                             configs={"baseline": {}}))
    assert runs.get_run(conn, lease.run_id).status == "running"
    assert leases.holder(conn, lease.run_id)["pid"] == os.getpid()
    with pytest.raises(leases.LeaseHeld):
        leases.acquire(db.connect(tmp_path / "s.sqlite"), lease.run_id)
    with pytest.raises(ZeroDivisionError):            # a failed create leaves neither run nor lease
        leases.create_held(conn, lambda: (runs.create_run(conn, environment=RunEnvironment.from_dict(hd.ENV), models=["N"],
                                                          configs={"baseline": {}}), 1 / 0)[0])
    assert [r.id for r in runs.list_runs(conn)] == [lease.run_id]
