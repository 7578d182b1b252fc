"""Verification is a stored pipeline step; publishing only reads.

The run's interpreter here is a real one of a sort: a shell script that reports the crash its reproducer's
config and model cause (the FLAGSWEEP_RESULT line a real reproducer prints), so the verify step starts real
processes through the real runner, and the process counter below is seen to count them before it is seen to
count none during a publish.
"""
from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bot.github import publish
from bot.pipeline import nightly, steps
from bot.settings import IssueSettings, NightlySettings, Settings
from bot.verify import step as verify_mod
from bot.view import run_view
from harness.core.model_build import ModelBuild
from state import db, runs, verdicts
from state.verdicts import Component, RunVerdict, Shrink, Stage, Verdict
from tests.fakegithub import FakeGitHub
from tests.fakegithub import scenario as sc
from tests.fakesweep import World
from tests.helpers_verify import ProcessStarts

ROOT = Path(__file__).resolve().parents[1]
CSO, CDO = "capture_scalar_outputs", "capture_dynamic_output_shape_ops"


def fake_interpreter(tmp_path: Path) -> Path:
    """The run's "python": answers each reproducer with the crash of its group, without torch."""
    path = tmp_path / "run-python"
    path.write_text(f"""#!/bin/sh
# $1 is -I, $2 the reproducer (bot.verify.script renders the model and the config's settings into it), $3 the mode
case "$3" in
  eager|baseline) echo 'FLAGSWEEP_RESULT {{"v": 1, "status": "ok", "signature": null}}'; exit 0 ;;
esac
case "$(cat "$2")" in
  *{CDO}*) sig='{sc.SIG_C}' ;;
  *Model02ForCausalLM*) sig='{sc.SIG_B}' ;;
  *) sig='{sc.SIG_A}' ;;
esac
ran='"v": 1, "status": "error", "parameters": 10, "seconds": 0.1, "torch_version": "2.13.0", "torch_git": "abc"'
echo "FLAGSWEEP_RESULT {{$ran, \\"signature\\": \\"$sig\\"}}"
""")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def two_nightlies(conn, python: Path) -> int:
    """A quiet nightly, then one with new crashes (three tracking groups) and the builds reproducers render from."""
    env = {**sc.ENV, "python": str(python)}
    sc.record_nightly(conn, "2026-11-20", {m: {"baseline": 3} for m in sc.corpus()}, env=env)
    run_id = sc.record_nightly(conn, "2026-11-21", sc.corpus(), env=env)
    for model in sc.corpus():
        runs.record_model(conn, run_id, ModelBuild(model, "LlamaConfig", {"num_hidden_layers": 2, "hidden_size": 8},
                                                   {}, 0))
    return run_id


@pytest.fixture
def world(tmp_path: Path, fake_github: FakeGitHub):
    settings = Settings(state_path=tmp_path / "state.sqlite", github=fake_github.settings(retry_backoff=0.0),
                        issues=IssueSettings(min_models=1))   # one-model crashes filed at once (test_filing.py)
    conn = db.connect(settings.state_path)
    run_id = two_nightlies(conn, fake_interpreter(tmp_path))
    yield settings, conn, run_id, fake_github
    conn.close()


def _bodies(out: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(out.iterdir()) if p.is_file()}


def test_publish_starts_no_process_real_or_dry_after_the_verify_step(world, tmp_path, monkeypatch):
    settings, conn, run_id, fake = world
    starts = ProcessStarts(monkeypatch)
    found = steps.verify(conn, run_id, settings)
    assert starts.seen.count("Popen") >= 3                      # the step ran the reproducers, one process each
    assert {g: v.verdict.status for g, v in found.items()} == {(CSO, sc.SIG_A): "confirmed",
                                                               (CSO, sc.SIG_B): "confirmed",
                                                               (CDO, sc.SIG_C): "confirmed"}
    starts.seen.clear()
    out = tmp_path / "out"
    dry = publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(out),
                              publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(out)))
    assert starts.seen == [] and dry.actions == 5
    body = next(text for name, text in _bodies(out).items() if "create-t" in name)
    assert "Verified: in fresh interpreters" in body and "Verified on torch `2.13.0` (git `abc`)" in body
    assert "Component: Dynamo tracing" in body
    real = publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                               publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    assert starts.seen == [] and real.written == 5 and not real.stopped
    filed = [i.body for i in fake.state.issues(fake.repo) if "Verified: in fresh interpreters" in i.body]
    assert len(filed) == 3


