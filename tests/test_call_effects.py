"""The correctness and recompile effects per item (harness/core/effects.py), stored with the graph effect
(state/history.py, schema v17), the run's baseline findings, and both axes diffed night to night
(harness/core/diff.py), from synthetic outcomes with calls."""
from __future__ import annotations

import pytest

from harness.core import diff as diff_mod
from harness.core.calls import Call
from harness.core.effects import baseline_findings, calls_table, effects_for, judged
from harness.core.outcome import Outcome
from harness.core.tracking import issue_groups, tracking_groups, wrong_result_groups
from harness.core import unsafe
from harness.core.unsafe import load, reason
from state import db, history
from tests.fakegithub import scenario as sc

CSO = "capture_scalar_outputs"


def made(*accuracies: str, recompiles: tuple[int, ...] = (), output: str = "logits") -> list[Call]:
    """Calls in scenario order: the first, then second_size, hook_added, weights_updated."""
    scenarios = ("first", "second_size", "hook_added", "weights_updated")
    n = list(recompiles) + [0] * (len(accuracies) - len(recompiles))
    return [Call(s, accuracy=a, recompiles=r, recompile_reasons=[f"{s}: size mismatch"] if r else [],
                 output=output if a == "wrong" else None, detail="max abs diff 0.5" if a == "wrong" else None)
            for s, a, r in zip(scenarios, accuracies, n)]


def out(model: str, config: str, calls: list[Call], status: str = "ok") -> Outcome:
    return Outcome(model=model, config=config, status=status, graphs=3, stratum="decoder_llm", calls=calls,
                   fingerprint=f"fp-{model}", signature=None if status == "ok" else "E: boom")


RIGHT = made("exact", "close", "exact")


def night() -> list[Outcome]:
    """A: the flag is wrong after the hook; B: the flag fixes the baseline's wrong second size (and recompiles
    less); C: both wrong (a baseline finding); D: the flag crashes; E: no calls at all."""
    return [out("A", "baseline", RIGHT), out("A", CSO, made("exact", "close", "wrong", recompiles=(0, 1, 1))),
            out("B", "baseline", made("exact", "wrong", "exact", recompiles=(0, 2))),
            out("B", CSO, made("exact", "exact", "exact", recompiles=(0, 1))),
            out("C", "baseline", made("exact", "wrong", output="last_hidden_state")),
            out("C", CSO, made("exact", "wrong", output="last_hidden_state")),
            out("D", "baseline", RIGHT), out("D", CSO, [], status="error"),
            out("E", "baseline", []), out("E", CSO, [])]


def test_each_item_gets_its_correctness_and_recompile_effect_beside_the_graph_effect():
    got = {e.model: (e.effect, e.correctness, e.recompile) for e in effects_for(night())}
    assert got == {"A": ("no_effect", "wrong_result", "more_recompiles"),
                   "B": ("no_effect", "fixes_wrong_result", "fewer_recompiles"),
                   "C": ("no_effect", "same_correctness", "same_recompiles"),
                   "D": ("crashes", None, None),               # a crash has no outputs to judge
                   "E": ("no_effect", None, None)}             # no calls: neither axis, never "same"
    table = calls_table(effects_for(night()), CSO)
    assert (table.judged, table.count("wrong_result"), table.count("fixes_wrong_result")) == (3, 1, 1)
    assert table.correctness[0].pct == 33.3 and table.compared == 3
    assert judged(effects_for(night())) and not judged(effects_for([o for o in night() if o.model in "DE"]))


def test_both_wrong_is_one_baseline_finding_per_run_not_a_flags_wrong_result():
    found = baseline_findings(night())
    assert [(f.model, f.signature, f.detail) for f in found] == [
        ("B", "wrong_result: second_size: logits", "max abs diff 0.5"),
        ("C", "wrong_result: second_size: last_hidden_state", "max abs diff 0.5")]
    groups = wrong_result_groups(effects_for(night()), night())
    assert list(groups) == [(CSO, "wrong_result: hook_added: logits")]    # C is not the flag's
    assert [e.model for e in groups[(CSO, "wrong_result: hook_added: logits")]] == ["A"]
    assert list(tracking_groups(effects_for(night()), night())) == [(CSO, "E: boom")]   # crashes alone: verify's
    assert list(issue_groups(effects_for(night()), night())) == [(CSO, "E: boom"), *groups]


