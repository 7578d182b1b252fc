"""The one real crash that tests/test_isolate_real.py, tests/test_maintainer_real.py and tests/test_repro.py assert on,
run once.

MimiModel under capture_scalar_outputs (PendingUnbackedSymbolNotFound on torch 2.13), swept for real under
`aot_eager` into a real SQLite file through an interpreter that logs each start, then the pipeline's verify step
(shrink off: the shrink has its own tests) and a dry-run publish, in a fresh bot process as the nightly's publish
runs (torch never imported there). The files used to sweep and verify a crash each on their own (~6 real runs of a
model each); the verdict, its component and its maintainer's script are the same objects. The verify step's
maintainer's-script runs (the real driver, each in a fresh interpreter) are kept with their results, so a test asserts
on the runs the step judged instead of running the script again.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bot.github import publish
from bot.pipeline import steps
from bot.settings import AccuracySettings, Settings, VerifySettings
from bot.verify import steps as verify_steps
from bot.verify.steps import VerifySteps
from harness.engine import engine
from harness.engine.engine import SweepRequest
from harness.engine.script_runner import ScriptResult
from state import db, history, verdicts

MODEL = "MimiModel"
CSO = {"torch._dynamo.config.capture_scalar_outputs": True}
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Published:
    settings: Settings
    run_id: int
    log: Path               # one line per start of the run's interpreter
    out: Path               # the first dry-run publish
    first_runs: tuple       # the run's interpreter's starts (their arguments) during the first verify step and publish
    found: dict             # what that verify step stored: {group: run verdict}
    drives: tuple           # the first verify step's maintainer's-script runs: (script, mode, its result) each
    imported: tuple         # which of torch and transformers the bot process that verified and published imported

    @property
    def first_starts(self) -> int:
        """Reproducer (repro.py) starts during the first verify step and publish."""
        return sum("repro.py" in line for line in self.first_runs)


def settings_for(tmp: Path) -> Settings:
    # shrink_budget=0: count the isolation runs alone; accuracy off: a crash (the sweep's options have it off too)
    return Settings(state_path=tmp / "state.sqlite", verify=VerifySettings(enabled=True, shrink_budget=0),
                    accuracy=AccuracySettings(enabled=False))


def publish_once(conn, settings: Settings, run_id: int, out: Path, seams: VerifySteps = VerifySteps()) -> dict:
    """The pipeline's verify step, then a dry-run publish into `out`; the verify step's answer."""
    found = steps.verify(conn, run_id, settings, seams=seams)
    publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(out),
                        publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(out)))
    return found


def verify_and_publish(tmp: str, run_id: int) -> None:
    """The fresh bot process: the verify step (its driver runs kept) and the first publish into tmp/out1; its last
    stdout line is JSON: which of torch and transformers it imported, and those driver runs."""
    settings = settings_for(Path(tmp))
    drives: list[tuple[str, str, ScriptResult]] = []

    def drive(script: str, python: str, timeout: float, mode: str) -> ScriptResult:
        drives.append((script, mode, verify_steps.drive(script, python, timeout, mode)))
        return drives[-1][2]
    conn = db.connect(settings.state_path)
    try:
        publish_once(conn, settings, run_id, Path(tmp) / "out1", VerifySteps(drive=drive))
    finally:
        conn.close()
    print(json.dumps({"imported": sorted(m for m in ("torch", "transformers") if m in sys.modules),
                      "drives": [(script, mode, result.to_dict()) for script, mode, result in drives]}))


def _result(data: dict) -> ScriptResult:
    return ScriptResult(**{**data, "modes": {mode: _result(line) for mode, line in data["modes"].items()}})


def sweep_verify_publish(tmp: Path) -> Published:
    """One real sweep of the crash, finalized, then verified and published once (dry run) under `tmp` in a fresh bot
    process."""
    log = tmp / "python-starts.log"
    wrapper = tmp / "run-python"           # the run's interpreter: logs every start, then runs the real one
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    settings = settings_for(tmp)
    conn = db.connect(settings.state_path)
    try:
        options = engine.SweepOptions(workers=1, timeout=300, backend="aot_eager", python=str(wrapper))
        run_id = engine.sweep(conn, SweepRequest(models=[MODEL], configs={"cso": CSO}, base_settings={},
                                                 options=options, progress=False)).run.id
        history.finalize_run(conn, run_id)
    finally:
        conn.close()
    before = len(log.read_text().splitlines())
    proc = subprocess.run([sys.executable, "-c", "from tests.real_mimi_crash import verify_and_publish; "
                           f"verify_and_publish({str(tmp)!r}, {run_id})"], capture_output=True, text=True,
                          timeout=1800, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = json.loads(proc.stdout.strip().splitlines()[-1])
    conn = db.connect(settings.state_path)
    try:
        found = verdicts.for_run(conn, run_id)
    finally:
        conn.close()
    drives = tuple((script, mode, _result(result)) for script, mode, result in said["drives"])
    return Published(settings, run_id, log, tmp / "out1", tuple(log.read_text().splitlines()[before:]), found,
                     drives, tuple(said["imported"]))
