"""`flagsweep sweep` end to end: bad input, --json, Ctrl-C/SIGTERM, SIGKILL and --resume."""
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli.main import main
from state import db, runs
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.compile


def cli(state, *args):
    return [sys.executable, "-m", "bot.cli.main", "--state", str(state), "sweep", "--import", "tests.fault_models", *args]


def stored_rows(state):
    if not state.exists():
        return {}
    conn = sqlite3.connect(str(state), timeout=30)
    try:
        return {(m, c): d for m, c, d in conn.execute("SELECT model, config, data FROM outcomes")}
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()


def test_unknown_model_is_exit_2_with_close_matches_and_nothing_runs(tmp_path, capsys):
    state = tmp_path / "s.sqlite"
    rc = main(["--state", str(state), "sweep", "--models", "LlamaForCausalLm", "--configs", "capture_scalar_outputs"])
    err = capsys.readouterr().err
    assert rc == 2 and "LlamaForCausalLM" in err
    assert runs.list_runs(db.connect(state)) == []


def test_unknown_config_and_bad_setting_are_exit_2(tmp_path, capsys):
    state = tmp_path / "s.sqlite"
    assert main(["--state", str(state), "sweep", "--configs", "capture_scalar_output"]) == 2
    assert "did you mean capture_scalar_outputs" in capsys.readouterr().err
    assert main(["--state", str(state), "sweep", "--configs", "capture_scalar_outputs",
                 "--base-setting", "torch._dynamo.config.capture_scalar_outputs=yes please"]) == 2
    assert "expected bool" in capsys.readouterr().err
    assert main(["--state", str(state), "sweep", "--resume"]) == 2
    assert "nothing to resume" in capsys.readouterr().err


def test_sigkill_then_resume_redoes_nothing_and_prints_json(tmp_path):
    state = tmp_path / "s.sqlite"
    # One worker, in order: TinyItemModel x2, then Fault_hang's baseline, then its hang.
    first = subprocess.Popen(cli(state, "--models", "TinyItemModel,Fault_hang", "--configs", "capture_scalar_outputs",
                                 "--workers", "1", "--timeout", "300"),
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: len(stored_rows(state)) >= 3), first.stderr.read1(4000) if first.poll() else "slow"
        before = stored_rows(state)
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
    conn = db.connect(state)
    (run,) = runs.list_runs(conn)
    assert run.status == "running"  # nobody could mark it: resume takes it as is
    out = subprocess.run(cli(state, "--resume", "--timeout", "5", "--json"), cwd=ROOT, capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)  # exactly one JSON document, nothing else on stdout
    # issue 45: the progress bar shows under --json too, on stderr (a long scripted sweep is seen to move)
    assert re.search(r"4/4 \[", out.stderr), out.stderr[-2000:]
    after = stored_rows(state)
    for key, data in before.items():
        assert after[key] == data, f"{key} was redone"
    assert len(after) == 4
    assert doc["run"]["id"] == run.id and doc["run"]["status"] == "finished"
    assert doc["environment"]["torch_version"]
    statuses = {(o["model"], o["config"]): o["status"] for o in doc["outcomes"]}
    assert statuses["Fault_hang", "capture_scalar_outputs"] == "timeout"
    effects = {(e["model"], e["config"]): e for e in doc["effects"]}
    assert set(effects["TinyItemModel", "capture_scalar_outputs"]) == {
        "model", "stratum", "config", "effect", "baseline_graphs", "config_graphs", "baseline_signature", "config_signature",
        "reason", "correctness", "recompile"}
    assert effects["TinyItemModel", "capture_scalar_outputs"]["effect"] == "reduces_graphs"
    assert effects["Fault_hang", "capture_scalar_outputs"]["effect"] == "crashes"
    assert effects["Fault_hang", "capture_scalar_outputs"]["config_signature"] == "timeout"


def test_sigterm_marks_the_run_interrupted_and_stops_the_workers(tmp_path):
    state = tmp_path / "s.sqlite"
    proc = subprocess.Popen(cli(state, "--models", "Fault_hang", "--configs", "capture_scalar_outputs",
                                "--workers", "1", "--timeout", "300"),
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: len(stored_rows(state)) >= 1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "--resume" in err
    (run,) = runs.list_runs(db.connect(state))
    assert run.status == "interrupted"
    assert set(stored_rows(state)) == {("Fault_hang", "baseline")}
    # No worker outlives the sweep (they run in their own sessions, so check by parent pid).
    orphans = [p for p in os.listdir("/proc") if p.isdigit() and _ppid(p) == proc.pid]
    assert orphans == []


def _ppid(pid):
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
