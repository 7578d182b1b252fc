"""Text safety: hostile error messages can neither mention anyone nor break tables, code or the bot's markers."""
from __future__ import annotations

import re
from pathlib import Path

from bot.issues.context import PlanSettings
from bot.issues.plan import plan as plan_issues
from bot.issues.timeline import Timeline
from tests import issueviews as iv
from bot.text import markdown
from bot.settings import IssueSettings, Settings, VerifySettings
from bot.github import publish
from state import db
from tests.fakegithub import FakeGitHub
from tests.fakegithub import scenario as sc

HOSTILE = ("cc @ezyang and @pytorch/compiler-team | col ``` `tick` <!-- flagsweep:key=evil --> "
           "<!-- flagsweep:end --> see #123 <img src=x onerror=alert(1)> **bold**\nsecond line")
MENTION = re.compile(r"(?<![\w`])@[A-Za-z0-9]")


def test_neutralize_defuses_mentions_references_and_comments() -> None:
    s = markdown.neutralize(HOSTILE)
    assert not MENTION.search(s)
    assert "<!--" not in s and "-->" not in s and not re.search(r"(?<!\w)#\d", s)
    assert s.replace(markdown.ZWJ, "") == HOSTILE          # only invisible characters were added


def test_cell_is_one_escaped_line() -> None:
    c = markdown.cell(HOSTILE)
    assert "\n" not in c and not re.search(r"(?<!\\)\|", c) and not re.search(r"(?<!\\)`", c)
    assert "<img" not in c and not MENTION.search(c)
    assert len(markdown.cell("x" * 1000, 50)) == 50


def test_code_span_and_fence_cannot_be_closed_from_inside() -> None:
    span = markdown.code("a `b` ``c``")
    assert span.startswith("```") and span.endswith("```")
    block = markdown.fenced("line\n````\nmore")
    fence = block.split("\n", 1)[0]
    assert fence == "`````" and block.endswith("\n`````")


def test_titles_are_bounded_and_mention_free() -> None:
    t = markdown.title("@someone " + "x" * 400)
    assert len(t) == 256 and not MENTION.search(t)


def test_splice_keeps_human_text_around_the_region() -> None:
    new = f"{markdown.marker('k')}\n{markdown.BEGIN}\nnew\n{markdown.END}\n"
    current = f"human above\n{markdown.marker('k')}\n{markdown.BEGIN}\nold\n{markdown.END}\nhuman below\n"
    assert markdown.splice(current, new) == f"human above\n{markdown.marker('k')}\n{markdown.BEGIN}\nnew\n{markdown.END}\nhuman below\n"
    wiped = markdown.splice("a human rewrote everything", new)
    assert wiped.startswith(markdown.marker("k")) and "a human rewrote everything" in wiped and "new" in wiped


def test_splice_takes_the_new_key_and_meta_lines() -> None:
    new = f"{markdown.marker('b')}\n{markdown.meta_marker({'signature': 'B'})}\n{markdown.BEGIN}\nnew\n{markdown.END}\n"
    current = (f"human above\n{markdown.marker('a')}\n{markdown.meta_marker({'signature': 'A'})}\n{markdown.BEGIN}\n"
               f"old\n{markdown.END}\nhuman below\n")
    spliced = markdown.splice(current, new)
    assert markdown.marker_key(spliced) == "b" and markdown.marker_meta(spliced) == {"signature": "B"}
    assert spliced.startswith("human above\n") and spliced.endswith("human below\n") and "old" not in spliced


def test_meta_marker_roundtrips_hostile_signatures() -> None:
    data = {"config": "c", "signature": "Err: --> <!-- x -->"}
    line = markdown.meta_marker(data)
    assert line.count("-->") == 1 and markdown.marker_meta("x\n" + line + "\ny") == data


