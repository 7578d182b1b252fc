"""The one real crash that tests/test_isolate_real.py and tests/test_maintainer_real.py both assert on, run once.

MimiModel under capture_scalar_outputs (PendingUnbackedSymbolNotFound on torch 2.13), swept for real under
`aot_eager` into a real SQLite file through an interpreter that logs each start, then the pipeline's verify step
(shrink off: the shrink has its own tests) and a dry-run publish. Both files used to sweep and verify it each on its
own (~6 real runs of the model each); the verdict, its component and its maintainer's script are the same objects.
"""
from __future__ import annotations

import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from bot.github import publish
from bot.pipeline import steps
from bot.settings import AccuracySettings, Settings, VerifySettings
from harness.engine import engine
from harness.engine.engine import SweepRequest
from state import db, history

MODEL = "MimiModel"
CSO = {"torch._dynamo.config.capture_scalar_outputs": True}


@dataclass(frozen=True)
class Published:
    settings: Settings
    run_id: int
    log: Path               # one line per start of the run's interpreter
    out: Path               # the first dry-run publish
    first_starts: int       # reproducer (repro.py) starts during the first verify step and publish
    found: dict             # what that verify step returned: {group: run verdict}


def publish_once(conn, settings: Settings, run_id: int, out: Path) -> dict:
    """The pipeline's verify step, then a dry-run publish into `out`; the verify step's answer."""
    found = steps.verify(conn, run_id, settings)
    publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(out),
                        publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(out)))
    return found


def sweep_verify_publish(tmp: Path) -> Published:
    """One real sweep of the crash, finalized, verified and published once (dry run) under `tmp`."""
    log = tmp / "python-starts.log"
    wrapper = tmp / "run-python"           # the run's interpreter: logs every start, then runs the real one
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    # shrink_budget=0: count the isolation runs alone; accuracy off: a crash (the sweep's options have it off too)
    settings = Settings(state_path=tmp / "state.sqlite", verify=VerifySettings(enabled=True, shrink_budget=0),
                        accuracy=AccuracySettings(enabled=False))
    conn = db.connect(settings.state_path)
    try:
        options = engine.SweepOptions(workers=1, timeout=300, backend="aot_eager", python=str(wrapper))
        run_id = engine.sweep(conn, SweepRequest(models=[MODEL], configs={"cso": CSO}, base_settings={},
                                                 options=options, progress=False)).run.id
        history.finalize_run(conn, run_id)
        before = log.read_text().count("repro.py")
        found = publish_once(conn, settings, run_id, tmp / "out1")
        first = log.read_text().count("repro.py") - before
    finally:
        conn.close()
    return Published(settings, run_id, log, tmp / "out1", first, found)
