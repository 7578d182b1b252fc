"""SIGTERM ends `publish` and `merge` as it ends `nightly` and `sweep`: like Ctrl-C, exit 130, no reproducer
folder left behind (issue 31). A real CLI process, its reproducer a real script_runner child that sleeps."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from state import db
from tests import historydata as hd

ROOT = Path(__file__).resolve().parent.parent

# The real CLI, with the verify step (publish) and the shard join (merge) replaced by one reproducer run that sleeps:
# script_runner makes its flagsweep-repro-* folder and child as a real verification does.
DRIVER = """
import sys
from bot.pipeline import merge, steps
from harness.engine.script_runner import run_script

def sleeping_reproducer(*args, **kwargs):
    run_script("import time\\ntime.sleep(120)\\n", sys.executable, timeout=300)

steps.verify = sleeping_reproducer
merge.merge_modes = sleeping_reproducer
from bot.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _wait(test, seconds: float = 60) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if test():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("command", [["publish", "1", "--dry-run"], ["merge", "1"]])
def test_sigterm_ends_publish_and_merge_like_ctrl_c(tmp_path, command):
    state, tmp = tmp_path / "s.sqlite", tmp_path / "tmp"
    tmp.mkdir()
    conn = db.connect(state)
    hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-01")
    conn.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGSWEEP_")}
    env["TMPDIR"] = str(tmp)
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, "--state", str(state), *command, "--out",
                             str(tmp_path / "out")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert _wait(lambda: any(tmp.glob("flagsweep-repro-*/repro.py"))), "no reproducer started"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err and "Traceback" not in err
    assert list(tmp.iterdir()) == []          # the reproducer's folder is removed
