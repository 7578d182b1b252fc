"""The correctness and recompile rules (harness/core/correctness.py) over typed calls (harness/core/calls.py)."""
from __future__ import annotations

import pytest

from harness.core import correctness as c
from harness.core.calls import Call
from harness.core.record import RecordError


def calls(*accuracies: str, recompiles: tuple[int, ...] = ()) -> list[Call]:
    scenarios = ("first", "second_size", "hook_added", "weights_updated")
    n = list(recompiles) + [0] * (len(accuracies) - len(recompiles))
    return [Call(s, accuracy=a, recompiles=r, output="logits" if a == "wrong" else None)
            for s, a, r in zip(scenarios, accuracies, n)]


def test_wrong_right_and_unjudged_items():
    assert c.verdict(calls("exact", "close")) == "right"
    assert c.verdict(calls("exact", "wrong", "not_judged")) == "wrong"
    assert c.verdict(calls("exact", "not_judged")) is None
    assert c.verdict(calls("eager_nondeterministic")) is None
    assert c.verdict([]) is None


@pytest.mark.parametrize("base, flag, effect", [
    (("exact", "exact"), ("exact", "wrong"), "wrong_result"),
    (("exact", "wrong"), ("exact", "close"), "fixes_wrong_result"),
    (("exact", "wrong"), ("wrong", "wrong"), "same_correctness"),       # both wrong: a baseline finding
    (("exact", "close"), ("close", "exact"), "same_correctness"),
    (("exact", "not_judged"), ("exact", "wrong"), None),                  # one side unjudged: no effect
    (("eager_nondeterministic",), ("wrong",), None),
])
def test_correctness_effect_against_the_baseline_on_the_same_item(base, flag, effect):
    assert c.correctness_effect(calls(*base), calls(*flag)) == effect


def test_the_wrong_results_signature_names_the_scenario_and_the_first_output_that_differs():
    found = c.first_wrong(calls("exact", "close", "wrong"))
    assert c.wrong_signature(found) == "wrong_result: hook_added: logits"
    assert c.baseline_finding(calls("exact", "exact")) is None


def test_recompile_effect_counts_only_the_later_calls():
    base = calls("exact", "exact", "exact", recompiles=(0, 1, 1))
    assert c.later_recompiles(base) == 2
    assert c.recompile_effect(base, calls("exact", "exact", "exact", recompiles=(3, 0, 1))) == "fewer_recompiles"
    assert c.recompile_effect(base, calls("exact", "exact", "exact", recompiles=(0, 2, 1))) == "more_recompiles"
    assert c.recompile_effect(base, calls("exact", "exact", "exact", recompiles=(0, 1, 1))) == "same_recompiles"
    assert c.recompile_effect(calls("exact"), base) is None     # the baseline made no later call


def test_reasons_are_kept_in_order_without_repeats():
    a = Call("second_size", recompiles=1, recompile_reasons=["size mismatch at index 1", "tensor 'x' stride"])
    b = Call("hook_added", recompiles=1, recompile_reasons=["size mismatch at index 1"])
    assert c.recompile_reasons([Call("first"), a, b]) == ["size mismatch at index 1", "tensor 'x' stride"]


def test_a_call_record_is_read_strictly():
    with pytest.raises(RecordError, match="unknown field 'graph'"):
        Call.from_dict({"scenario": "first", "graph": 1})
    with pytest.raises(RecordError, match="scenario .third_size. is not one of first"):
        Call.from_dict({"scenario": "third_size"})
    with pytest.raises(RecordError, match="missing field 'scenario'"):
        Call.from_dict({"graphs": 1})
    call = Call("weights_updated", accuracy="wrong", output="logits", detail="logits[0, 1]: 0.1 vs 0.4")
    assert Call.from_dict(call.to_dict()) == call


def test_a_wrong_result_signature_is_told_from_a_crash_signature():
    assert c.is_wrong_signature(c.wrong_signature(Call("weights_updated", accuracy="wrong", output="logits")))
    assert not c.is_wrong_signature("PendingUnbackedSymbolNotFound: Pending unbacked symbols {uN}")
