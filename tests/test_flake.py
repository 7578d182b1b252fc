"""Flake confirmation with real fresh workers and a test model that crashes one time in two."""
from __future__ import annotations

import dataclasses

import pytest

from bot.pipeline import flake
from bot.report import report
from harness.core.diff import diff
from harness.engine.engine import SweepOptions
from harness.core.outcome import Outcome
from state import history, runs
from state.db import connect
from tests import historydata as hd

CONFIGS = {"baseline": {}, "x": {"torch._dynamo.config.capture_scalar_outputs": True}}
SIG = "RuntimeError: toy crash under compile"


def test_judge_is_pure_and_symmetric():
    assert flake.judge("new_crash", [True, True]) is None
    assert flake.judge("new_crash", [True, False]) == pytest.approx(2 / 3, abs=1e-3)
    assert flake.judge("new_crash", [False, False]) == pytest.approx(1 / 3, abs=1e-3)
    assert flake.judge("fixed", [False, False]) is None
    assert flake.judge("fixed", [False, True]) == pytest.approx(1 / 3, abs=1e-3)


def _toy(model: str, config: str, crashed: bool) -> Outcome:
    if crashed:
        return Outcome(model=model, config=config, status="error", graphs=0, stratum="vision_other",
                       fingerprint="toy-v1", error_type="RuntimeError", error_message="toy crash under compile",
                       signature=SIG)
    return Outcome(model=model, config=config, status="ok", graphs=1, stratum="vision_other", fingerprint="toy-v1")


def test_confirm_marks_the_one_in_two_crash_flaky(tmp_path, monkeypatch):
    counter = tmp_path / "counter"
    counter.write_text("0")   # the two re-runs of FlakyToyModel draw 0 (ok) and 1 (crash), in some order
    monkeypatch.setenv("FLAGSWEEP_TEST_COUNTER", str(counter))
    conn = connect(tmp_path / "state.sqlite")
    models = ["FlakyToyModel", "SolidCrashToyModel"]
    before = hd.store_run(conn, [_toy(m, c, False) for m in models for c in CONFIGS], configs=CONFIGS)
    after = hd.store_run(conn, [_toy(m, "baseline", False) for m in models] + [_toy(m, "x", True) for m in models],
                         configs=CONFIGS)
    result = diff(history.group_outcomes(conn, before), history.group_outcomes(conn, after))
    assert result.counts()["new_crash"] == 2
    assert history.signature_history(conn, "x")[0].models == tuple(models)

    options = SweepOptions(workers=2, timeout=180, extra_modules=["tests.flaky_model"])
    confirmed = flake.confirm(conn, after, result.transitions, configs=CONFIGS, base_settings={}, options=options,
                              runs=2, progress=False)

    assert counter.read_text() == "2"   # FlakyToyModel was built twice, each time in a fresh worker
    by = {(t.model, t.config): t for t in confirmed}
    assert by[("FlakyToyModel", "x")].flaky_rate == pytest.approx(2 / 3, abs=1e-3)
    assert by[("SolidCrashToyModel", "x")].flaky_rate is None
    assert by[("FlakyToyModel", "baseline")].transition == "unchanged"   # untouched, not re-run
    # Stored: the outcome is re-recorded with its attempts and rate; a later diff from the store agrees.
    stored = {(o.model, o.config): o for o in runs.outcomes(conn, after)}
    assert (stored[("FlakyToyModel", "x")].attempts, stored[("FlakyToyModel", "x")].flaky_rate) == (3, 0.667)
    assert (stored[("SolidCrashToyModel", "x")].attempts, stored[("SolidCrashToyModel", "x")].flaky_rate) == (3, None)
    data = report.diff_runs(conn, before, after)
    assert data["counts"]["new_crash"] == 1
    assert [(t["model"], t["flaky_rate"]) for t in data["flaky"]] == [("FlakyToyModel", 0.667)]
    # The flaky crash leaves the signature history; the report lists it apart.
    assert history.signature_history(conn, "x")[0].models == ("SolidCrashToyModel",)
    html = report.render_html(report.build_context(conn, after))
    assert 'class="flaky-item" data-model="FlakyToyModel"' in html and "67% of attempts" in html


def test_nothing_to_confirm_runs_nothing(tmp_path):
    conn = connect(tmp_path / "state.sqlite")
    rid = hd.store_run(conn, hd.night())
    result = diff(history.group_outcomes(conn, rid), history.group_outcomes(conn, rid))
    # No new crash or fix: no worker is started (an unknown option would fail if one were).
    assert flake.confirm(conn, rid, result.transitions, configs=hd.CONFIGS, base_settings={}, options=None,
                         runs=2) == result.transitions


def test_a_first_night_confirms_each_tracked_crash(tmp_path, monkeypatch):
    # No previous run, so no diff: every tracked crash is new, and is re-run before it may be filed.
    counter = tmp_path / "counter"
    counter.write_text("0")
    monkeypatch.setenv("FLAGSWEEP_TEST_COUNTER", str(counter))
    conn = connect(tmp_path / "state.sqlite")
    models = ["FlakyToyModel", "SolidCrashToyModel"]
    only = hd.store_run(conn, [_toy(m, "baseline", False) for m in models] + [_toy(m, "x", True) for m in models],
                        configs=CONFIGS)
    firsts = flake.first_night(conn, only)
    assert [(t.model, t.config, t.transition) for t in firsts] == [("FlakyToyModel", "x", "new_crash"),
                                                                   ("SolidCrashToyModel", "x", "new_crash")]
    options = SweepOptions(workers=2, timeout=180, extra_modules=["tests.flaky_model"])
    flake.confirm(conn, only, firsts, configs=CONFIGS, base_settings={}, options=options, runs=2, progress=False)
    stored = {(o.model, o.config): o for o in runs.outcomes(conn, only)}
    assert (stored[("SolidCrashToyModel", "x")].attempts, stored[("SolidCrashToyModel", "x")].flaky_rate) == (3, None)
    assert stored[("FlakyToyModel", "x")].flaky_rate == pytest.approx(0.667, abs=1e-3)
    assert history.signature_history(conn, "x")[0].models == ("SolidCrashToyModel",)


def test_a_rerun_that_fails_otherwise_does_not_confirm_the_crash(tmp_path):
    """The stored crash says one thing; both re-runs crash with another signature: the crash that would be filed
    did not repeat, so it is flaky (1 of 3 attempts), not confirmed."""
    conn = connect(tmp_path / "state.sqlite")
    model = "SolidCrashToyModel"
    before = hd.store_run(conn, [_toy(model, c, False) for c in CONFIGS], configs=CONFIGS)
    other = dataclasses.replace(_toy(model, "x", True), error_message="another crash", signature="RuntimeError: another crash")
    after = hd.store_run(conn, [_toy(model, "baseline", False), other], configs=CONFIGS)
    result = diff(history.group_outcomes(conn, before), history.group_outcomes(conn, after))
    options = SweepOptions(workers=1, timeout=180, extra_modules=["tests.flaky_model"])
    confirmed = flake.confirm(conn, after, result.transitions, configs=CONFIGS, base_settings={}, options=options,
                              runs=2, progress=False)
    assert {(t.model, t.config): t for t in confirmed}[(model, "x")].flaky_rate == pytest.approx(1 / 3, abs=1e-3)
    assert history.signature_history(conn, "x") == []
