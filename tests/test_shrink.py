"""Minimal reproducers (bot/verify/shrink.py): only same-signature candidates are kept, the budget stops it, the
stored verdict makes a second verification free. A twin runner stands in for the subprocess here (it renders the real script and
answers like a crash that needs a minimum size); tests/test_shrink_real.py shrinks the real MimiModel crash."""
from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from bot.github import publish
from bot.pipeline import steps
from bot.verify import oracle, reproducers, shrink
from bot.text.render import render
from bot.verify.context import StepContext
from bot.verify.script import render_script
from bot.verify.steps import Under, VerifySteps
from harness.engine.script_runner import ScriptResult
from bot.settings import Settings
from state import db, runs, verdicts
from state.verdicts import Shrink, Verdict
from tests.fakegithub import scenario as sc
from tests.helpers_verify import (BUILD, PY, RUN, SIG, Twin, build_of, five_model_groups, sig_twin, store_run,
                                  verify_setup)

CRASH = oracle.Crash({}, {}, "count", "cpu", SIG)   # what the twin's reproducer is judged against


def run_shrink(twin: Twin, budget: float = 600.0, **kw: Any) -> shrink.Shrunk:
    original = twin(BUILD, Under({}, "count", "cpu"), PY, 1.0)
    return shrink.minimise(BUILD, original, shrink.crash_judge(CRASH, PY, twin), shrink.Limits(budget, **kw))


def test_only_candidates_that_fail_with_the_same_signature_are_kept() -> None:
    twin = Twin()
    small = run_shrink(twin)
    c, spec = small.build.config, small.build.spec
    assert c["num_hidden_layers"] == 1 and c["text_config"]["num_hidden_layers"] == 1
    assert c["text_config"]["layer_types"] == ["full"]                     # kept consistent with the layer count
    assert c["num_quantizers"] < 32 and c["hidden_size"] < 64 and c["hidden_size"] % c["num_attention_heads"] == 0
    assert spec["input_values"]["shape"][0] == 1 and 960 <= spec["input_values"]["shape"][2] < 8000
    assert "sliding_window" in c and "padding_mask" in spec                # their removal changed the outcome
    assert "use_cache" in c and small.stats["defaulted"] == 0              # defaults go together, with the window
    assert spec["input_ids"]["high"] <= c["vocab_size"] < 1000 and c["vocab_size"] > c["pad_token_id"]
    others = [r for r in twin.results[1:] if r.signature != SIG]
    assert others and small.stats["tries"] == len(twin.calls) - 1         # some tries were rejected
    assert small.stats["kept"] == sum(1 for r in twin.results[1:] if r.signature == SIG)
    assert twin.calls[-1] == small.build or twin.results[-1].signature != SIG
    # The embedded script is the smallest kept one, and it is what the twin answered SIG for.
    assert small.script == render_script(small.build, {}) and ast.parse(small.script)
    st = small.stats
    assert st["after"]["parameters"] < st["before"]["parameters"] and st["stopped"] == "done"
    assert st["after"]["data_lines"] < st["before"]["data_lines"]
    assert ["num_hidden_layers", 2, 1] in st["rows"]


def test_other_config_fields_go_to_their_defaults_when_the_crash_stays() -> None:
    small = run_shrink(Twin(needs_window=False))
    assert "use_cache" not in small.build.config and "sliding_window" not in small.build.config
    assert small.stats["defaulted"] == 2 and small.build.config["pad_token_id"] == 3   # token ids are kept


def test_the_budget_stops_it_before_a_try_would_overrun() -> None:
    now = [0.0]
    twin = Twin(clock=now, cost=10.0)      # each try is three oracle runs (eager, baseline, flag): 30 s
    original = twin(BUILD, Under({}, "count", "cpu"), PY, 1.0)
    now[0] = 0.0
    small = shrink.minimise(BUILD, original, shrink.crash_judge(CRASH, PY, twin, clock=lambda: now[0]),
                            shrink.Limits(100.0, clock=lambda: now[0]))
    # Tries start at 0, 30 and 60 s; at 90 s the next (30 s, like the last) would end past 100 s.
    assert small.stats["tries"] == 3 and small.stats["stopped"] == "budget" and now[0] == 90.0
    assert oracle.reproduces(ScriptResult(status="error", signature=SIG), SIG)
    assert twin.modes[1:4] == ["eager", "baseline", "flag"]                        # cheapest first
    assert twin(small.build, Under({}, "count", "cpu"), PY, 1.0)[1].signature == SIG   # what it kept still fails
    capped = run_shrink(Twin(), max_tries=2)
    assert capped.stats["tries"] == 2 and capped.stats["stopped"] == "tries"


