"""Baseline findings grouped by cause (harness/core/defaults.py over dynamo_defaults.toml): the reviewed table read
strictly and checked against the installed torch; the rule that folds a run's findings under the Dynamo default that
explains them, with what the run's sweep of the changing setting did; one line per cause in a rendered summary issue,
every model kept in the report, one line per cause after a sweep. Plain data and a real store; no compiles."""
from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import sweep as sweep_cli
from bot.issues.context import PlanSettings
from bot.issues.keys import summary_key
from bot.issues.plan import plan
from bot.issues.timeline import Timeline
from bot.report import report
from bot.view import run_view
from harness.core import defaults
from harness.core.calls import Call
from harness.core.outcome import NOT_READ, Outcome
from harness.core.record import RecordError
from state import db, runs
from tests.fakegithub import scenario as sc

KEY = "torch._dynamo.config.skip_nnmodule_hook_guards"
HOOKS = "dynamo.skip_nnmodule_hook_guards"        # the all-dynamo set's name for its flip
CONFIGS = {"baseline": {}, sc.CSO: sc.CONFIGS[sc.CSO], HOOKS: {KEY: False}}
M = [f"Model{i:02d}ForCausalLM" for i in range(7)]


def calls(*accuracies: str, output: str = "logits") -> list[Call]:
    """Calls in scenario order: the first, second_size, hook_added, weights_updated."""
    return [Call(s, accuracy=a, output=output if a == "wrong" else None,
                 detail="max abs diff 0.5" if a == "wrong" else None)
            for s, a in zip(("first", "second_size", "hook_added", "weights_updated"), accuracies)]


RIGHT, HOOK_WRONG = calls("exact", "close", "exact", "exact"), calls("exact", "close", "wrong", "exact")
SIZE_WRONG = calls("exact", "wrong", output="last_hidden_state")


def night_calls() -> dict[tuple[str, str], list[Call]]:
    """M00-M04 wrong after the hook under the baseline (the default's); under its flip M00-M02 are right, M03 is still
    wrong and M04 crashes (not judged). M05's baseline is wrong at the second size (no cause: one line of its own)."""
    made = {(m, c): RIGHT for m in M for c in CONFIGS}
    made.update({(m, c): HOOK_WRONG for m in M[:5] for c in ("baseline", sc.CSO)})
    made.update({(M[3], HOOKS): HOOK_WRONG, (M[5], "baseline"): SIZE_WRONG, (M[5], sc.CSO): SIZE_WRONG})
    return made


def record(conn, kind: str = "nightly") -> int:
    return sc.record_nightly(conn, "2026-11-20", {m: {HOOKS: "E: boom"} if m == M[4] else {} for m in M},
                             calls=night_calls(), configs=CONFIGS, kind=kind)


def test_the_table_names_a_real_default_of_the_installed_torch_and_the_setting_that_changes_it():
    from harness.engine.flags.space import list_here     # the engine's reader of a torch's config space

    table = defaults.load()
    space = list_here(["torch._dynamo.config"])
    for scenario, entry in table.items():
        assert entry.key in space, f"{entry.key} is not a setting of the installed torch"
        assert space[entry.key]["default"] == entry.default, f"{entry.key}: the table's default is not torch's"
        assert entry.docs.startswith("https://docs.pytorch.org/")
    hooks = table["hook_added"]
    assert (hooks.default_setting, hooks.changed_setting) == ("skip_nnmodule_hook_guards=True",
                                                              "skip_nnmodule_hook_guards=False")
    assert hooks.sets({KEY: False}) and not hooks.sets({KEY: True}) and not hooks.sets({KEY: 0})


ENTRY = ('scenario = "hook_added"\nkey = "torch._dynamo.config.skip_nnmodule_hook_guards"\ndefault = true\n'
         'changed_by = false\nwhy = "hooks are not guarded"\ndocs = "https://docs.pytorch.org/x.html"\n')


@pytest.mark.parametrize("text, said", [
    ("", "dynamo_defaults.toml: the table has no [[default]] entries"),
    ("# every entry removed\n", "the table has no [[default]] entries"),
    ("[[default]]\n" + ENTRY + "[[defaults]]\n" + ENTRY, "dynamo_defaults.toml: unknown key 'defaults'"),
    ("[[default]]\n" + ENTRY + "fix = false\n", "dynamo_defaults.toml: default #1: unknown key 'fix'"),
    ("[[default]]\n" + ENTRY.replace('docs = "https://docs.pytorch.org/x.html"\n', ""),
     "default #1: missing key 'docs'"),
    ("[[default]]\n" + ENTRY.replace("default = true", 'default = "true"'),
     "default #1: key 'changed_by': False does not change the default 'true'"),
    ("[[default]]\n" + ENTRY.replace('scenario = "hook_added"', "scenario = 3"),
     "default #1: key 'scenario' is of type int, expected str"),
    ("[[default]]\n" + ENTRY.replace("default = true", "default = [true]"),
     "default #1: key 'default' is of type list, expected bool or int or float or str"),
    ("[[default]]\n" + ENTRY.replace('"hook_added"', '"first"'), "default #1: key 'scenario': 'first' is not a later"),
    ("[[default]]\n" + ENTRY.replace("changed_by = false", "changed_by = true"),
     "default #1: key 'changed_by': True does not change the default True"),
    ("[[default]]\n" + ENTRY.replace("torch._dynamo.config.", "torch._inductor.config."),
     "default #1: key 'key': 'torch._inductor.config.skip_nnmodule_hook_guards' is not a setting under"),
    ("[[default]]\n" + ENTRY.replace("https://", "http://"), "default #1: key 'docs': 'http://"),
    ("[[default]]\n" + ENTRY + "[[default]]\n" + ENTRY, "default #2: scenario 'hook_added' is listed twice"),
    ("[[default]\n", "dynamo_defaults.toml"),                       # not TOML: the reader's line, naming the file
])
def test_a_malformed_table_is_one_line_naming_the_file_and_the_key(tmp_path: Path, text: str, said: str):
    path = tmp_path / "dynamo_defaults.toml"
    path.write_text(text)
    with pytest.raises(RecordError) as caught:
        defaults.load(path)
    assert said in str(caught.value) and "\n" not in str(caught.value)


