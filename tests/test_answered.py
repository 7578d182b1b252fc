"""Read sets per call window and later calls answered from the baseline, over a real sweep of tiny models.

One sweep (one worker, a real store) holds every case: TinyLM, whose second-size call recompiles, and
TinyCorruptSecondLM (TinyLM whose sealed second spec is corrupt: no second-size call, so no later call recompiles),
each under the baseline, capture_dynamic_output_shape_ops (read by the first compile only, the graphs unchanged),
skip_nnmodule_hook_guards=False (the same graphs, other guards: the hook added later is seen), error_on_recompile
(read by the second-size recompile alone), and two recompile limits raised, named to go together (the nightly's
named flags): compiled as one pool, later calls included. The answer audit takes one answered item of every config at
least: capture_dynamic_output_shape_ops's on one model is traced in full in the group that answered it.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from harness.core.calls import Call
from harness.core.outcome import ANSWERED, POOLED, Outcome
from harness.engine import engine
from harness.engine.engine import SweepOptions, SweepRequest, run_items, sweep
from harness.engine.flags import answering
from harness.core.options import Accuracy
from state import db, flags, runs

CDOS = "capture_dynamic_output_shape_ops"
HOOKS = "hooks_guarded"
LATE = "error_on_recompile"
CONFIGS = {"baseline": {}, CDOS: {"torch._dynamo.config.capture_dynamic_output_shape_ops": True},
           HOOKS: {"torch._dynamo.config.skip_nnmodule_hook_guards": False},
           LATE: {"torch._dynamo.config.error_on_recompile": True},
           "limit": {"torch._dynamo.config.recompile_limit": 16},
           "accumulated": {"torch._dynamo.config.accumulated_recompile_limit": 512}}
MODELS = ["TinyLM", "TinyCorruptSecondLM"]
OPTIONS = SweepOptions(workers=1, timeout=120, extra_modules=["tests.accuracy_models"],
                       accuracy=Accuracy(answer_audit=0.0, answer_audit_min=0))   # one per config: the least

pytestmark = pytest.mark.compile


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    path = tmp_path_factory.mktemp("answered") / "state.sqlite"
    conn = db.connect(path)
    asked: list[tuple[str, str]] = []   # what the answer audit traced after the sweep

    def counted(items, **kw):
        asked.extend(items)
        return run_items(items, **kw)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "run_items", counted)
        run = sweep(conn, SweepRequest(models=MODELS, configs=CONFIGS, options=OPTIONS, progress=False,
                                       together=frozenset({"limit", "accumulated"}))).run
    outs = {(o.model, o.config): o for o in runs.outcomes(conn, run.id)}
    return conn, run.id, outs, path, asked


def test_a_key_read_only_by_the_second_size_recompile_is_in_that_window_alone(swept):
    conn, run_id, _, _, _ = swept
    windows = flags.windows(conn, run_id, "TinyLM")
    assert list(windows) == ["first", "second_size", "hook_added", "weights_updated"]
    key = "torch._dynamo.config.error_on_recompile"   # Dynamo asks it only when a frame compiles again
    assert [w for w, keys in windows.items() if key in keys] == ["second_size"]
    # The merged read set that pruning reads is still every window's.
    assert set(flags.reads(conn, run_id)["TinyLM"]) == set().union(*windows.values())
    # No later call of the corrupt-second model recompiles: its later windows read next to nothing.
    later = flags.windows(conn, run_id, "TinyCorruptSecondLM")
    assert key not in set().union(*later.values()) and len(later["first"]) > 20


def test_runs_show_model_prints_each_windows_keys_and_refuses_a_model_the_run_lacks(swept, capsys):
    import json

    from bot.cli.main import main

    _, run_id, _, path, _ = swept
    state = str(path)
    assert main(["--state", state, "runs", "show", str(run_id), "--model", "TinyLM", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert list(shown["windows"]) == ["first", "second_size", "hook_added", "weights_updated"]
    assert "torch._dynamo.config.error_on_recompile" in shown["windows"]["second_size"]
    assert main(["--state", state, "runs", "show", str(run_id), "--model", "TinyLM"]) == 0
    text = capsys.readouterr().out
    assert "second_size (" in text and "  torch._dynamo.config.error_on_recompile" in text
    assert main(["--state", state, "runs", "show", str(run_id), "--model", "NoSuchModel"]) == 2
    assert capsys.readouterr().err.strip() == f"flagsweep: run {run_id} has no model NoSuchModel"


def test_an_item_audited_in_its_group_is_not_traced_again_after_the_sweep(swept):
    conn, run_id, outs, _, asked = swept
    finding, = [f for f in flags.answer_audit(conn, run_id) if f.config == CDOS]   # one of every config, the least
    assert finding.disagreement is None
    # Its full trace, made in its group, agreed: it is kept as answered, as it is without the audit.
    assert outs[finding.model, CDOS].reason == ANSWERED
    # No config audited in its group is traced again after the sweep: only the named flags' pooled items are.
    assert asked and {c for _, c in asked} <= {"limit", "accumulated"}


@pytest.mark.parametrize("model", MODELS)
def test_an_answered_item_equals_its_full_trace_call_by_call(swept, model):
    conn, run_id, outs, _, _ = swept
    answered = outs[model, CDOS]
    assert answered.reason == ANSWERED and answered.status == "ok"
    assert flags.answered(conn, run_id)[model, CDOS] == answering.RULE_GRAPHS   # stored with the rule
    base = outs[model, "baseline"]
    assert answered.calls[1:] == base.calls[1:] and answered.calls[0].scenario == "first"
    full, = run_items([(model, CDOS)], configs=CONFIGS, base_settings={}, options=OPTIONS, answer=False)
    assert full.reason is None and len(full.calls) == len(base.calls)
    assert [dataclasses.astuple(c) for c in full.calls] == [dataclasses.astuple(c) for c in answered.calls]


def test_a_flag_read_only_at_the_recompile_is_never_answered(swept):
    conn, run_id, outs, _, _ = swept
    late, base = outs["TinyLM", LATE], outs["TinyLM", "baseline"]
    # Its first call is the baseline's; the screen sends it to a full trace because the baseline read its key in the
    # second-size window alone: there it raises, where the baseline recompiled.
    assert late.reason is None and (late.graphs, late.ops_per_graph) == (base.graphs, base.ops_per_graph)
    assert base.calls[1].recompiles == 1 and base.calls[1].error_type is None
    assert late.calls[1].scenario == "second_size" and late.calls[1].error_type is not None
    assert ("TinyLM", LATE) not in flags.answered(conn, run_id)


def test_a_flag_that_changes_the_guards_and_not_the_graphs_is_not_answered(swept):
    conn, run_id, outs, _, _ = swept
    assert ("TinyCorruptSecondLM", HOOKS) not in flags.answered(conn, run_id)
    base, hooks = outs["TinyCorruptSecondLM", "baseline"], outs["TinyCorruptSecondLM", HOOKS]
    assert hooks.reason is None and hooks.graphs == base.graphs and hooks.ops_per_graph == base.ops_per_graph
    by = {c.scenario: c for c in hooks.calls}
    # Answered, it would have copied the baseline's wrong hook_added call; traced, the hook is guarded and seen.
    assert {c.scenario: c for c in base.calls}["hook_added"].accuracy == "wrong"
    assert by["hook_added"].accuracy == "exact" and by["hook_added"].recompiles == 1


def test_named_flags_equal_to_the_baseline_are_one_pooled_compile_later_calls_included(swept):
    _, _, outs, _, _ = swept
    base = outs["TinyLM", "baseline"]
    for config in ("limit", "accumulated"):
        pooled = outs["TinyLM", config]
        assert pooled.reason == POOLED and pooled.calls == base.calls and pooled.calls[1].recompiles == 1


def _out(model: str, config: str, hook: str, reason: str | None = ANSWERED) -> Outcome:
    calls = [Call("first", 1, accuracy="exact"), Call("second_size", 0, accuracy="exact"),
             Call("hook_added", 0, accuracy=hook), Call("weights_updated", 0, accuracy="exact")]
    return Outcome(model=model, config=config, status="ok", graphs=1, calls=calls, reason=reason)


def test_the_audit_catches_a_planted_disagreement_and_turns_the_rule_off_for_that_flag():
    stored = [_out("A", "flag", "wrong"), _out("B", "flag", "wrong"), _out("C", "flag", "wrong"),
              _out("A", "other", "wrong"), _out("A", "baseline", "wrong", reason=None)]
    asked: list[list[tuple[str, str]]] = []

    def trace(items: list[tuple[str, str]]) -> list[Outcome]:
        asked.append(items)   # planted: traced in full, `flag` sees the hook everywhere
        return [_out(m, c, "exact" if c == "flag" else "wrong", reason=None) for m, c in items]

    audit = answering.AnswerAudit(share=0.0, least=2, seed=7)
    findings, replaced = answering.audit(stored, audit, (), trace)
    sampled = answering.sample([(o.model, o.config) for o in stored if o.reason == ANSWERED], audit)
    assert asked[0] == sampled and len(findings) == 2
    assert {c for _, c in sampled} == {"flag", "other"}   # one answered item of every config, at least
    wrong = [f for f in findings if f.disagreement]
    assert wrong and all(f.config == "flag" for f in wrong)
    assert wrong[0].disagreement == "hook_added: accuracy 'wrong' answered, 'exact' traced"
    # The rule is off for `flag` for the rest of the night: each of its answered items is replaced by its full
    # trace; `other`, which agreed (or was not sampled), keeps its answered item.
    assert sorted((o.model, o.config) for o in replaced) == [("A", "flag"), ("B", "flag"), ("C", "flag")]
    assert all(o.reason is None for o in replaced)


def test_an_audit_disagreement_is_shown_in_the_report_and_the_flags_summary(tmp_path):
    from bot.issues.context import PlanSettings
    from bot.issues.plan import plan
    from bot.issues.timeline import Timeline
    from bot.issues.keys import summary_key
    from bot.report import report
    from bot.view import run_view
    from tests.fakegithub import scenario as sc

    conn = db.connect(tmp_path / "s.sqlite")
    models = ["AModel", "BModel"]
    made = {(m, c): _out(m, c, "exact", reason=None).calls for m in models for c in ("baseline", sc.CSO)}
    run_id = sc.record_nightly(conn, "2026-11-20", {m: {} for m in models}, calls=made,
                               configs={"baseline": {}, sc.CSO: sc.CONFIGS[sc.CSO]})
    why = "hook_added: accuracy 'wrong' answered, 'exact' traced"
    flags.record_answer_audit(conn, run_id, [flags.AnswerFinding("AModel", sc.CSO, why),
                                             flags.AnswerFinding("BModel", sc.CSO, None)])
    md = report.render_md(report.build_context(conn, run_id))
    assert "the audit traced 2 answered items again in full and **1 disagreed**" in md
    assert f"`AModel` under `{sc.CSO}`: hook\\_added" in md or f"`AModel` under `{sc.CSO}`: hook_added" in md
    body = next(a.body for a in plan(run_view.load(conn, run_id), Timeline(), PlanSettings()).actions
                if a.key == summary_key(sc.CSO))
    assert "Later calls answered from the baseline disagreed with a full trace on 1 model(s) under this flag" in body
    assert "`AModel`" in body


def test_the_worker_keeps_the_second_spec_it_used_and_the_accuracy_reproducer_renders_that_one(swept):
    from bot.verify.wrong_script import Case, render_wrong
    from harness.zoo import second
    from tests import accuracy_models as am

    conn, run_id, _, _, _ = swept
    builds = runs.model_data(conn, run_id)
    assert builds["TinyLM"].second_spec == second.candidates("TinyLM", am.SPEC)[0]   # the rule's first, ran in eager
    assert builds["TinyCorruptSecondLM"].second_spec is None                       # none was made
    recorded = {"input_ids": {"kind": "ids", "shape": [2, 7], "high": 50}}         # not what the rule would pick
    built = dataclasses.replace(builds["TinyLM"], second_spec=recorded)
    script = render_wrong(built, Case("wrong_result: second_size: logits", CONFIGS[CDOS], {}, "count",
                                      "cpu", 1e-3, 1e-3))
    assert "input_ids=torch.randint(0, 50, (2, 7))," in script
    assert built.to_dict()["second_spec"] == recorded and "second_spec" not in builds["TinyCorruptSecondLM"].to_dict()


def test_the_guards_compared_leave_out_the_builtins_a_workers_first_compile_alone_guards():
    # Dynamo guards the builtins a frame looks up (getattr, len) in a process's first compile only: kept in the
    # digest, no config compiled after the baseline (BertModel, GPT2Model: every one) could ever be answered.
    from harness.engine import backend
    from harness.zoo.inputs import make_inputs
    from tests import accuracy_models as am

    torch.manual_seed(0)
    module, inputs = am.BuiltinsLM().eval(), make_inputs(am.SPEC, 0, "cpu")
    first, later = (backend.compile_and_run(module, inputs, settings=s, backend="count").guards
                    for s in ({}, CONFIGS[CDOS]))
    assert first is not None and first == later


def test_a_disagreement_found_in_a_group_turns_the_rule_off_for_its_config_after_the_sweep():
    # In their groups: A under `flag` disagreed, A under `other` agreed (each stored as its full trace).
    already = [flags.AnswerFinding("A", "flag", "hook_added: accuracy 'wrong' answered, 'exact' traced"),
               flags.AnswerFinding("A", "other", None)]
    stored = [_out("A", "flag", "exact", reason=None), _out("B", "flag", "wrong"), _out("C", "flag", "wrong"),
              _out("A", "other", "wrong", reason=None), _out("B", "other", "wrong")]
    asked: list[list[tuple[str, str]]] = []

    def trace(items: list[tuple[str, str]]) -> list[Outcome]:
        asked.append(items)
        return [_out(m, c, "exact", reason=None) for m, c in items]

    findings, replaced = answering.audit(stored, answering.AnswerAudit(share=0.0, least=2, seed=7), (), trace,
                                         already)
    # Every config had an item audited in a group and the least is met: nothing sampled after the sweep; but the
    # rule is off for `flag`, so its other answered items are traced in full and replace the stored ones.
    assert findings == [] and asked == [[("B", "flag"), ("C", "flag")]]
    assert sorted((o.model, o.config) for o in replaced) == [("B", "flag"), ("C", "flag")]


def test_a_dynamic_shape_policy_key_read_by_the_first_compile_too_is_never_answered():
    """specialize_int is read by the first compile and by the recompile alike, so the read sets alone would answer it;
    only the recompile applies it (Qwen2Audio compiles the second size in 4 graphs under it, the baseline in 5)."""
    key = "torch._dynamo.config.specialize_int"
    windows = {"first": {key: False}, "second_size": {key: False}}
    first = answering.FirstCall("ok", ("code",), "guard")
    assert key in answering.LATER_CALL_KEYS
    assert answering.why_traced([key], first, first, windows, "count") == answering.LATER_CALL_KEY
    assert answering.keys_rule([key], windows, "count") is None
    other = "torch._dynamo.config.capture_scalar_outputs"   # read in both windows, not a policy key: answered
    assert answering.why_traced([other], first, first, {w: {other: False} for w in windows}, "count") is None