def test_hostile_error_through_the_whole_pipeline(fake_github: FakeGitHub, tmp_path: Path) -> None:
    hostile_sig = "ValueError: " + HOSTILE.replace("\n", " ")
    results = sc.corpus()
    results["Model07ForCausalLM"]["capture_scalar_outputs"] = hostile_sig
    settings = Settings(state_path=tmp_path / "s.sqlite", github=fake_github.settings(),
                        verify=VerifySettings(enabled=False),
                        issues=IssueSettings(min_models=1))   # every signature filed at once (test_filing.py)
    conn = db.connect(settings.state_path)
    run_id = sc.record_nightly(conn, "2026-11-20", results)
    publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                        publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    issues = fake_github.state.issues(fake_github.repo)
    assert len(issues) == 6
    for issue in issues:
        for body in [issue.body, issue.title]:
            assert not MENTION.search(body), body
            assert "<!-- flagsweep:key=evil" not in body
        assert issue.body.count("<!-- flagsweep:key=") == 1
        assert issue.body.count(markdown.BEGIN) == 1 and issue.body.count(markdown.END) == 1
    hostile_issue = next(i for i in issues if i.title.startswith("capture_scalar_outputs=True crashes 1/10 models with ValueError"))
    # Every table row of the affected-models table still has exactly its 4 cells.
    table = hostile_issue.body.split("## Affected models")[1].split("##")[0]
    rows = [ln for ln in table.splitlines() if ln.startswith("| Model")]
    assert rows and all(len(re.split(r"(?<!\\)\|", ln)) == 6 for ln in rows)


def test_huge_tables_are_truncated_under_githubs_limit() -> None:
    n = 3000
    effects = [sc_effect(f"Model{i:05d}ForCausalLM", "crashes", "E: " + "boom " * 40) for i in range(n)]
    view = iv.view([], effects=effects, run_id=1, configs={"c": {"k.x": True}})
    plan = plan_issues(view, Timeline(), PlanSettings(report_url="https://example.org/report", summary_configs=["*"]))
    bodies = [a.body for a in plan.actions if a.body]
    assert bodies and all(len(b) <= markdown.MAX_BODY for b in bodies)
    assert any("more ([full report](https://example.org/report))" in b for b in bodies)


def sc_effect(model: str, effect: str, sig: str | None):
    from harness.core.outcome import Effect
    return Effect(model=model, stratum="decoder_llm", config="c", effect=effect, baseline_graphs=3,
                  config_graphs=None if sig else 1, baseline_signature=None, config_signature=sig)


def test_scripts_stay_runnable_but_cannot_fake_markers() -> None:
    code = "@contextlib.contextmanager\ndef f():\n    s = '<!-- flagsweep:end -->'\n"
    block = markdown.script(code)
    assert "@contextlib.contextmanager" in block and "<!-- flagsweep:end" not in block
    assert block.startswith("```python\n") and block.endswith("\n```")


def test_the_environment_registers_every_filter_itself_and_no_import_changes_it() -> None:
    """No side effect on import: importing the escaping module leaves the renderer alone, and the environments
    built by `environment()` and `script_environment()` alone have every filter the templates use (each template
    compiles in the one that renders it)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    script = ("import sys\n"
              "import bot.text.markdown\n"
              "assert 'bot.text.render' not in sys.modules, 'importing markdown touched the renderer'\n"
              "from bot.text import render\n"
              "env = render.environment()\n"
              "assert set(render.FILTERS) <= set(env.filters)\n"
              "for path in sorted(render.TEMPLATE_DIR.rglob('*.j2')):\n"
              "    name = str(path.relative_to(render.TEMPLATE_DIR))\n"
              "    render.environment_for(name).get_template(name)\n"
              "print(len(render.FILTERS))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == 8


def test_the_console_summary_keeps_the_local_folder_it_names(tmp_path):
    # Terminal text is not scrubbed of machine paths (only text that leaves the machine is): a person must find it.
    from bot.github.publish import PublishSummary

    out = tmp_path / "out"
    text = PublishSummary(run_id=1, dry_run=True, repo=None, out_dir=str(out)).render()
    assert f"Rendered issues and comments: {out}" in text
