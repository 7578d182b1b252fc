"""Wrong results filed like crashes, end to end: hand-made nightlies with calls in a real store → publish →
PyGithub → the fake GitHub. A wrong result gets its own tracking issue per (config, wrong signature) under the
evidence rule; a flag unsafe by its own documentation keeps its wrong results in the summary, never in an issue;
a baseline finding is shown once, against no flag; the sweep's text and --json carry both axes."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.cli import sweep as sweep_cli
from bot.github import publish
from bot.report import report
from bot.settings import IssueSettings, Settings, VerifySettings
from harness.core.calls import Call
from state import db, runs
from tests.fakegithub import FakeGitHub
from tests.fakegithub import scenario as sc

CSO, UNSAFE = sc.CSO, "skip_hook_guards"
CONFIGS = {"baseline": {}, CSO: sc.CONFIGS[CSO],
           UNSAFE: {"torch._dynamo.config.skip_nnmodule_hook_guards": True}}
M = [f"Model{i:02d}ForCausalLM" for i in range(6)]
WRONG_SIG = "wrong_result: hook_added: logits"


def calls(*accuracies: str, output: str = "logits", recompiles: int = 0) -> list[Call]:
    scenarios = ("first", "second_size", "hook_added", "weights_updated")
    return [Call(s, accuracy=a, output=output if a == "wrong" else None, recompiles=recompiles if s != "first" else 0,
                 recompile_reasons=["size of L['input_ids'] changed"] if recompiles and s != "first" else [],
                 detail="max abs diff 3.1e-01 at logits[0, 4, 17]" if a == "wrong" else None)
            for s, a in zip(scenarios, accuracies)]


RIGHT, HOOK_WRONG = calls("exact", "close", "exact"), calls("exact", "close", "wrong", recompiles=1)


def night_calls() -> dict[tuple[str, str], list[Call]]:
    """M00, M01 wrong after the hook under CSO and under the unsafe flag; M05's baseline itself wrong (a finding);
    the rest right everywhere."""
    made = {(m, c): RIGHT for m in M for c in CONFIGS}
    made.update({(M[0], CSO): HOOK_WRONG, (M[1], CSO): HOOK_WRONG, (M[0], UNSAFE): HOOK_WRONG,
                 (M[1], UNSAFE): HOOK_WRONG})
    finding = calls("exact", "wrong", output="last_hidden_state")
    made.update({(M[5], c): finding for c in CONFIGS})
    return made


def settings_for(fake: FakeGitHub, tmp: Path, **issues: Any) -> Settings:
    return Settings(state_path=tmp / "state.sqlite", github=fake.settings(retry_backoff=0.0),
                    issues=IssueSettings(**{"summary_configs": [CSO, UNSAFE], **issues}),
                    verify=VerifySettings(enabled=False))


def night(conn, settings: Settings, date: str) -> int:
    run_id = sc.record_nightly(conn, date, {m: {} for m in M}, calls=night_calls(), configs=CONFIGS)
    publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                        publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    return run_id


def issue_titled(fake: FakeGitHub, start: str) -> list[Any]:
    return [i for i in fake.state.issues(fake.repo) if i.title.startswith(start)]


def test_a_wrong_result_is_filed_as_its_own_tracking_issue_and_an_unsafe_flags_is_not(fake_github: FakeGitHub,
                                                                                       tmp_path: Path) -> None:
    fake, settings = fake_github, settings_for(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    night(conn, settings, "2026-11-20")
    # The evidence rule: two models, but a wrong result is not re-run by flake confirmation: watching tonight.
    assert issue_titled(fake, "capture_scalar_outputs=True gives wrong results") == []
    summary = issue_titled(fake, f"flagsweep summary: {CSO}")[0].body
    assert f"`{WRONG_SIG}`: 2 models, seen on 1 consecutive nightly, not confirmed yet" in summary
    night(conn, settings, "2026-11-21")                        # seen on two consecutive nightlies: filed
    [filed] = issue_titled(fake, "capture_scalar_outputs=True gives wrong results")
    assert filed.title == "capture_scalar_outputs=True gives wrong results on 2/6 models (hook_added: logits)"
    assert f"Signature: `{WRONG_SIG}`" in filed.body and "max abs diff 3.1e-01" in filed.body
    assert r"size of L\['input\_ids'\] changed" in filed.body        # the later calls' recompile reasons, a cell
    assert "Not verified: no accuracy reproducer has been run" in filed.body
    assert "flagsweep:key=" in filed.body
    # The unsafe flag: the same wrong results, shown in its summary, never a tracking issue.
    assert not [i for i in fake.state.issues(fake.repo) if i.title.startswith("skip_nnmodule_hook_guards=True")]
    unsafe_summary = issue_titled(fake, "flagsweep summary: skip_nnmodule_hook_guards")[0].body
    assert "is unsafe by its own documentation (skip_nnmodule_hook_guards=True" in unsafe_summary
    assert f"`{M[0]}`: `{WRONG_SIG}`" in unsafe_summary and "Watching" not in unsafe_summary
    # The baseline finding: in the summary, counted against no flag.
    summary = issue_titled(fake, f"flagsweep summary: {CSO}")[0].body
    assert "Baseline findings" in summary and f"`{M[5]}`: `wrong_result: second_size: last_hidden_state`" in summary
    assert "| wrong_result | 2 | 33.3% |" in summary and "| more_recompiles | 2 | 33.3% |" in summary
    assert f"| {M[0]} | vl_multimodal | no_effect | 3 | 3 | wrong_result | more_recompiles |" in summary


def test_publishing_the_wrong_result_night_again_rewrites_nothing(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, settings = fake_github, settings_for(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    night(conn, settings, "2026-11-20")
    last = night(conn, settings, "2026-11-21")
    before = [(i.number, i.title, i.body) for i in fake.state.issues(fake.repo)]
    publish.publish_run(conn, settings, last, dry_run=False, out_dir=None,
                        publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    assert [(i.number, i.title, i.body) for i in fake.state.issues(fake.repo)] == before


def test_the_report_shows_both_axes_and_the_baseline_finding(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "s.sqlite")
    run_id = sc.record_nightly(conn, "2026-11-20", {m: {} for m in M}, calls=night_calls(), configs=CONFIGS)
    ctx = report.build_context(conn, run_id)
    html, md = report.render_html(ctx), report.render_md(ctx)
    assert '<h2 id="calls">Correctness and recompiles</h2>' in html and "Baseline findings" in html
    assert "## Correctness and recompiles" in md and f"`{M[5]}`" in md
    assert "| wrong_result | 2 | 33.3% | 2 | 33.3% |" in md
    assert "<th class=\"num\">wrong results</th>" in html and "(unsafe: not filed)" in md


def test_the_sweep_text_and_json_carry_the_columns(tmp_path: Path, capsys) -> None:
    conn = db.connect(tmp_path / "s.sqlite")
    run_id = sc.record_nightly(conn, "2026-11-20", {m: {} for m in M}, calls=night_calls(), configs=CONFIGS,
                               kind="sweep")
    run = runs.get_run(conn, run_id)
    sweep_cli._show(conn, [run], as_json=False)
    text = capsys.readouterr().out
    assert "wrong_result         2   33.3% of judged" in text and "more_recompiles      2   33.3% of judged" in text
    assert "Baseline findings" in text and "wrong_result: second_size: last_hidden_state" in text
    row = next(line for line in text.splitlines() if line.startswith(M[0]) and CSO in line)
    assert row.split()[3:8] == ["no_effect", "3", "3", "wrong_result", "more_recompiles"]
    sweep_cli._show(conn, [run], as_json=True)
    doc = json.loads(capsys.readouterr().out)
    mine = next(e for e in doc["effects"] if e["model"] == M[0] and e["config"] == CSO)
    assert (mine["correctness"], mine["recompile"]) == ("wrong_result", "more_recompiles")
    assert next(o for o in doc["outcomes"] if o["model"] == M[0] and o["config"] == CSO)["calls"][2]["accuracy"] == "wrong"


def test_a_sweep_without_calls_prints_no_new_column(tmp_path: Path, capsys) -> None:
    conn = db.connect(tmp_path / "s.sqlite")
    run_id = sc.record_nightly(conn, "2026-11-20", sc.corpus(6), kind="sweep")
    sweep_cli._show(conn, [runs.get_run(conn, run_id)], as_json=False)
    text = capsys.readouterr().out
    assert "correctness" not in text and "of judged" not in text and "Baseline findings" not in text
