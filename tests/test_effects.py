"""Every row of the effects table (DESIGN "Words"), and effects_for over a run's outcomes."""
import pytest

from harness.core.effects import classify, effects_for
from harness.core.outcome import EFFECTS, Outcome


def o(status, graphs=None, config="baseline", model="M", sig=None, stratum="decoder_llm"):
    return Outcome(model=model, config=config, status=status, graphs=graphs, signature=sig, stratum=stratum)


@pytest.mark.parametrize("base,flag,expected", [
    (o("ok", 3), o("ok", 1), "reduces_graphs"),
    (o("ok", 3), o("ok", 3), "no_effect"),
    (o("ok", 1), o("ok", 4), "increases_graphs"),
    (o("ok", 2), o("error", 0), "crashes"),
    (o("ok", 2), o("timeout"), "crashes"),
    (o("ok", 2), o("killed"), "crashes"),
    (o("error", 0), o("ok", 2), "fixes_crash"),
    (o("killed"), o("ok", 2), "fixes_crash"),
    (o("error", 0), o("error", 0), "both_crash"),
    (o("timeout"), o("killed"), "both_crash"),
    (o("create_error"), o("create_error"), "create_error"),
    (o("input_error"), o("input_error"), "create_error"),
    (o("eager_error"), o("eager_error"), "create_error"),
    (o("ok", 2), o("create_error"), "create_error"),
])
def test_classify_every_row(base, flag, expected):
    assert classify(base, flag) == expected
    assert expected in EFFECTS


def test_effects_for_pairs_each_config_with_its_models_baseline():
    outcomes = [
        o("ok", 3, model="A"), o("ok", 1, "flag1", model="A"), o("error", 0, "flag2", model="A", sig="E: x"),
        o("create_error", model="B", stratum="vl_multimodal"), o("create_error", config="flag1", model="B", stratum=None),
        o("ok", 2, "flag1", model="C"),  # no baseline (an interrupted run): no effect yet
    ]
    effects = effects_for(outcomes)
    got = {(e.model, e.config): e for e in effects}
    assert set(got) == {("A", "flag1"), ("A", "flag2"), ("B", "flag1")}
    assert got["A", "flag1"].effect == "reduces_graphs"
    assert (got["A", "flag1"].baseline_graphs, got["A", "flag1"].config_graphs) == (3, 1)
    assert got["A", "flag2"].effect == "crashes" and got["A", "flag2"].config_signature == "E: x"
    assert got["B", "flag1"].effect == "create_error" and got["B", "flag1"].stratum == "vl_multimodal"
    assert [e.to_dict()["model"] for e in effects] == ["A", "A", "B"]