def test_publishing_the_same_run_twice_runs_nothing_and_writes_nothing_the_second_time(world, tmp_path, monkeypatch):
    settings, conn, run_id, fake = world
    steps.verify(conn, run_id, settings)
    publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                        publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(tmp_path / "first"),
                        publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(tmp_path / "first")))
    stored = verdicts.for_run(conn, run_id)
    starts, changes, requests = ProcessStarts(monkeypatch), conn.total_changes, len(fake.requests)
    again = steps.verify(conn, run_id, settings)
    second = publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                                 publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(tmp_path / "second"),
                        publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(tmp_path / "second")))
    assert starts.seen == []                                          # nothing ran: every verdict was reused
    assert conn.total_changes == changes                              # nothing written to the store
    assert [r for r in fake.requests[requests:] if r.is_write] == []  # nor to GitHub
    assert second.actions == 0 and again == stored
    assert _bodies(tmp_path / "second") == _bodies(tmp_path / "first")


def test_the_view_carries_the_runs_typed_verdicts(world):
    settings, conn, run_id, _ = world
    assert run_view.load(conn, run_id).verdicts == {}                 # the step has not run for this run
    steps.verify(conn, run_id, settings)
    view = run_view.load(conn, run_id)
    a = view.verdicts[(CSO, sc.SIG_A)]
    assert isinstance(a, RunVerdict) and isinstance(a.verdict, Verdict) and a.verdict.model == "Model00ForCausalLM"
    assert a.verdict.shrunk and a.verdict.shrink.build.config["num_hidden_layers"] == 1   # shrunk while it failed
    assert a.component == Component("dynamo", "count", True)          # by construction under the counting backend
    # Verification off: the groups are there, with no verdict, and the issue says it was not run.
    steps.verify(conn, run_id, settings, enabled=False)
    view = run_view.load(conn, run_id)
    assert {g: (v.verdict, v.component.component) for g, v in view.verdicts.items()} == {
        (CSO, sc.SIG_A): (None, "dynamo"), (CSO, sc.SIG_B): (None, "dynamo"), (CDO, sc.SIG_C): (None, "dynamo")}


def test_verdicts_round_trip_typed(tmp_path):
    conn = db.connect(tmp_path / "state.sqlite")
    run_id = sc.record_nightly(conn, "2026-11-21", sc.corpus())
    stats = {"tries": 3, "kept": 2, "rows": [["num_hidden_layers", 2, 1]], "before": {"parameters": 99},
             "after": {"parameters": 9}, "dropped": ["attention_mask"], "seconds": 1.5, "stopped": "done"}
    comp = Component("inductor", "inductor", False, (Stage("eager", "passes", 1.2, None, None),
                                                     Stage("inductor", "fails", 3.4, sc.SIG_A, None)),
                     CSO, sc.SIG_A, "Model00ForCausalLM", "2.13.0", "abc")
    full = Verdict(CSO, sc.SIG_A, "Model00ForCausalLM", "fp", "2.13.0", "abc", "confirmed", script="print(1)\n",
                   torch_version="2.13.0", torch_git="abc", shrunk=True,
                   shrink=Shrink(ModelBuild("Model00ForCausalLM", "LlamaConfig", {"num_hidden_layers": 1}, {}, 0), stats),
                   component=comp)
    bare = Verdict(CSO, sc.SIG_B, "Model02ForCausalLM", None, "2.13.0", None, "unconfirmed",
                   reason="could not be run: the run recorded no interpreter")
    verdicts.put(conn, full)
    verdicts.put(conn, bare, reusable=False)
    assert verdicts.get(conn, full.key) == full                       # every field back, typed
    assert verdicts.get(conn, bare.key) is None                       # reached without a run: never reused
    assert verdicts.components(conn) == {(CSO, sc.SIG_A): comp}
    rows = [RunVerdict(CSO, sc.SIG_A, full, comp), RunVerdict(CSO, sc.SIG_B, bare, None),
            RunVerdict(CDO, sc.SIG_C, None, Component("dynamo", "count", True))]
    assert verdicts.record_run(conn, run_id, rows) is True
    assert verdicts.record_run(conn, run_id, rows) is False           # the same again writes nothing
    assert verdicts.for_run(conn, run_id) == {(r.config, r.signature): r for r in rows}
    assert verdicts.record_run(conn, run_id, rows[:1]) is True        # a group no longer there is dropped
    assert list(verdicts.for_run(conn, run_id)) == [(CSO, sc.SIG_A)]
    with pytest.raises(ValueError, match="'skipped'"):
        Verdict(CSO, sc.SIG_A, "M", None, None, None, "skipped")


