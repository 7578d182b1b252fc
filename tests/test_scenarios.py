"""The calls an item makes, over real workers and real compiles of tiny models (tests/accuracy_models.py).

One sweep (2 workers) holds every case: TinyLM under the baseline, under capture_scalar_outputs (its traced path
shifts the hidden state: wrong) and compiled dynamic from the first call; a model whose eager forward is noisy; a
model whose sealed second spec is corrupt.
"""
import pytest

from harness.core.calls import SCENARIOS, Call
from harness.core.correctness import recompile_effect
from harness.engine.engine import SweepOptions, run_items
from harness.core.options import Accuracy
from harness.engine.group import same_as_baseline

DYNAMIC = "dynamic_from_start"
CONFIGS = {"baseline": {}, "capture_scalar_outputs": {"torch._dynamo.config.capture_scalar_outputs": True},
           DYNAMIC: {"torch._dynamo.config.assume_static_by_default": False}}
ITEMS = [("TinyLM", c) for c in CONFIGS] + [("TinyNoisyLM", "baseline"), ("TinyCorruptSecondLM", "baseline")]
OPTIONS = SweepOptions(workers=2, timeout=120, extra_modules=["tests.accuracy_models"], accuracy=Accuracy())

pytestmark = pytest.mark.compile


@pytest.fixture(scope="module")
def outs():
    found = run_items(ITEMS, configs=CONFIGS, base_settings={}, options=OPTIONS)
    return {(o.model, o.config): o for o in found}


def calls(out):
    return {c.scenario: c for c in out.calls}


def test_every_item_makes_every_call_in_order_and_the_first_call_counts_as_before(outs):
    base = outs["TinyLM", "baseline"]
    assert base.status == "ok" and [c.scenario for c in base.calls] == list(SCENARIOS)
    assert (base.graphs, base.recompiles, base.ops_per_graph) == (1, 0, [base.ops])   # the later calls' are theirs
    first = calls(base)["first"]
    assert (first.accuracy, first.graphs, first.recompiles) == ("exact", 1, 0)
    assert calls(base)["weights_updated"].right   # parameters are graph inputs: an in-place step is seen


def test_a_compiled_path_that_shifts_an_output_is_wrong_and_names_it(outs):
    wrong = calls(outs["TinyLM", "capture_scalar_outputs"])["first"]
    assert wrong.accuracy == "wrong" and wrong.output == "last_hidden_state"
    assert "max abs diff 1.00e-01" in wrong.detail and "fp64" in wrong.detail


def test_the_second_size_recompiles_with_its_reason_and_dynamic_from_the_start_recompiles_less(outs):
    base, dynamic = outs["TinyLM", "baseline"], outs["TinyLM", DYNAMIC]
    second = calls(base)["second_size"]
    assert second.right and second.recompiles == 1 and second.graphs == 1
    assert "size mismatch" in second.recompile_reasons[0], second.recompile_reasons
    assert calls(dynamic)["second_size"].recompiles == 0 and calls(dynamic)["second_size"].right
    assert recompile_effect(base.calls, dynamic.calls) == "fewer_recompiles"


def test_a_hook_added_after_the_first_call_is_missed_by_default(outs):
    # Dynamo skips hook guards (skip_nnmodule_hook_guards): the compiled code runs without the new hook.
    hook = calls(outs["TinyLM", "baseline"])["hook_added"]
    assert hook.accuracy == "wrong" and hook.output == "last_hidden_state" and hook.recompiles == 0


def test_a_model_whose_eager_forward_is_not_deterministic_is_never_judged(outs):
    noisy = outs["TinyNoisyLM", "baseline"]
    assert noisy.status == "ok"
    assert {c.accuracy for c in noisy.calls} == {"eager_nondeterministic"}
    assert "logits" in noisy.calls[0].detail


def test_a_corrupt_second_spec_loses_its_call_only(outs):
    out = outs["TinyCorruptSecondLM", "baseline"]
    assert out.status == "ok" and out.graphs == 1
    second = calls(out)["second_size"]
    assert second.accuracy == "not_judged" and second.graphs == 0
    assert "'TinyCorruptSecondLM' is corrupt" in second.detail and "second_spec.input_ids" in second.detail
    assert calls(out)["first"].accuracy == "exact" and calls(out)["weights_updated"].right


def test_with_the_checks_off_an_item_records_no_calls():
    off = SweepOptions(workers=1, timeout=120, extra_modules=["tests.accuracy_models"], accuracy=Accuracy(enabled=False))
    out, = run_items([("TinyLM", "baseline")], configs=CONFIGS, base_settings={}, options=off)
    assert out.status == "ok" and out.graphs == 1 and out.calls == []


def test_a_pool_stands_for_its_configs_only_when_its_calls_match_the_baselines():
    fields = {"status": "ok", "graphs": 1, "calls": [Call("first", 1, accuracy="exact"), Call("hook_added", accuracy="exact")]}
    assert same_as_baseline(fields, {**fields, "calls": [Call("first", 1, accuracy="exact", detail="x"),
                                                         Call("hook_added", accuracy="exact")]})
    assert not same_as_baseline(fields, {**fields, "calls": [Call("first", 1, accuracy="exact"),
                                                             Call("hook_added", accuracy="wrong")]})
    assert not same_as_baseline(fields, {**fields, "calls": [Call("first", 1, accuracy="exact"),
                                                             Call("hook_added", recompiles=1, accuracy="exact")]})


def _guarded(x):
    return _step(x) * 2


def _step(x):
    return x + 1


def test_a_recompile_reason_keeps_no_object_id_and_no_machine_path(monkeypatch):
    """A guard on a function's code names the object by its id, which no other process repeats, and Dynamo's user
    stack trace names this file by its path: kept, the reason has neither (the audit compares reasons made in another
    worker; an issue shows them)."""
    import torch

    from harness import PROJECT_ROOT
    from harness.engine import scenarios

    recorder = scenarios.Recorder()
    compiled = torch.compile(_guarded, backend="eager")
    compiled(torch.ones(2))
    recorder.take()
    monkeypatch.setitem(globals(), "_step", lambda x: x - 1)
    compiled(torch.ones(2))
    reasons = recorder.take()
    assert len(reasons) == 1 and "___check_obj_id(G['_step'].__code__, ID)" in reasons[0]
    assert str(PROJECT_ROOT) not in reasons[0] and "tests/test_scenarios.py" in reasons[0]