def test_a_candidate_the_runner_cannot_render_is_rejected() -> None:
    twin = Twin()

    def picky(b, *args):   # (the twin records flag runs only)
        if b.config["num_hidden_layers"] == 1:
            raise ValueError("no such config field")
        return twin(b, *args)

    original = twin(BUILD, Under({}, "count", "cpu"), PY, 1.0)
    small = shrink.minimise(BUILD, original, shrink.crash_judge(CRASH, PY, picky), shrink.Limits(600.0))
    assert small.build.config["num_hidden_layers"] == 2 and small.stats["kept"] >= 1


def _verdict(shrunk: Shrink | None = None) -> Verdict:
    return Verdict("cso", SIG, "MimiModel", "fp", "2.13.0", "abc", "confirmed", script="s", shrunk=True, shrink=shrunk)


def test_shrink_stats_render_in_the_tracking_issue() -> None:
    small = run_shrink(Twin())
    text = render("tracking_shrink.md.j2", repro=_verdict(Shrink(small.build, small.stats)))
    assert text.startswith("Minimised: ") and "`num_hidden_layers` 2 → 1" in text
    assert f"Parameters 49 k → {small.stats['after']['parameters']}" in text
    assert f"({small.stats['tries']} tries, {small.stats['kept']} kept" in text
    none = {**small.stats, "kept": 0, "rows": []}
    assert "Not minimised" in render("tracking_shrink.md.j2", repro=_verdict(Shrink(BUILD, none)))
    assert render("tracking_shrink.md.j2", repro=_verdict()).strip() == ""


# ---- through verify_all and the real verify step and publish path -------------------------------------


def test_verify_all_stores_the_shrink_and_a_second_call_runs_nothing(tmp_path: Path) -> None:
    outs, groups, builds = verify_setup()
    conn = db.connect(tmp_path / "state.sqlite")
    twin = Twin()
    first = reproducers.verify_all(StepContext.of(conn, RUN, builds,
                                                  seams=VerifySteps(run=sig_twin(twin)), shrink_budget=600.0),
                                   groups, outs)
    assert len(groups) == 3 and len(twin.calls) > 3                   # verified, then shrunk
    for found in first.values():
        assert found.status == "confirmed" and found.shrunk
        small = found.shrink
        assert small is not None and '"num_hidden_layers": 1' in found.script
        assert small.stats["after"]["parameters"] < small.stats["before"]["parameters"]
        assert small.build.config["num_hidden_layers"] == 1 and small.build.model == found.model
        assert verdicts.get(conn, found.key) == found                  # stored as it came out, shrink included
    n = len(twin.calls)
    again = reproducers.verify_all(StepContext.of(conn, RUN, builds,
                                                  seams=VerifySteps(run=sig_twin(twin)), shrink_budget=600.0),
                                   groups, outs)
    assert again == first and len(twin.calls) == n                     # the quiet nightly: zero runs


def test_a_verdict_stored_without_shrinking_is_shrunk_once_when_the_budget_is_on(tmp_path: Path) -> None:
    outs, groups, builds = verify_setup()
    conn = db.connect(tmp_path / "state.sqlite")
    twin = Twin()
    plain = reproducers.verify_all(StepContext.of(conn, RUN, builds, seams=VerifySteps(run=sig_twin(twin))),
                                   groups, outs)
    assert len(twin.calls) == 3 and all(not v.shrunk and v.shrink is None for v in plain.values())
    shrunk = reproducers.verify_all(StepContext.of(conn, RUN, builds,
                                                   seams=VerifySteps(run=sig_twin(twin)), shrink_budget=600.0),
                                    groups, outs)
    assert all(v.shrink for v in shrunk.values())
    n = len(twin.calls)
    reproducers.verify_all(StepContext.of(conn, RUN, builds,
                                          seams=VerifySteps(run=sig_twin(twin)), shrink_budget=600.0),
                           groups, outs)
    assert len(twin.calls) == n


