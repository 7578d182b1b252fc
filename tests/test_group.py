"""The Group's pools with the checks on, over real in-process compiles of TinyLM (tests/accuracy_models.py).

TinyLM under the baseline, then two prunable configs the baseline read, pooled: capture_dynamic_output_shape_ops
(read by the first compile only, the graphs unchanged: its later calls can be answered) and error_on_recompile (read
by the second-size recompile alone: its later calls must be traced in full, and there it raises); and
capture_scalar_outputs (its traced path shifts the hidden state: its first call is not the baseline's). Then
siblings: capture_scalar_outputs traced in full, and three configs whose first call shifts the same way, traced
after it in one group. Last, the pruning audit's traces (one real worker): the baseline first, so the screen answers
the pairs' later calls.
"""
from __future__ import annotations

import pytest

from harness.core.options import Accuracy
from harness.core.outcome import ANSWERED
from harness.engine import events, scenarios
from harness.engine.flags import answering
from harness.engine.group import Group
from harness.zoo.build import build
from tests import accuracy_models  # noqa: F401  (registers TinyLM)

CDOS = {"torch._dynamo.config.capture_dynamic_output_shape_ops": True}
LATE = {"torch._dynamo.config.error_on_recompile": True}
SCALARS = {"torch._dynamo.config.capture_scalar_outputs": True}
HOOKS = {"torch._dynamo.config.skip_nnmodule_hook_guards": False}   # the same graphs, other guards
ITEMS = [(0, "baseline", {}), (1, "cdos", CDOS), (2, "late", LATE)]
# Each traced alone in order (none prunable): capture_scalar_outputs first, then its would-be siblings.
SIBLINGS = [(0, "baseline", {}), (1, "scalars", SCALARS), (2, "scalars+cdos", {**SCALARS, **CDOS}),
            (3, "scalars+late", {**SCALARS, **LATE}), (4, "scalars+hooks", {**SCALARS, **HOOKS})]

pytestmark = pytest.mark.compile


def _run(*, answer: bool, items: list[tuple[int, str, dict]] = ITEMS, prune: bool = True,
         screen: bool | None = None) -> list[events.Event]:
    """One group of TinyLM with its configs pooled (`prune`), answering on or off (then the screen is asked, unless
    `screen` False: every call made in full, as the answer audit does)."""
    req = events.RunRequest(model="TinyLM", items=items, mode="compile", job=None,
                            prune=[c for _, c, _ in items[1:]] if prune else [], pool=True,
                            base_settings={}, backend="count", device="cpu", accuracy=Accuracy(), answer=answer,
                            screen=not answer if screen is None else screen)
    built = build("TinyLM", "cpu")
    sent: list[events.Event] = []
    Group(req, built, {"build_s": 0.0}, sent.append, scenarios.References("TinyLM", built, "cpu", req.accuracy)).run()
    return sent


@pytest.fixture(scope="module")
def answered() -> list[events.Event]:
    return _run(answer=True)


def _results(sent: list[events.Event]) -> dict[str, events.Result]:
    return {e.outcome.config: e for e in sent if isinstance(e, events.Result)}


def test_a_config_whose_key_only_a_later_call_reads_is_not_pooled_with_those_the_screen_can_answer(answered):
    # Split by the screen's keys before compiling: no pool of both (index -1), which would have been traced in full
    # for error_on_recompile's sake and then split anyway; each is its own compile.
    assert [e.index for e in answered if isinstance(e, events.Start)] == [0, 1, 2]
    found = _results(answered)
    assert found["cdos"].outcome.reason == ANSWERED and found["cdos"].answered_by == answering.RULE_GRAPHS
    late = found["late"].outcome
    assert late.reason is None and found["late"].answered_by is None
    # Each says why its later calls were made in full, or that they were not (answered).
    assert found["late"].traced_why == answering.LATER_KEY and found["cdos"].traced_why is None
    assert late.calls[1].scenario == "second_size" and late.calls[1].error_type is not None