def outcomes() -> list[Outcome]:
    """The night's outcomes as the worker stores them, with M06 wrong after the hook too and its pair under the flip
    pruned (stored with the baseline's calls, copied)."""
    made = {**night_calls(), (M[6], "baseline"): HOOK_WRONG, (M[6], HOOKS): HOOK_WRONG}
    return [Outcome(model=m, config=c, status="error" if (m, c) == (M[4], HOOKS) else "ok", graphs=3,
                    calls=made[(m, c)], reason=NOT_READ if (m, c) == (M[6], HOOKS) else None)
            for m in M for c in CONFIGS]


def test_findings_fold_under_their_cause_and_the_swept_flip_is_judged_on_the_causes_scenario():
    found = defaults.explain(outcomes(), CONFIGS, defaults.load())
    [cause] = found.causes
    assert cause.default.key == KEY and cause.models == [*M[:5], M[6]]
    [swept] = cause.swept                               # capture_scalar_outputs leaves the setting alone: not said
    assert swept.config == HOOKS and swept.right == tuple(M[:3]) and swept.wrong == (M[3],)
    assert swept.unjudged == (M[4], M[6])               # a crash, and a pair pruned (its calls are the baseline's)
    assert [(f.model, f.signature) for f in found.alone] == [(M[5], "wrong_result: second_size: last_hidden_state")]
    assert [f.model for f in found.every] == [*M[:5], M[5], M[6]]
    no_flip = defaults.explain(outcomes(), {c: s for c, s in CONFIGS.items() if c != HOOKS}, defaults.load())
    assert no_flip.causes[0].swept == () and no_flip.causes[0].models == cause.models


def test_the_summary_folds_the_cause_into_one_line_and_the_report_keeps_every_model(tmp_path: Path, capsys):
    conn = db.connect(tmp_path / "s.sqlite")
    run_id = record(conn)
    view = run_view.load(conn, run_id, None)
    body = next(a.body for a in plan(view, Timeline(), PlanSettings()).actions if a.key == summary_key(sc.CSO))
    section = body[body.index("Baseline findings"):body.index("## Trend")]
    assert ("- `hook_added` on 5 models, by Dynamo's documented default `skip_nnmodule_hook_guards=True` (" in section
            and "`skip_nnmodule_hook_guards=False` changes it ([documentation](https://docs.pytorch.org/" in section)
    assert ("  Under `skip_nnmodule_hook_guards=False` (swept as `dynamo.skip_nnmodule_hook_guards`): 3 of 5 models "
            f"right; still wrong: `{M[3]}`; 1 not judged") in section
    assert "<details><summary>The 5 models</summary>\n\n  " + ", ".join(f"`{m}`" for m in M[:5]) in section
    assert f"- `{M[5]}`: `wrong_result: second_size: last_hidden_state` (max abs diff 0.5)" in section
    assert section.count("wrong_result: hook_added") == 0 and section.count("\n- ") == 2   # one line per cause
    ctx = report.build_context(conn, run_id)
    md, html = report.render_md(ctx), report.render_html(ctx)
    for m in M[:5]:                                      # the report keeps every model, under its cause
        assert f"  - `{m}`: `wrong_result: hook_added: logits` (max abs diff 0.5)" in md
        assert f'<li class="finding" data-model="{m}">' in html
    assert f'<p class="swept" data-config="{HOOKS}">' in html and f"`{M[5]}`: `wrong_result: second_size" in md
    sweep_cli._show(conn, [runs.get_run(conn, record(conn, kind="sweep"))], False)
    text = capsys.readouterr().out
    assert "  hook_added on 5 models, by Dynamo's documented default skip_nnmodule_hook_guards=True;" in text
    assert (f"    under skip_nnmodule_hook_guards=False (swept as {HOOKS}): 3 of 5 models right; "
            f"still wrong: {M[3]}; 1 not judged") in text
    assert "    " + ", ".join(M[:5]) in text and "wrong_result: hook_added" not in text
