"""Graph-break ids on real Dynamo messages (tests/fixtures/graph_breaks.json, torch 2.13), and the summary issue's
"what the flag removes" and leverage sections planned from them. The real compiles are in tests/test_engine.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.issues.context import PlanSettings
from bot.issues.keys import summary_key
from bot.issues.plan import plan
from bot.issues.timeline import Timeline
from bot.view.run_view import RunView
from tests import issueviews as iv
from harness.core.outcome import Outcome
from harness.core.signature import error_kind, gb_doc_url, graph_break_type, linked_gb_id, signature
from harness.core.run_environment import RunEnvironment

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "graph_breaks.json").read_text())
ITEM, PRINT = FIXTURE["break_reasons"]
ERROR = FIXTURE["errors"][0]
CSO = "capture_scalar_outputs"
CONFIGS = {"baseline": {}, CSO: {f"torch._dynamo.config.{CSO}": True}}


@pytest.mark.parametrize("case", FIXTURE["break_reasons"], ids=lambda c: c["gb_id"])
def test_real_break_reasons_give_their_gb_type_and_linked_id(case):
    assert graph_break_type(case["reason"]) == case["gb_type"]
    assert linked_gb_id(case["reason"]) == case["gb_id"]


def test_real_unsupported_error_is_named_by_its_id_and_gb_type():
    assert ERROR["type"] == "torch._dynamo.exc.Unsupported"
    sig = signature(ERROR["type"], ERROR["message"], None)
    assert sig == f"GB0059: {ERROR['gb_type']}"
    # The id the worker looked up wins over the link; the kind stays what was raised.
    assert signature(ERROR["type"], ERROR["message"], None, gb_id="GB0059") == sig
    assert error_kind(ERROR["type"], ERROR["message"]) == "Unsupported"


def test_crashes_without_an_id_keep_todays_signature():
    message = "Pending unbacked symbols {u1, u0} not in returned outputs FakeTensor(..., size=(u0,))"
    assert signature("torch.fx.experimental.symbolic_shapes.PendingUnbackedSymbolNotFound", message) == \
        "PendingUnbackedSymbolNotFound: Pending unbacked symbols {uN} not in returned outputs"
    # A message that merely mentions a link is not a graph break.
    assert linked_gb_id("RuntimeError: see compile-graph-break-site/gb/gb0124.html") is None


def test_doc_url_is_the_form_dynamo_links():
    assert gb_doc_url("GB0124") in ITEM["reason"]
    assert gb_doc_url("GB0059") in PRINT["reason"]


def _out(model: str, config: str, reasons: list[dict], status: str = "ok", sig: str | None = None) -> Outcome:
    return Outcome(model=model, config=config, status=status, graphs=len(reasons) + 1, graph_breaks=len(reasons),
                   break_reasons=[r["reason"] for r in reasons], break_ids=[r["gb_id"] for r in reasons],
                   signature=sig, stratum="decoder_llm")


def _run(outs: list[Outcome]) -> RunView:
    return iv.view(outs, run_id=3, configs=CONFIGS, breaks=True)


def _summary(view: RunView) -> str:
    return next(a.body for a in plan(view, Timeline(), PlanSettings()).actions if a.key == summary_key(CSO))


def test_summary_lists_removed_and_introduced_ids_and_a_hint_the_flag_did_not_honour():
    outs = [_out("A", "baseline", [ITEM]), _out("A", CSO, []),
            _out("B", "baseline", [ITEM]), _out("B", CSO, [PRINT]),
            _out("C", "baseline", [ITEM]), _out("C", CSO, [ITEM])]          # the hint names the flag; it stayed
    view = _run(outs)
    b = view.breaks[CSO]
    assert [(r.gb_id, r.models) for r in b.removes] == [("GB0124", ("A", "B"))]
    assert [(r.gb_id, r.models) for r in b.introduces] == [("GB0059", ("B",))]
    assert [(r.gb_id, r.models, flag) for r, flag in b.hinted_kept] == [("GB0124", ("C",), CSO)]
    body = _summary(view)
    url = gb_doc_url("GB0124")
    assert f"`capture_scalar_outputs=True` removes [GB0124]({url}) `{ITEM['gb_type']}` in 2 models" in body
    assert f"introduces [GB0059]({gb_doc_url('GB0059')}) `Failed to trace builtin operator` in 1 model\n" in body
    assert f"hint for [GB0124]({url}) `{ITEM['gb_type']}` names `{CSO}`, but the flag did not remove it in 1 model" in body


def test_summary_ranks_crash_signatures_and_break_ids_by_models():
    rare, common = "RuntimeError: rare", "RuntimeError: common"
    outs = []
    for i, model in enumerate(["M1", "M2", "M3", "M4"]):
        outs.append(_out(model, "baseline", [ITEM]))
        crash = common if i < 3 else rare
        outs.append(_out(model, CSO, [PRINT] if i < 2 else [], status="error", sig=crash))
    outs += [_out("M5", "baseline", []), _out("M5", CSO, [PRINT])]
    view = _run(outs)
    lev = view.leverage[CSO]
    assert [(s, len(ms)) for s, ms in lev.crashes] == [(common, 3), (rare, 1)]
    assert [(r.gb_id, r.count) for r in lev.breaks] == [("GB0059", 3)]
    body = _summary(view)
    section = body.split("## Leverage", 1)[1]
    assert section.index(f"| {common} | 3 |") < section.index(f"| {rare} | 1 |")
    assert f"| [GB0059]({gb_doc_url('GB0059')}) | Failed to trace builtin operator | 3 |" in section


def test_tracking_issue_of_an_unsupported_crash_links_its_id():
    sig = signature(ERROR["type"], ERROR["message"])
    outs = [_out("A", "baseline", []), Outcome(model="A", config=CSO, status="error", signature=sig, gb_id="GB0059",
                                               error_type="Unsupported", error_message=ERROR["message"], attempts=3)]
    body = next(a.body for a in plan(_run(outs), Timeline(), PlanSettings(min_models=1)).actions
                if a.kind == "tracking")
    assert f"graph-break id [GB0059]({gb_doc_url('GB0059')})" in body


def test_report_shows_removed_ids_and_leverage_from_the_store(tmp_path):
    from bot.report import report
    from bot.view import run_view
    from state import db, history, runs

    conn = db.connect(tmp_path / "state.sqlite")
    rid = runs.create_run(conn, environment=RunEnvironment.from_dict({"torch_version": "2.13.0"}), models=["A", "B"], configs=CONFIGS)
    for o in (_out("A", "baseline", [ITEM]), _out("A", CSO, []), _out("B", "baseline", [ITEM, PRINT]),
              _out("B", CSO, [PRINT])):
        runs.record_outcome(conn, rid, o)
    runs.finish_run(conn, rid)
    history.finalize_run(conn, rid)
    view = run_view.load(conn, rid)
    assert [(r.gb_id, r.count) for r in view.breaks[CSO].removes] == [("GB0124", 2)]
    ctx = report.build_context(conn, view=view)
    md, html = report.render_md(ctx), report.render_html(ctx)
    assert f"`{CSO}` removes [GB0124]({gb_doc_url('GB0124')})" in md and "in 2 models" in md
    assert "- affects 2: [GB0124]" in md.split("### baseline", 1)[1]
    assert f'<li class="removes" data-config="{CSO}" data-gb="GB0124">' in html
    assert html.count('<tr class="affects">') == 3   # baseline: GB0124, GB0059; the flag: GB0059
