"""Where `flagsweep publish` writes a dry run's files: the nightly's rule (bot.github.publish.dry_run_dir), so that a
run of another mode than eval never writes over eval's files."""
from __future__ import annotations

import json
from pathlib import Path

from bot.cli.main import main
from harness.core.modes import BUILTIN
from harness.core.options import RunOptions, SweepOptions
from state import db
from tests.historydata import night, store_run


def _plan(folder: Path) -> dict:
    return json.loads((folder / "plan.json").read_text())


def test_publish_writes_a_train_runs_files_in_the_folder_named_after_its_mode(tmp_path: Path, capsys) -> None:
    state, out = tmp_path / "state.sqlite", tmp_path / "out"
    conn = db.connect(state)
    evals = store_run(conn, night(), nightly="2026-11-01")
    train = store_run(conn, night(), nightly="2026-11-01", options=RunOptions(SweepOptions(mode=BUILTIN["train"])))
    conn.close()
    for run in (evals, train):
        assert main(["--state", str(state), "publish", str(run), "--dry-run", "--no-verify", "--out", str(out),
                     "--json"]) == 0
        capsys.readouterr()
    assert _plan(out)["run_id"] == evals            # eval's files are where they were, not written over
    assert _plan(out / "train")["run_id"] == train
