"""The answer audit, per flag, over real nights: a disagreement the screen cannot see (TinyLateFlagLM reads
capture_scalar_outputs in every compile, and acts on it only at the second size) is caught by the audit, in the group
that answered it, turns the rule off for that config that night, quarantines it, and the next night traces it in
full."""
from __future__ import annotations

import pytest

from harness.core.calls import Call
from harness.core.options import Accuracy
from harness.core.outcome import ANSWERED
from harness.engine import engine
from harness.engine.engine import SweepOptions, SweepRequest, sweep
from harness.engine.flags import answering
from state import db, flags, runs
from tests.fakegithub import scenario as sc

CSO = "capture_scalar_outputs"
CONFIGS = {"baseline": {}, CSO: {"torch._dynamo.config.capture_scalar_outputs": True}}
OPTIONS = SweepOptions(workers=1, timeout=120, extra_modules=["tests.accuracy_models"],
                       accuracy=Accuracy(answer_audit=0.0, answer_audit_min=0, answer_quarantine=2))

pytestmark = pytest.mark.compile


def _night(conn, date: str) -> int:
    return sweep(conn, SweepRequest(models=["TinyLateFlagLM"], configs=CONFIGS, options=OPTIONS, progress=False,
                                    kind="nightly", nightly=date)).run.id


def test_a_planted_disagreement_turns_the_rule_off_quarantines_the_flag_and_the_next_night_traces_it(tmp_path,
                                                                                                   monkeypatch):
    conn = db.connect(tmp_path / "state.sqlite")
    after: list[list[tuple[str, str]]] = []   # what was traced after the sweep
    monkeypatch.setattr(engine, "run_items", lambda items, **kw: after.append(items) or [])
    first = _night(conn, "2026-11-20")
    assert after == []   # found in the group that answered it, on its own compile: nothing traced again
    finding, = flags.answer_audit(conn, first)
    assert (finding.model, finding.config) == ("TinyLateFlagLM", CSO)
    assert finding.disagreement and finding.disagreement.startswith("second_size: ")
    # The stored item is the full trace (its wrong second-size call), no longer an answered one.
    stored = {o.config: o for o in runs.outcomes(conn, first)}[CSO]
    assert stored.reason is None and stored.calls[1].accuracy == "wrong" and flags.answered(conn, first) == {}
    held, = flags.quarantined(conn, "2026-11-21")
    assert (held.config, held.nights, held.left, held.night) == (CSO, 2, 2, "2026-11-20")
    assert held.why.startswith("TinyLateFlagLM: second_size: ")

    second = _night(conn, "2026-11-21")
    again = {o.config: o for o in runs.outcomes(conn, second)}[CSO]
    assert again.reason != ANSWERED and again.calls[1].accuracy == "wrong"
    assert flags.answer_audit(conn, second) == [] and flags.answered(conn, second) == {}
    assert [q.left for q in flags.quarantined(conn, "2026-11-22")] == [1]
    assert [q.left for q in flags.quarantined(conn, "2026-11-23")] == [1]   # nights that ran count, not dates
    sc.record_nightly(conn, "2026-11-22", {"AModel": {}})
    assert flags.quarantined(conn, "2026-11-23") == []     # two nights after it, the rule is on again


def test_the_report_lists_the_quarantined_flags_and_why(tmp_path):
    from bot.report import report

    conn = db.connect(tmp_path / "s.sqlite")
    made = [Call("first", 1, accuracy="exact"), Call("second_size", 0, accuracy="exact")]
    calls = {("AModel", c): made for c in ("baseline", sc.CSO)}
    run_id = sc.record_nightly(conn, "2026-11-20", {"AModel": {}}, calls=calls,
                               configs={"baseline": {}, sc.CSO: sc.CONFIGS[sc.CSO]})
    why = "second_size: accuracy 'exact' answered, 'wrong' traced"
    flags.quarantine(conn, run_id, "2026-11-20", 7, [flags.AnswerFinding("AModel", sc.CSO, why)])
    context = report.build_context(conn, run_id)
    md = report.render_md(context)
    assert "Flags under quarantine" in md and f"`{sc.CSO}`: 7 of 7 nights left" in md
    assert "AModel: second\\_size" in md or "AModel: second_size" in md
    later = [sc.record_nightly(conn, night, {"AModel": {}}, calls=calls, configs={"baseline": {}, sc.CSO: sc.CONFIGS[sc.CSO]})
             for night in ("2026-11-21", "2026-11-22")]
    assert f"`{sc.CSO}`: 6 of 7 nights left" in report.render_md(report.build_context(conn, later[1]))
    assert f"`{sc.CSO}`: 7 of 7 nights left" in report.render_md(report.build_context(conn, run_id))   # as of then


def test_the_audit_samples_one_answered_item_of_every_config():
    pairs = [(f"M{i}", "a") for i in range(40)] + [("M0", "b"), ("M1", "c")]
    chosen = answering.sample(pairs, answering.AnswerAudit(share=0.05, least=2, seed=3))
    assert {c for _, c in chosen} == {"a", "b", "c"} and len(chosen) == 3   # ceil(0.05 * 42) = 3
    assert answering.sample(pairs, answering.AnswerAudit(share=0.5, least=2, seed=3)).__len__() == 21
    # Around the items the groups audited: a config that has one takes no other; the share counts them.
    around = answering.sample(pairs, answering.AnswerAudit(share=0.05, least=2, seed=3), [("M7", "a")])
    assert ("M7", "a") in around and {c for _, c in around} == {"a", "b", "c"} and len(around) == 3


def test_the_groups_sample_is_fixed_before_the_sweep_and_seeded_by_the_night():
    models, audit = [f"M{i}" for i in range(40)], answering.AnswerAudit(share=0.05, least=2, seed=3)
    chosen = answering.in_group(models, ["a", "b"], audit)
    for config in ("a", "b"):   # the share of the models for every config (ceil(0.05 * 40) = 2), one at least
        assert sum(config in its for its in chosen.values()) == 2
    assert answering.in_group(list(reversed(models)), ["b", "a"], audit) == chosen    # the night's, not the order's
    assert sum("a" in its for its in answering.in_group(models[:3], ["a"], audit).values()) == 1


def test_answering_off_traces_in_full_and_still_stores_what_the_screen_would_have_answered(tmp_path):
    # What bench/every_flag.py --checks --no-answer counts its misses from.
    conn = db.connect(tmp_path / "state.sqlite")
    cdos = "capture_dynamic_output_shape_ops"
    off = SweepOptions(workers=1, timeout=120, extra_modules=["tests.accuracy_models"],
                       accuracy=Accuracy(answer=False))
    run_id = sweep(conn, SweepRequest(models=["TinyCorruptSecondLM"], options=off, progress=False,
                                      configs={"baseline": {}, cdos: {f"torch._dynamo.config.{cdos}": True}})).run.id
    item = {o.config: o for o in runs.outcomes(conn, run_id)}[cdos]
    assert item.reason is None and len(item.calls) == 4 and flags.answered(conn, run_id) == {}
    assert flags.answered(conn, run_id, screened=True) == {("TinyCorruptSecondLM", cdos): answering.RULE_GRAPHS}
