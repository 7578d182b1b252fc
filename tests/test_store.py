"""The store file itself: WAL and concurrent readers, bad files, where it lives by default."""
from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
import threading

import pytest

from bot import settings as settings_mod
from harness.core.options import RunOptions, SweepOptions
from harness.core.outcome import Outcome
from state import runs
from state.db import StoreError, connect
from tests import historydata as hd
from harness.core.run_environment import RunEnvironment


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], capture_output=True, text=True, env=full_env)


def test_reader_sees_a_consistent_snapshot_while_a_sweep_writes(tmp_path):
    path = tmp_path / "state.sqlite"
    writer = connect(path)
    rid = runs.create_run(writer, environment=RunEnvironment.from_dict(hd.ENV), models=["M0"], configs=hd.CONFIGS)
    runs.record_outcome(writer, rid, hd.ok("M0", "baseline", 1))
    reader = connect(path)
    reader.execute("BEGIN")  # a long read (say, a report being rendered)
    assert reader.execute("SELECT count(*) FROM outcomes").fetchone()[0] == 1
    # WAL: the writer is not blocked by the open read; a short busy timeout proves it does not wait.
    writer.execute("PRAGMA busy_timeout=100")
    for i in range(1, 6):
        runs.record_outcome(writer, rid, hd.ok(f"M{i}", "baseline", 1))
    assert reader.execute("SELECT count(*) FROM outcomes").fetchone()[0] == 1  # still its snapshot
    reader.execute("COMMIT")
    assert reader.execute("SELECT count(*) FROM outcomes").fetchone()[0] == 6


def test_concurrent_reader_threads_never_fail_or_go_back(tmp_path):
    path = tmp_path / "state.sqlite"
    writer = connect(path)
    rid = runs.create_run(writer, environment=RunEnvironment.from_dict(hd.ENV), models=[], configs=hd.CONFIGS)
    n_items, errors, seen = 300, [], {0: [], 1: []}
    done = threading.Event()

    def read(slot: int) -> None:
        conn = connect(path)
        try:
            while not done.is_set():
                seen[slot].append(len(runs.outcomes(conn, rid)))
        except Exception as exc:  # noqa: BLE001 - any failure is what the test looks for
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for i in range(n_items):
        runs.record_outcome(writer, rid, Outcome(model=f"M{i:04d}", config="baseline", status="ok", graphs=1))
    done.set()
    for t in threads:
        t.join()
    assert not errors
    for counts in seen.values():
        assert counts and counts == sorted(counts)  # never goes back
    assert len(runs.outcomes(connect(path), rid)) == n_items


def test_reader_in_another_process_while_writing(tmp_path):
    path = tmp_path / "state.sqlite"
    writer = connect(path)
    rid = runs.create_run(writer, environment=RunEnvironment.from_dict(hd.ENV), models=[], configs=hd.CONFIGS)
    code = ("import sys, time; from state.db import connect; from state import runs\n"
            "c = connect(sys.argv[1]); n = []\n"
            "deadline = time.monotonic() + 60\n"
            "while time.monotonic() < deadline:\n"
            "    n.append(len(runs.outcomes(c, 1)))\n"
            "    if n[-1] >= 200: break\n"
            "assert n == sorted(n), n\nprint(n[-1], len(n))\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    for i in range(200):
        runs.record_outcome(writer, rid, Outcome(model=f"M{i:04d}", config="baseline", status="ok", graphs=1))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.split()[0] == "200"


def test_not_sqlite_is_a_clear_error_and_the_file_is_untouched(tmp_path):
    path = tmp_path / "state.sqlite"
    garbage = b"this is not a database\n" * 200
    path.write_bytes(garbage)
    with pytest.raises(StoreError, match="not a flagsweep state file"):
        connect(path)
    assert path.read_bytes() == garbage


def test_corrupted_header_is_a_clear_error(tmp_path):
    path = tmp_path / "state.sqlite"
    conn = connect(path)
    hd.store_run(conn, hd.night())
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    data[16:24] = b"\xff" * 8   # page size and format bytes of the header
    data[100:200] = b"\x00" * 100
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError):
        connect(path)


def test_foreign_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "someone_elses.sqlite"
    other = sqlite3.connect(path)
    other.execute("CREATE TABLE notes (x TEXT)")
    other.commit()
    other.close()
    with pytest.raises(StoreError, match="did not create"):
        connect(path)
    assert [r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")] == ["notes"]


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "state.sqlite"
    connect(path).execute("PRAGMA user_version=999")
    with pytest.raises(StoreError, match="newer"):
        connect(path)


def test_default_location_works_out_of_the_box(tmp_path):
    settings = settings_mod.load(env={"HOME": str(tmp_path)})
    assert settings.state_path == tmp_path / ".local" / "share" / "flagsweep" / "state.sqlite"
    conn = connect(settings.state_path)  # parent directories do not exist yet
    hd.store_run(conn, hd.night())
    assert settings.state_path.exists()


def test_cli_honours_env_var_and_state_flag_and_reports_bad_files(tmp_path):
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    hd.store_run(connect(a), hd.night())
    hd.store_run(connect(b), hd.night())
    hd.store_run(connect(b), hd.night())
    env = {"HOME": str(tmp_path / "home"), "FLAGSWEEP_STATE": str(a), "XDG_DATA_HOME": ""}
    listed = _cli("runs", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)] == [1]
    listed = _cli("--state", str(b), "runs", "list", "--json", env=env)
    assert [r["id"] for r in json.loads(listed.stdout)] == [2, 1]
    bad = tmp_path / "bad.sqlite"
    bad.write_text("hello")
    out = _cli("--state", str(bad), "runs", "list", env=env)
    assert out.returncode == 2 and "not a flagsweep state file" in out.stderr and "Traceback" not in out.stderr
    default = _cli("runs", "list", env={"HOME": str(tmp_path / "home"), "FLAGSWEEP_STATE": "", "XDG_DATA_HOME": ""})
    # A read command never creates a store, the default one included (issue 31).
    assert default.returncode == 2 and "no state file there" in default.stderr
    assert not (tmp_path / "home" / ".local").exists()


