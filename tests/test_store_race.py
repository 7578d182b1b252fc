"""Several processes opening one brand-new state file at once all succeed (issue 12, item 8)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from state import db
from state.schema import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parent.parent
# Each process waits for the same instant, then opens (creates and migrates) the store.
OPEN = ("import sys, time\n"
        "from state import db\n"
        "start = float(sys.argv[2])\n"
        "time.sleep(max(0.0, start - time.time()))\n"
        "db.connect(sys.argv[1]).execute('SELECT count(*) FROM runs').fetchone()\n")


def _race(path: Path, n: int = 4) -> list[tuple[int, str]]:
    start = time.time() + 0.8
    procs = [subprocess.Popen([sys.executable, "-c", OPEN, str(path), repr(start)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]
    return [(p.wait(timeout=120), p.stderr.read()) for p in procs]


def test_four_processes_create_one_new_store_twenty_times_out_of_twenty(tmp_path):
    failures = []
    for trial in range(20):
        path = tmp_path / f"new-{trial}.sqlite"
        results = _race(path)
        failures += [f"trial {trial}: {err.strip()[-600:]}" for rc, err in results if rc != 0]
        conn = db.connect(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        conn.close()
    assert failures == []