def test_answering_off_each_config_carries_the_rule_of_its_own_compile():
    found = _results(_run(answer=False))
    assert found["cdos"].answered_by == answering.RULE_GRAPHS and found["cdos"].outcome.reason is None
    assert found["cdos"].traced_why == answering.ANSWERING_OFF and found["late"].traced_why == answering.LATER_KEY
    assert found["late"].answered_by is None
    # traced in full all the same: its own later calls, equal to the baseline's
    assert found["cdos"].outcome.calls[1:] == found["baseline"].outcome.calls[1:]


def test_a_pool_whose_first_call_is_not_the_baselines_makes_no_later_calls(monkeypatch):
    made: list[str] = []
    later = scenarios.later_call

    def counted(step, *args):   # the real call, counted
        made.append(step.scenario)
        return later(step, *args)

    monkeypatch.setattr(scenarios, "later_call", counted)
    sent = _run(answer=True, items=[ITEMS[0], (1, "scalars", SCALARS), (2, "cdos", CDOS)])
    assert [e.index for e in sent if isinstance(e, events.Start)] == [0, -1, 1, 2]   # pooled, then split
    found = _results(sent)
    assert found["scalars"].outcome.calls[0].accuracy == "wrong" and len(found["scalars"].outcome.calls) == 4
    assert found["scalars"].traced_why == answering.FIRST_DIFFERS
    assert found["cdos"].outcome.reason == ANSWERED
    # the baseline's three and capture_scalar_outputs' own three: none for the pool, which was split on its first call
    assert len(made) == 6


@pytest.fixture(scope="module")
def siblings() -> tuple[dict[str, events.Result], dict[str, events.Result]]:
    """The sibling items answering on, then the same items each traced in full."""
    return _results(_run(answer=True, items=SIBLINGS, prune=False)), \
        _results(_run(answer=False, items=SIBLINGS, prune=False, screen=False))


def test_an_item_answered_by_a_sibling_equals_the_same_item_traced_in_full_call_by_call(siblings):
    answered, full = siblings
    item = answered["scalars+cdos"]
    assert item.outcome.reason == ANSWERED and item.answered_by == answering.RULE_SIBLING
    assert answered["scalars"].outcome.reason is None   # the sibling: traced in full, its first call not the baseline's
    assert item.outcome.calls == full["scalars+cdos"].outcome.calls and len(item.outcome.calls) == 4
    # The baseline could not have answered it: its later calls are wrong where the baseline's are right.
    assert [c.accuracy for c in item.outcome.calls[1:]] != [c.accuracy for c in full["baseline"].outcome.calls[1:]]


def test_a_key_read_only_by_a_later_call_is_never_answered_by_a_sibling(siblings):
    late = siblings[0]["scalars+late"]
    assert late.outcome.reason is None and late.answered_by is None
    assert late.outcome.calls[1].scenario == "second_size" and late.outcome.calls[1].error_type is not None


def test_a_config_whose_guards_alone_differ_from_a_siblings_is_never_answered_by_it(siblings):
    answered, full = siblings
    hooks = answered["scalars+hooks"]
    assert hooks.outcome.reason is None and hooks.answered_by is None
    # Its own hook_added call (the hook guarded, so seen) differs from the sibling's it would have taken.
    assert hooks.outcome.calls == full["scalars+hooks"].outcome.calls
    assert hooks.outcome.calls[2] != answered["scalars"].outcome.calls[2]


def test_the_pruning_audits_traces_with_the_checks_on_answer_their_later_calls_from_the_baseline():
    from harness.engine.engine import SweepOptions, after_baselines, run_items

    configs = {"baseline": {}, "rnn": {"torch._dynamo.config.allow_rnn": True}}   # TinyLM never asks about RNNs
    options = SweepOptions(workers=1, timeout=120, extra_modules=["tests.accuracy_models"], accuracy=Accuracy())
    both: list[list[tuple[str, str]]] = []

    def trace(items: list[tuple[str, str]]) -> list:
        both.append(items)
        return run_items(items, configs=configs, base_settings={}, options=options)

    rnn, = after_baselines([("TinyLM", "rnn")], True, trace)
    assert both == [[("TinyLM", "baseline"), ("TinyLM", "rnn")]]   # the baseline first, in the same group
    # Its first call its own, its later calls answered (traced alone, it would have made them in full: a second
    # compile at the second size); the baseline's outcome is not returned.
    assert rnn.config == "rnn" and rnn.reason == ANSWERED and len(rnn.calls) == 4