def test_the_axes_are_stored_with_the_effects_and_read_back(tmp_path):
    conn = db.connect(tmp_path / "s.sqlite")
    run_id = sc.record_nightly(conn, "2026-11-20", {"A": {}, "B": {}, "C": {}}, calls={
        ("A", "baseline"): RIGHT, ("A", CSO): made("exact", "close", "wrong"),
        ("B", "baseline"): RIGHT, ("B", CSO): RIGHT})
    stored = {(e.model, e.config): (e.correctness, e.recompile) for e in history.effects(conn, run_id)}
    assert stored[("A", CSO)] == ("wrong_result", "same_recompiles")
    assert stored[("B", CSO)] == ("same_correctness", "same_recompiles")
    assert stored[("C", CSO)] == (None, None)
    assert history.effect_counts(conn, [run_id])[run_id][CSO] == {"no_effect": 3}   # the graph effects as they were


def test_night_to_night_a_new_wrong_result_a_fixed_one_and_recompiles():
    before = night()
    after = [out("A", "baseline", RIGHT), out("A", CSO, RIGHT),                                # fixed
             out("B", "baseline", RIGHT), out("B", CSO, made("exact", "wrong", recompiles=(0, 3))),  # new, more
             *[o for o in night() if o.model in "CDE"]]
    result = diff_mod.diff(before, after, before_effects=effects_for(before), after_effects=effects_for(after))
    axes = sorted((t.model, t.config, t.transition) for t in result.axes)
    assert axes == [("A", CSO, "recompiles_decreased"), ("A", CSO, "wrong_result_fixed"),
                    ("B", "baseline", "recompiles_decreased"), ("B", CSO, "new_wrong_result"),
                    ("B", CSO, "recompiles_increased")]
    new = next(t for t in result.axes if t.transition == "new_wrong_result")
    assert new.after.signature == "wrong_result: second_size: logits" and new.before.correctness == "fixes_wrong_result"
    assert result.axis_counts()["still_wrong_result"] == 0
    assert {t.transition for t in result.axis_news(CSO)} == {"new_wrong_result", "wrong_result_fixed",
                                                             "recompiles_increased", "recompiles_decreased"}
    # The graph transitions are what they were without calls.
    pb, pa = [_no_calls(o) for o in before], [_no_calls(o) for o in after]
    plain = diff_mod.diff(pb, pa, before_effects=effects_for(pb), after_effects=effects_for(pa))
    assert [t.to_dict() for t in plain.transitions] == [t.to_dict() for t in result.transitions]
    assert plain.counts() == result.counts() and plain.axes == []


def test_outcomes_without_calls_diff_exactly_as_before():
    a = [out(m, c, []) for m in "XY" for c in ("baseline", CSO)]
    b = [out("X", "baseline", []), out("X", CSO, [], status="error"), out("Y", "baseline", []), out("Y", CSO, [])]
    result = diff_mod.diff(a, b, before_effects=effects_for(a), after_effects=effects_for(b))
    assert result.axes == [] and [t.transition for t in result.transitions] == [
        "unchanged", "new_crash", "unchanged", "unchanged"]
    assert result.counts()["new_crash"] == 1 and result.to_dict()["axis_counts"]["new_wrong_result"] == 0


def test_a_still_wrong_result_and_nothing_for_an_item_first_judged_tonight():
    wrong = [out("A", "baseline", RIGHT), out("A", CSO, made("exact", "wrong"))]
    unjudged = [out("A", "baseline", []), out("A", CSO, [])]
    still = diff_mod.diff(wrong, wrong, before_effects=effects_for(wrong), after_effects=effects_for(wrong))
    first = diff_mod.diff(unjudged, wrong, before_effects=effects_for(unjudged), after_effects=effects_for(wrong))
    assert [t.transition for t in still.axes] == ["still_wrong_result"] and still.axis_news() == []
    assert first.axes == []


