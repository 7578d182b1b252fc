"""The diff on hand-built runs: every transition, flaky items, incomparable config sets."""
from __future__ import annotations

from harness.core.outcome import Effect, Outcome
from harness.core.diff import TRANSITIONS, Side, classify, diff


def ok(model, config="capture_scalar_outputs", graphs=3, fp="fp1", **kw):
    return Outcome(model=model, config=config, status="ok", graphs=graphs, fingerprint=fp, **kw)


def crash(model, config="capture_scalar_outputs", sig="PendingUnbackedSymbolNotFound: Pending unbacked symbols {uN}",
          fp="fp1", status="error", **kw):
    return Outcome(model=model, config=config, status=status, signature=sig, fingerprint=fp,
                   error_type=(sig or status).split(":")[0], **kw)


BEFORE = [
    ok("NewCrash"), crash("Fixed"), crash("Still"), crash("SigChanged"),
    ok("Fewer", graphs=5), ok("More", graphs=2), ok("Same"), ok("Gone"), ok("Recipe", fp="fpA"),
]
AFTER = [
    crash("NewCrash"), ok("Fixed"), crash("Still"), crash("SigChanged", sig="GuardOnDataDependentSymNode: Eq(uN, 0)"),
    ok("Fewer", graphs=1), ok("More", graphs=4), ok("Same"), ok("Brand"), crash("Recipe", fp="fpB"),
]
EXPECTED = {
    "NewCrash": "new_crash", "Fixed": "fixed", "Still": "still_crashing", "SigChanged": "signature_changed",
    "Fewer": "graphs_decreased", "More": "graphs_increased", "Same": "unchanged", "Brand": "new_model",
    "Gone": "gone", "Recipe": "not_comparable",
}


def test_every_transition_on_hand_built_runs():
    result = diff(BEFORE, AFTER)
    got = {t.model: t.transition for t in result.transitions}
    assert got == EXPECTED
    assert set(got.values()) == set(TRANSITIONS)
    assert result.comparable
    assert result.counts()["new_crash"] == 1 and sum(result.counts().values()) == len(EXPECTED)
    assert result.changed_models() == sorted(set(EXPECTED) - {"Still", "Same"})


def test_before_and_after_carry_effect_graphs_signature():
    eff = [Effect("NewCrash", None, "capture_scalar_outputs", "crashes", 3, None, None, "X")]
    result = diff(BEFORE, AFTER, after_effects=eff)
    t = next(t for t in result.transitions if t.model == "NewCrash")
    assert t.before == Side(status="ok", effect=None, graphs=3, signature=None, fingerprint="fp1")
    assert t.to_dict()["before"] == {"status": "ok", "effect": None, "graphs": 3, "signature": None, "fingerprint": "fp1"}
    assert t.after.effect == "crashes"
    assert t.after.signature.startswith("PendingUnbackedSymbolNotFound")
    brand = next(t for t in result.transitions if t.model == "Brand")
    assert brand.before.status is None and brand.after.graphs == 3
    assert set(t.to_dict()) == {"model", "config", "transition", "before", "after", "flaky_rate", "reason", "in_note"}


def test_timeout_without_signature_and_status_change():
    assert classify(crash("M", status="timeout", sig=None), crash("M", status="timeout", sig=None)) == "still_crashing"
    assert classify(crash("M", status="timeout", sig=None), crash("M", status="killed", sig=None)) == "signature_changed"
    assert classify(ok("M"), Outcome("M", "c", "create_error", fingerprint="fp1")) == "new_crash"
    # Missing fingerprints do not make a model incomparable (old rows, reproducer runs).
    assert classify(ok("M", fp=None), ok("M", graphs=2)) == "graphs_decreased"


def test_flaky_items_are_reported_apart():
    after = [crash("NewCrash", flaky_rate=0.5, attempts=3)] + AFTER[1:]
    result = diff(BEFORE, after)
    assert [t.model for t in result.flaky()] == ["NewCrash"]
    assert result.flaky()[0].flaky_rate == 0.5
    assert result.counts()["new_crash"] == 0
    assert "NewCrash" not in result.changed_models()


def test_different_config_sets_say_what_can_be_compared():
    before = [ok("A", "baseline"), ok("A", "x"), ok("A", "only_old")]
    after = [ok("A", "baseline", graphs=1), crash("A", "x"), ok("A", "only_new")]
    result = diff(before, after)
    assert not result.comparable
    assert result.configs == ["baseline", "x"]
    assert result.configs_only_before == ["only_old"] and result.configs_only_after == ["only_new"]
    assert {t.config for t in result.transitions} == {"baseline", "x"}
    assert any("only_old" in n for n in result.notes)


def test_same_name_other_settings_is_not_compared():
    before = [ok("A", "baseline"), ok("A", "x")]
    after = [ok("A", "baseline"), crash("A", "x")]
    result = diff(before, after, before_configs={"baseline": {}, "x": {"k": True}},
                  after_configs={"baseline": {}, "x": {"k": False}})
    assert result.configs == ["baseline"]
    assert result.configs_changed == {"x": {"before": {"k": True}, "after": {"k": False}}}
    assert [t.transition for t in result.transitions] == ["unchanged"]
    assert result.by_config("x") == []