def test_the_nightly_verifies_before_it_loads_the_view_and_publishes(tmp_path):
    settings = Settings(state_path=tmp_path / "state.sqlite", nightly=NightlySettings(configs=[CSO]))
    conn = db.connect(settings.state_path)
    world = World()
    world.crashing = {"GammaModel"}
    order: list[tuple[str, int]] = []
    chosen = world.steps()

    def verify(conn, run_id, settings, *, enabled=None, progress=None):
        order.append(("verify", run_id))
        return steps.verify(conn, run_id, settings, enabled=enabled, progress=progress)

    def publish_twin(conn, settings, view, *, publisher, dry_run, out_dir):
        order.append(("publish", view.id))
        return world.publish(conn, settings, view, publisher=publisher, dry_run=dry_run, out_dir=out_dir)

    chosen.verify, chosen.publish = verify, publish_twin
    result = nightly.run_nightly(conn, settings, out_dir=tmp_path / "out", steps=chosen)
    assert order == [("verify", result.run_id), ("publish", result.run_id)]
    (group, seen), = world.views[0].verdicts.items()              # what the publisher was handed: the stored verdict
    assert group == (CSO, "RuntimeError: boom uN") and seen.verdict.status == "unconfirmed"
    assert "could not be generated" in seen.verdict.reason         # the fake sweep stored no build to render



@pytest.mark.parametrize("progress", [True, False])
def test_the_nightly_says_what_the_verify_step_does(tmp_path, capsys, progress):
    """The verify step's minutes are not silent: its progress lines reach stderr (and only with progress on)."""
    settings = Settings(state_path=tmp_path / "state.sqlite", nightly=NightlySettings(configs=[CSO]))
    conn = db.connect(settings.state_path)
    world = World()
    world.crashing = {"GammaModel"}
    chosen = world.steps()

    def verify(conn, run_id, settings, *, enabled=None, progress=None):
        if progress:
            progress("reproducer 1/1: GammaModel under capture_scalar_outputs")
        return steps.verify(conn, run_id, settings, enabled=enabled)

    chosen.verify = verify
    nightly.run_nightly(conn, settings, out_dir=tmp_path / "out", steps=chosen, progress=progress)
    said = "flagsweep nightly: reproducer 1/1: GammaModel under capture_scalar_outputs" in capsys.readouterr().err
    assert said is progress

def test_an_old_reproducer_cache_is_ignored_with_one_line(world, tmp_path):
    settings, conn, run_id, _ = world
    old = tmp_path / "repro-cache.json"           # beside the store, as an older flagsweep left it
    old.write_text(json.dumps({"version": 3, "entries": {"k": {"status": "confirmed", "model": "Model00ForCausalLM",
                                                                 "script": "print('from the old cache')\n"}}}))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "bot.cli.main", "--state", str(settings.state_path), "publish",
                           str(run_id), "--dry-run", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "repro-cache.json" in ln]
    assert len(lines) == 1 and "is ignored" in lines[0] and "WARNING" in lines[0], proc.stderr
    assert old.exists()                           # a user's file is never deleted
    assert "from the old cache" not in "".join(_bodies(out).values())
    assert "flagsweep publish: reproducer 1/3: Model00ForCausalLM under capture_dynamic_output_shape_ops" in proc.stderr


def test_the_note_is_silent_without_an_old_cache(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="bot.verify.step"):
        verify_mod.note_old_cache(tmp_path / "state.sqlite")
    assert caplog.records == []