@pytest.fixture
def stored_run(tmp_path: Path):
    conn, run_id = store_run(tmp_path)
    yield conn, run_id
    conn.close()


def test_second_publish_of_the_same_run_runs_no_reproducer(stored_run, tmp_path: Path) -> None:
    """The real verify step and publish path (dry run): the first verifies and shrinks, the second runs nothing."""
    conn, run_id = stored_run
    twin = Twin()
    seams = VerifySteps(run=sig_twin(twin))
    settings = Settings(state_path=tmp_path / "state.sqlite")
    assert settings.verify.shrink_budget == 150.0 and settings.verify.enabled    # on by default
    out = tmp_path / "out"
    steps.verify(conn, run_id, settings, seams=seams)
    publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(out),
                        publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(out)))
    n = len(twin.calls)
    assert n > 3
    plan = json.loads((out / "plan.json").read_text())
    tracking = [a for a in plan["actions"] if a["action"] == "create" and "crashes" in (a.get("title") or "")]
    body = (out / tracking[0]["file"]).read_text()
    assert "Minimised: " in body and '"num_hidden_layers": 1' in body and '"num_hidden_layers": 2' not in body
    steps.verify(conn, run_id, settings, seams=seams)
    publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(tmp_path / "out2"),
                        publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(tmp_path / "out2")))
    assert len(twin.calls) == n                                         # zero runs: all from the store
    assert (tmp_path / "out2" / tracking[0]["file"]).read_text() == body


def test_shrink_budget_setting_loads_and_zero_turns_it_off(tmp_path: Path) -> None:
    from bot import settings as settings_mod

    path = tmp_path / "s.toml"
    path.write_text("[verify]\nshrink_budget = 0\n")
    assert settings_mod.load(path, env={}).verify.shrink_budget == 0.0
    outs, groups = five_model_groups()
    twin = Twin()
    v = reproducers.verify_all(StepContext.of(db.connect(tmp_path / "state.sqlite"), RUN, {m: build_of(m) for m in sc.corpus(5)},
                                              seams=VerifySteps(run=sig_twin(twin)), shrink_budget=0.0),
                               groups, outs)
    assert len(twin.calls) == len(groups) and all(not e.shrunk for e in v.values())


def test_a_step_that_keeps_the_signature_but_breaks_eager_is_rejected() -> None:
    """Cutting one input's batch and not the other's keeps the compiled crash (Dynamo fails first) but makes the
    inputs invalid in eager, like Qwen2-VL's pixel_values cut under an image_grid_thw still saying two images."""
    twin = Twin(eager_needs_batch=True)
    small = run_shrink(twin)
    spec = small.build.spec
    assert spec["input_values"]["shape"][0] == spec["input_ids"]["shape"][0]        # never a mismatched batch
    mismatched = [b for b in twin.calls if b.spec["input_values"]["shape"][0] != b.spec["input_ids"]["shape"][0]]
    assert not mismatched                 # eager ran first and rejected them: the flag run never started for them
    assert "eager" in twin.modes and small.stats["kept"] >= 1 and small.stats["tries"] > small.stats["kept"]
    loose = run_shrink(Twin())           # without the oracle's eager check the same search would keep a mismatch
    assert loose.build.spec["input_values"]["shape"][0] == 1


def test_the_script_takes_the_oracles_mode() -> None:
    """One script, three modes: eager never calls torch.compile, baseline compiles under the baseline settings."""
    script = render_script(BUILD, {"torch._dynamo.config.capture_scalar_outputs": True},
                           baseline={"torch._dynamo.config.cache_size_limit": 8})
    tree = ast.parse(script)
    forward = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run_forward")
    eager_branch = forward.body[1]
    assert isinstance(eager_branch, ast.If) and "eager" in ast.unparse(eager_branch.test)
    assert "torch.compile" not in ast.unparse(eager_branch.body[0]) and "model(**inputs)" in ast.unparse(eager_branch)
    assert "torch.compile" in ast.unparse(forward.body[2:])
    line = next(x for x in script.splitlines() if x.startswith("BASELINE_SETTINGS = "))
    assert "cache_size_limit" in line and "capture_scalar_outputs" not in line and "sys.argv[1:2]" in script