def test_the_unsafe_table_names_flags_unsafe_by_their_own_documentation():
    table = load()
    assert "skip_nnmodule_hook_guards=True" in reason({"torch._dynamo.config.skip_nnmodule_hook_guards": True}, table)
    assert reason({"torch._dynamo.config.skip_nnmodule_hook_guards": False}, table) is None   # the safe way round
    assert reason({"torch._dynamo.config.guard_nn_modules": False}, table).startswith("guard_nn_modules=False")
    assert reason({"torch._dynamo.config.capture_scalar_outputs": True}, table) is None


@pytest.mark.parametrize("text, named", [
    ("", "no [[unsafe]] entries"),
    ('[[unsafe_flags]]\nkey = "torch._dynamo.config.guard_nn_modules"\nvalue = false\nreason = "r"\n',
     "unknown key 'unsafe_flags' (the table is [[unsafe]] entries)"),
    ('[[unsafe]]\nkey = "torch._dynamo.config.guard_nn_modules"\nvalue = "false"\nreason = "r"\n',
     "unsafe #1: torch._dynamo.config.guard_nn_modules: value 'false' is a str"),
    ('[[unsafe]]\nkey = "torch._dynamo.config.guard_nn_modules"\nvalu = false\nreason = "r"\n',
     "torch._dynamo.config.guard_nn_modules: 'valu' is not a field"),
    ('[[unsafe]]\nkey = "guard_nn_modules"\nvalue = false\nreason = "r"\n', "key 'guard_nn_modules' is not a full"),
    ('[[unsafe]]\nkey = "torch._dynamo.config.guard_nn_modules"\nvalue = false\nreason = " "\n', "reason must say"),
    ('[[unsafe]]\nkey = "torch._dynamo.config.a"\nvalue = true\nreason = "r"\n' * 2, "a is listed twice"),
    ("[[unsafe]\nkey =", "unsafe_flags.toml: "),
])
def test_the_unsafe_table_is_read_strictly(tmp_path, text, named):
    """Issue 38: an empty table, a mistyped key or a string value was read as "nothing unsafe" (an unsafe flag's
    expected wrong results filed as issues): each is an error naming the file and the entry's key, in one line."""
    path = tmp_path / "unsafe_flags.toml"
    path.write_text(text)
    with pytest.raises(unsafe.UnsafeTableError) as raised:
        unsafe.load(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: ") and named in message and "\n" not in message


def _no_calls(o: Outcome) -> Outcome:
    return Outcome.from_dict({**o.to_dict(), "calls": []})


def test_an_unsafe_key_the_torch_under_test_lacks_is_one_warning_naming_it(tmp_path, caplog):
    """Issue 45: a key of unsafe_flags.toml that matches no flag of the torch under test (a typo, a key a newer torch
    removed) marked nothing unsafe without a word; exclusions.toml warns. Checked against the real torch's space as
    the sweep's workers list it: the typo is named, a key it has and a key of a module the backend does not list
    are not; the reviewed table matches this torch whole."""
    from bot.pipeline.steps import unsafe_unmatched
    from harness.engine.events import ConfigSpace
    from harness.engine.flags import space as configspace

    space = ConfigSpace(*configspace.discover("count", None))
    table = tmp_path / "unsafe_flags.toml"
    table.write_text('[[unsafe]]\nkey = "torch._dynamo.config.skip_nnmodule_hook_guards"\nvalue = true\nreason = "r"\n'
                     '[[unsafe]]\nkey = "torch._dynamo.config.skip_nnmodule_hook_gaurds"\nvalue = true\nreason = "r"\n'
                     '[[unsafe]]\nkey = "torch._inductor.config.not_listed_under_count"\nvalue = true\nreason = "r"\n')
    caplog.set_level("WARNING", logger="bot.pipeline.steps")
    assert unsafe_unmatched(space, table) == ["torch._dynamo.config.skip_nnmodule_hook_gaurds"]
    assert [r.getMessage() for r in caplog.records] == [
        "unsafe_flags.toml: torch._dynamo.config.skip_nnmodule_hook_gaurds matches no flag of the torch under test "
        "(a typo, or a key this build removed)"]
    assert unsafe_unmatched(space) == []
