"""Relative paths at the command line, from a directory that is not the checkout: every command writes where it was
told, and the workers (which run in the checkout) find what they were given.

`zoo lock` runs in this process, chdir'd there, on the session's one real scan of transformers
(tests/conftest.py's `transformers_scan`, which tests/test_zoo_lock.py reads too): the paths are resolved by the
same `main`, and its workers still start in the checkout with the relative interpreter. The other commands run
as a person runs them, in a fresh process."""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import paths
from bot.cli.main import main
from harness.discovery import locker
from bot.settings import load

ROOT = Path(__file__).resolve().parents[1]


def _flagsweep(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("FLAGSWEEP_STATE", None)
    env.pop("FLAGSWEEP_SETTINGS", None)
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def _top_level(root: Path) -> set[str]:
    return {p.name for p in root.iterdir()} | {p.name for p in (root / "harness" / "zoo").iterdir()}


@pytest.mark.compile
def test_every_command_takes_relative_paths_from_another_directory(tmp_path, monkeypatch, capsys, transformers_scan):
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "venv").symlink_to(sys.prefix, target_is_directory=True)   # venv/bin/python: relative to here only
    (work / "conf").mkdir()
    # The later calls (accuracy) read no path: off, the sweep and the nightly take half the time.
    (work / "conf" / "flagsweep.toml").write_text('[sweep]\npython = "venv/bin/python"\n'
                                                  '[verify]\nenabled = false\n[accuracy]\nenabled = false\n')
    before = _top_level(ROOT)
    base = ("--settings", "conf/flagsweep.toml", "--state", "data/st.sqlite")
    (work / "data").mkdir()

    monkeypatch.chdir(work)
    monkeypatch.delenv("FLAGSWEEP_STATE", raising=False)
    monkeypatch.delenv("FLAGSWEEP_SETTINGS", raising=False)
    asked = []      # the scan is asked in the settings' interpreter, resolved from here
    monkeypatch.setattr(locker, "scan", lambda python=None: asked.append(python) or copy.deepcopy(transformers_scan))
    locked = main([*base, "zoo", "lock", "--models", "GPT2Model", "--lock-dir", "locks", "--json"])
    assert locked == 0, capsys.readouterr().err[-2000:]
    assert asked == [str(work / "venv" / "bin" / "python")]
    assert json.loads(capsys.readouterr().out)["locked"] == ["GPT2Model"]
    [lock_file] = (work / "locks").glob("transformers-*.json")
    entry = json.loads(lock_file.read_text())["entries"]["GPT2Model"]
    assert entry["status"] == "ok" and entry["config_class"] == "GPT2Config" and entry["config"]

    checked = _flagsweep(work, *base, "zoo", "check", "--models", "GPT2Model", "--json")
    assert checked.returncode == 0, checked.stderr[-2000:]
    assert json.loads(checked.stdout)["ok"] == 1

    swept = _flagsweep(work, *base, "sweep", "--models", "GPT2Model", "--configs", "baseline",
                       "--python", "venv/bin/python", "--json")
    assert swept.returncode == 0, swept.stderr[-2000:]
    assert [o["status"] for o in json.loads(swept.stdout)["outcomes"]] == ["ok"]

    night = _flagsweep(work, *base, "nightly", "--dry-run", "--torch", "venv/bin/python", "--models", "GPT2Model",
                       "--configs", "capture_scalar_outputs", "--export", "night.json", "--out", "out", "--json")
    assert night.returncode == 0, night.stderr[-2000:]
    assert json.loads((work / "night.json").read_text())
    assert (work / "out" / "report.html").is_file()

    report = _flagsweep(work, *base, "report", "-o", "r.md")
    assert report.returncode == 0, report.stderr[-2000:]
    assert "GPT2Model" in (work / "r.md").read_text()

    repro = _flagsweep(work, *base, "repro", "GPT2Model", "-o", "repro.py")
    assert repro.returncode == 0, repro.stderr[-2000:]
    assert "GPT2" in (work / "repro.py").read_text()

    assert (work / "data" / "st.sqlite").is_file()
    assert _top_level(ROOT) == before     # nothing staged, cached or written in the checkout


def test_paths_become_absolute_and_names_stay_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(state="st.sqlite", output="r.html", lock_dir="../locks", python="python3",
                              torch="venv/bin/python", runs=["3", "shards/a.json"], models=["GPT2Model"])
    paths.absolute_args(args)
    assert args.state == str(tmp_path / "st.sqlite") and args.output == str(tmp_path / "r.html")
    assert args.lock_dir == str(tmp_path.parent / "locks")
    assert args.python == "python3" and args.torch == str(tmp_path / "venv" / "bin" / "python")
    assert args.runs == ["3", str(tmp_path / "shards" / "a.json")] and args.models == ["GPT2Model"]
    (tmp_path / "s.toml").write_text('state_path = "st.sqlite"\n[sweep]\npython = "venv/bin/python"\n')
    settings = load("s.toml", env={})
    assert settings.state_path == tmp_path / "st.sqlite"
    assert settings.issues.dry_run_out == str(tmp_path / "flagsweep-out")
    assert settings.sweep.python == str(tmp_path / "venv" / "bin" / "python")
