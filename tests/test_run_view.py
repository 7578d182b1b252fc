"""One run view for publishing, read once; the dry run takes the real publish steps and loads without PyGithub."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bot.pipeline import nightly
from bot.github import publish
from bot.view import run_view
from bot.settings import NightlySettings, Settings, VerifySettings
from state import db, links, outbox, runs
from tests import historydata as hd
from tests.fakesweep import World

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def two_nights(tmp_path):
    settings = Settings(state_path=tmp_path / "state.sqlite", verify=VerifySettings(enabled=False))
    conn = db.connect(settings.state_path)
    first = hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-01")
    second = hd.store_run(conn, hd.night(b_crashes=True), kind="nightly", nightly="2026-11-02")
    yield settings, conn, first, second
    conn.close()


def test_the_view_holds_the_run_its_diff_and_its_history(two_nights):
    settings, conn, first, second = two_nights
    view = run_view.load(conn, second)
    assert view.id == second and view.previous.id == first and view.group == (second,)
    assert view.diff.counts()["new_crash"] == 1
    assert {(s.config, s.signature) for s in view.signatures} >= {("capture_scalar_outputs", hd.PENDING)}
    with pytest.raises(Exception):
        view.run = None          # immutable: passed down, never changed on the way
    with pytest.raises(KeyError, match="no run 99"):
        run_view.load(conn, 99)


def test_the_publish_path_reads_the_run_once(two_nights, tmp_path, monkeypatch):
    settings, conn, first, second = two_nights
    reads: list[int] = []
    real = runs.get_run

    def counting(conn, run_id):
        reads.append(run_id)
        return real(conn, run_id)

    monkeypatch.setattr(runs, "get_run", counting)
    summary = publish.publish_run(conn, settings, second, dry_run=True, out_dir=str(tmp_path / "out"),
                                  publisher=publish.open_publisher(settings, dry_run=True,
                                                                   out_dir=str(tmp_path / "out")))
    assert summary.actions >= 2
    assert reads.count(second) == 1 and reads.count(first) <= 1


def test_the_nightly_hands_one_view_to_the_publisher_and_the_report(tmp_path):
    settings = Settings(state_path=tmp_path / "state.sqlite",
                        nightly=NightlySettings(configs=["capture_scalar_outputs"]))
    conn = db.connect(settings.state_path)
    world = World()
    result = nightly.run_nightly(conn, settings, out_dir=tmp_path / "out", steps=world.steps())
    published, reported = world.views
    assert published is reported and published.id == result.run_id


def test_the_dry_run_takes_the_real_steps_and_leaves_the_store_as_it_was(two_nights, tmp_path):
    settings, conn, first, second = two_nights
    # A real publish that GitHub cut short left one action in the outbox: the dry run sends it first, as a real one would.
    outbox.enqueue(conn, "leftover", first, [("t-left", "comment",
                                             outbox.IssuePayload(number=7, kind="tracking", body="left over"))])
    out = tmp_path / "out"
    summary = publish.publish_run(conn, settings, second, dry_run=True, out_dir=str(out),
                                  publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(out)))
    plan = json.loads((out / "plan.json").read_text())
    actions = [(a["action"], a["number"]) for a in plan["actions"]]
    assert actions[0] == ("comment", 7) and summary.resumed == 1
    assert [a for a, _ in actions[1:]].count("create") == summary.actions
    assert summary.done == summary.actions + 1 and summary.pending == 0
    # Nothing reached the file: the leftover is still pending there and no link was written.
    assert [e.status for e in outbox.entries(conn)] == ["pending"] and links.all_links(conn) == {}


def test_a_dry_run_loads_without_pygithub(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        sys.modules["github"] = None            # `import github` now raises ImportError
        from pathlib import Path
        from bot.pipeline import nightly
        from bot.settings import NightlySettings, Settings, VerifySettings
        from state import db
        from tests.fakesweep import World
        settings = Settings(state_path=Path({str(tmp_path)!r}) / "state.sqlite",
                            nightly=NightlySettings(configs=["capture_scalar_outputs"]),
                            verify=VerifySettings(enabled=False))
        conn = db.connect(settings.state_path)
        world = World()
        world.crashing = {{"GammaModel"}}
        out = Path({str(tmp_path)!r}) / "out"
        result = nightly.run_nightly(conn, settings, dry_run=True, out_dir=out, steps=world.steps(real_publish=True))
        assert "bot.github.client" not in sys.modules and sys.modules["github"] is None
        print(result.published.actions, (out / "plan.json").is_file(), len(list((out / "pending").iterdir())))
    """)
    res = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    # the config's summary rendered to a file, and the one-model crash watched: its would-be issue under pending/
    assert res.stdout.split() == ["1", "True", "1"]


def test_the_view_carries_the_gate_verify_cost_and_precision_publish_and_report_read_no_other(two_nights, tmp_path):
    from bot.report import report
    from state import gates, resolutions, verdicts
    settings, conn, first, second = two_nights
    gates.record(conn, gates.EnvironmentVerdict(run_id=second, verdict=gates.SUSPECT, reasons=[{"kind": "check", "missing": "torch"}]))
    verdicts.record_step(conn, second, verdicts.StepCost(12.5, 3, 2, 1, 0))
    resolutions.record(conn, "o/r", [resolutions.Resolution(number=1, key="k", resolution="completed")])
    view = run_view.load(conn, second)
    # What the view holds is what publish and report show, though the store says otherwise after the read.
    conn.execute("DELETE FROM run_gates")
    conn.execute("DELETE FROM verify_steps")
    conn.execute("DELETE FROM issue_resolutions")
    ctx = report.build_context(conn, view=view)
    assert ctx["gate"]["verdict"] == gates.SUSPECT and ctx["verify_cost"]["step"]["seconds"] == 12.5
    assert ctx["precision"]["opened"] == 1 and ctx["precision"]["counts"]["completed"] == 1
    out = str(tmp_path / "out")
    summary = publish.publish_run(conn, settings, second, dry_run=True, out_dir=out, view=view,
                                  publisher=publish.open_publisher(settings, dry_run=True, out_dir=out))
    assert summary.gate["verdict"] == gates.SUSPECT and summary.gated > 0     # the suspect run filed nothing


def test_the_nightly_carries_its_confirmed_diff_and_judged_gate_into_the_view(tmp_path):
    settings = Settings(state_path=tmp_path / "state.sqlite", verify=VerifySettings(enabled=False),
                        nightly=NightlySettings(canaries=["AlphaModel"]))
    conn = db.connect(settings.state_path)
    world = World()
    nightly.run_nightly(conn, settings, out_dir=tmp_path / "out", steps=world.steps())
    world.version, world.date, world.crashing = "2.14.0.dev20261122+cpu", "2026-11-22", {"GammaModel"}
    confirmed, diffs = [], []
    steps = world.steps()
    real_diff, real_confirm = steps.diff, steps.confirm

    def diff(conn, run):
        diffs.append(run.id)
        return real_diff(conn, run)

    def confirm(conn, run_id, result, settings, python):
        confirmed.append(real_confirm(conn, run_id, result, settings, python))
        return confirmed[-1]

    steps.diff, steps.confirm = diff, confirm
    second = nightly.run_nightly(conn, settings, out_dir=tmp_path / "out", steps=steps)
    view = world.views[-1]
    assert diffs == [second.run_id] and view.diff is confirmed[0] is not None    # computed once, carried
    assert view.gate is not None and view.gate.to_dict() == second.gate         # judged once, carried
    conn.close()