def test_a_job_retried_after_an_outage_waits_for_its_time_and_keeps_its_deadline(tmp_path):
    import time

    from state import jobs
    conn = connect(tmp_path / "s.sqlite")
    job_id = jobs.enqueue(conn, "quick", {"issue": 1})
    assert jobs.claim_next(conn).id == job_id
    now = time.time()
    jobs.retry_later(conn, job_id, error="GitHubUnavailable: down", delay=60, until=now + 3600,
                     result={"commands": [{"line": "a", "outcome": "answered"}]})
    job = jobs.get(conn, job_id)
    assert job.status == "queued" and job.attempts == 1 and job.result["commands"][0]["outcome"] == "answered"
    assert jobs.claim_next(conn) is None                       # not before its time
    assert [j.id for j in jobs.retrying(conn)] == [job_id]
    assert jobs.claim_next(conn, clock=now + 61).id == job_id  # due
    jobs.retry_later(conn, job_id, error="GitHubUnavailable: still down", delay=1, until=now + 99999)
    assert jobs.get(conn, job_id).retry_until == pytest.approx(now + 3600)   # the first outage's deadline holds
    assert jobs.get(conn, job_id).attempts == 2
    assert jobs.claim_next(conn, clock=now + 100).id == job_id
    jobs.finish(conn, job_id, error="GitHubUnavailable: gave up")
    assert [j.id for j in jobs.failed_since(conn, "2000-01-01")] == [job_id]


def test_a_job_of_a_kind_this_flagsweep_does_not_know_is_left_out_and_never_claimed(tmp_path, caplog):
    """The last stop's finding: a jobs row of a foreign kind (a newer flagsweep's) made /healthz's reads raise."""
    from state import jobs
    conn = connect(tmp_path / "s.sqlite")
    conn.execute("INSERT INTO jobs (kind, payload, status, created_at) VALUES ('culprit', '{}', 'queued', '2000-01-01')")
    ours = jobs.enqueue(conn, "quick", {"issue": 1})
    assert [j.id for j in jobs.list_jobs(conn)] == [ours]
    assert jobs.waiting_since(conn, "2999-01-01") == [jobs.get(conn, ours)]
    assert "job 1 cannot be read: job 1: kind 'culprit'" in caplog.text and "left out" in caplog.text
    assert jobs.claim_next(conn).id == ours and jobs.claim_next(conn) is None   # the foreign one stays queued
    assert conn.execute("SELECT status FROM jobs WHERE id = 1").fetchone()[0] == "queued"


def test_a_stored_environment_reads_back_to_the_same_bytes_and_an_unknown_field_is_named(tmp_path):
    conn = connect(tmp_path / "s.sqlite")
    old = {"torch_version": "2.13.0", "torch_git": None, "transformers_version": None, "python_version": None,
           "device": None, "cuda_version": None, "flagsweep_version": None, "recipe_fingerprint": None,
           "python": "/p/bin/python", "torch_index": None, "torch_channel": None}   # a nightly on current torch
    for i, data in enumerate((old, {**old, "hostname": "h1"}), 1):
        conn.execute("INSERT INTO environments (id, key, torch_version, data) VALUES (?, ?, '2.13.0', ?)",
                     (i, f"k{i}", json.dumps(data, sort_keys=True)))
        conn.execute("INSERT INTO runs (id, kind, environment_id, started_at, models, configs, base_settings, options)"
                     " VALUES (?, 'nightly', ?, 't', '[]', '{}', '{}', '{}')", (i, i))
    assert runs.get_run(conn, 1).environment.to_dict() == old
    with pytest.raises(runs.UnreadableRun, match="run 2 cannot be read: run environment: unknown field 'hostname'"):
        runs.get_run(conn, 2)
    assert [r.id for r in runs.list_runs(conn)] == [1]       # a listing leaves it out (issue 38), named in a warning
    conn.close()


def test_a_stored_runs_options_read_as_one_record_and_an_unknown_option_is_named(tmp_path):
    conn = connect(tmp_path / "s.sqlite")
    rid = runs.create_run(conn, environment=RunEnvironment.from_dict(hd.ENV), models=[], configs={},
                          options=RunOptions(SweepOptions(backend="eager"), imported_from="abc"),
                          unavailable={"x": {"settings": {"torch._dynamo.config.x": True}, "missing": ["x"]}})
    run = runs.get_run(conn, rid)
    assert (run.options.sweep.backend, run.options.imported_from, list(run.unavailable)) == ("eager", "abc", ["x"])
    conn.execute("UPDATE runs SET options = json_set(options, '$.fast', 1) WHERE id = ?", (rid,))
    with pytest.raises(runs.UnreadableRun, match="sweep options: unknown field 'fast'"):
        runs.get_run(conn, rid)
    conn.close()


def test_a_resume_compares_only_the_fields_that_make_runs_comparable():
    a = RunEnvironment(torch_version="2.13.0", device="cpu", platform="linux-a", torch_index="https://i")
    b = dataclasses.replace(a, torch_version="2.14.0", platform="linux-b", torch_index=None)
    assert a.differences(b) == ["torch_version: 2.13.0 -> 2.14.0"]     # platform and index never refuse a resume
