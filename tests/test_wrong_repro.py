"""A wrong result's accuracy reproducer, with real compiles: TinyLM (tests/accuracy_models.py) under
capture_scalar_outputs gives a wrong first call. Its script, run as filed in a fresh interpreter, fails in
torch.testing.assert_close and passes with torch.compile replaced by the identity; the oracle keeps it and refuses
a case whose baseline fails too or whose eager forward is noisy; a shrink keeps "baseline passes, flag fails"; and
a night with the wrong result publishes a tracking issue that shows the verified script.

Scripts run under tests/accuracy_python.py's interpreter (the test models exposed in transformers' namespace, where
a rendered script looks its classes up); each run starts torch and transformers (some seconds on an idle core).
"""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from bot.github import publish
from bot.pipeline import steps
from bot.settings import IssueSettings, Settings, VerifySettings
from bot.verify import oracle, shrink
from bot.verify.steps import render_and_check
from bot.verify.wrong_script import MISMATCH, Case, ScenarioRules, render_wrong
from harness.core.calls import Call
from harness.core.model_build import ModelBuild
from harness.engine import engine, scenarios
from harness.engine.engine import SweepRequest
from harness.core.options import Accuracy, SweepOptions
from harness.engine.script_runner import ScriptResult, run_script
from state import db, runs
from tests import accuracy_models as am
from tests.accuracy_python import interpreter
from tests.fakegithub import FakeGitHub
from tests.fakegithub import scenario as sc

CSO = {"torch._dynamo.config.capture_scalar_outputs": True}
FIRST = "wrong_result: first: last_hidden_state"
HOOK_GUARDS = {"torch._dynamo.config.skip_nnmodule_hook_guards": False}
TINY = ModelBuild("TinyLM", "TinyLMConfig", dict(am.CONFIG), am.SPEC, 0, "fp-TinyLM", "5.23.0")


def case(signature: str = FIRST) -> Case:
    return Case(signature, CSO, {}, "count", "cpu", 1e-3, 1e-3)


@pytest.fixture(scope="module")
def python(tmp_path_factory) -> str:
    return interpreter(tmp_path_factory.mktemp("python"))


def test_the_script_is_short_plain_and_ends_in_assert_close_with_the_run_tolerances() -> None:
    for scenario in ("first", "second_size", "hook_added", "weights_updated"):
        script = render_wrong(TINY, case(f"wrong_result: {scenario}: logits"))
        ast.parse(script)
        lines = script.rstrip("\n").splitlines()
        assert len(lines) < 100 and "flagsweep" not in "\n".join(lines[5:]) and "FLAGSWEEP_RESULT" not in script
        assert lines[-1] == 'torch.testing.assert_close(compiled_out["logits"], eager_out["logits"], rtol=0.001, atol=0.001)'
        assert "eager = copy.deepcopy(model)" in script and 'torch.compile(model, backend="eager")' in script
        assert "torch._dynamo.config.capture_scalar_outputs = True" in script           # the flag: one line
        assert "capture_scalar_outputs" not in render_wrong(TINY, case(f"wrong_result: {scenario}: logits"),
                                                            baseline=True)


def test_the_scenarios_steps_come_from_the_workers_own_definitions() -> None:
    rules = ScenarioRules()
    assert rules.hook_scale == scenarios.HOOK_SCALE and rules.weight_step == scenarios.WEIGHT_STEP
    assert rules.weight_seed == "SEED + 1"                        # scenarios.weights_moved's generator seed
    hooked = render_wrong(TINY, case("wrong_result: hook_added: logits"))
    assert f"torch.linspace({scenarios.HOOK_SCALE[0]}, {scenarios.HOOK_SCALE[1]}, output.shape[-1]" in hooked
    stepped = render_wrong(TINY, case("wrong_result: weights_updated: logits"))
    assert f"manual_seed(SEED + 1)" in stepped and f"* {scenarios.WEIGHT_STEP})" in stepped


@pytest.mark.compile
def test_tinylm_fails_as_filed_passes_with_the_identity_and_the_oracle_keeps_it(python: str) -> None:
    script = render_wrong(TINY, case())
    plain = run_script(script, python, timeout=300)               # `python repro.py`, as a maintainer runs it
    assert plain.returncode == 1 and "AssertionError: Tensor-likes are not close!" in plain.stderr_tail, plain
    seen: dict[str, ScriptResult] = {}

    def check(built, c, py, timeout, mode="flag"):
        rendered, seen[mode] = render_and_check(built, c, py, timeout, mode)
        return rendered, seen[mode]

    judged = oracle.judge_wrong(TINY, case(), python, check=check, timeout=300)
    assert judged.passed and judged.script == script, judged.reason
    assert seen["eager"].status == "ok" and seen["eager"].mode == "eager"   # torch.compile replaced by the identity
    assert seen["baseline"].status == "ok" and seen["flag"].status == "error"
    assert judged.result.exception == MISMATCH and judged.result.parameters == 8 * 50 + 8 * 8 + 8 + 8 * 4 + 4


@pytest.mark.compile
def test_the_identity_passes_and_the_oracle_refuses_a_baseline_that_fails_too_and_a_noisy_eager(python: str) -> None:
    asked: list[str] = []

    def check(built, c, py, timeout, mode="flag"):
        asked.append(mode)
        return render_and_check(built, c, py, timeout, mode)

    # hook_added: Dynamo skips hook guards by default, so the baseline misses the hook too (a baseline finding).
    hooked = oracle.judge_wrong(TINY, case("wrong_result: hook_added: logits"), python, check=check, timeout=300)
    assert asked == ["eager", "baseline"]                          # the identity passed, then the baseline failed
    assert (hooked.passed, hooked.failed) == (False, "baseline") and "differ from eager's too" in hooked.reason
    noisy = dataclasses.replace(TINY, model="TinyNoisyLM")
    refused = oracle.judge_wrong(noisy, case("wrong_result: first: logits"), python, check=check, timeout=300)
    assert (refused.passed, refused.failed) == (False, "eager") and "eager run twice disagrees" in refused.reason


def test_a_crash_under_the_flag_is_not_a_reproduced_wrong_result() -> None:
    ok = ScriptResult("ok")

    def crashing(built, c, py, timeout, mode="flag"):
        return "s", ok if mode != "flag" else ScriptResult(
            "error", signature="RuntimeError: boom", exception="builtins.RuntimeError")

    judged = oracle.judge_wrong(TINY, case(), "py", check=crashing, timeout=60)
    assert (judged.passed, judged.failed) == (False, "flag") and "a crash is not a wrong result" in judged.reason
    judged = oracle.judge_wrong(TINY, case(), "py", check=lambda *a, **k: ("s", ok), timeout=60)
    assert not judged.passed and "passed assert_close" in judged.reason


def test_the_shrink_keeps_only_steps_where_the_baseline_passes_and_the_flag_fails() -> None:
    """A twin of the runs: the baseline differs too below hidden_size 8, the flag stops differing below vocab 20;
    every step is judged by judge_wrong, so the shrink keeps the width and stops the vocab above 20."""
    ok, differs = ScriptResult("ok", seconds=0.1), ScriptResult("error", exception=MISMATCH, seconds=0.1, signature="x")
    refused: list[str] = []

    def twin(built, c, py, timeout, mode="flag"):
        narrow, small_vocab = built.config["hidden_size"] < 8, built.config["vocab_size"] < 20
        if mode == "baseline" and narrow:
            refused.append("baseline")
        if mode == "baseline":
            return "b", differs if narrow else ok
        if mode == "eager":
            return "s", ok
        return f"script {built.config}", ok if small_vocab else differs

    def judge(built, timeout):
        return oracle.judge_wrong(built, case(), "py", check=twin, timeout=timeout)

    original = twin(TINY, case(), "py", 60)
    small = shrink.minimise(TINY, original, judge, shrink.Limits(600))
    config = small.build.config
    assert config["hidden_size"] == 8 and 20 <= config["vocab_size"] < 50, config
    assert refused and small.stats["kept"] >= 1 and small.script == f"script {config}"
    assert judge(small.build, 60).passed


@pytest.mark.compile
def test_a_real_shrink_step_keeps_baseline_passes_flag_fails(python: str) -> None:
    judge = lambda built, timeout: oracle.judge_wrong(built, case(), python, check=render_and_check, timeout=timeout)
    original = render_and_check(TINY, case(), python, 300, "flag")
    small = shrink.minimise(TINY, original, judge, shrink.Limits(600, max_tries=1))
    assert small.stats["tries"] == 1 and small.stats["kept"] == 1, small.stats   # every knob at once: kept
    st = small.stats
    assert st["after"]["parameters"] < st["before"]["parameters"] and st["rows"]
    assert small.script == render_wrong(small.build, case())


@pytest.mark.compile
def test_a_swept_wrong_result_publishes_an_issue_showing_its_verified_reproducer(python: str, tmp_path: Path) -> None:
    """A real sweep of TinyLM (its first call wrong under capture_scalar_outputs, judged by the worker), the verify
    step on the run's interpreter, and a dry-run publish: the issue's would-be body (watching after one night: a
    wrong result is confirmed by a second) shows the reproducer the oracle kept."""
    settings = Settings(state_path=tmp_path / "state.sqlite", verify=VerifySettings(shrink_budget=0))
    conn = db.connect(settings.state_path)
    options = SweepOptions(workers=1, timeout=300, python=python, extra_modules=["tests.accuracy_models"],
                           accuracy=Accuracy())
    # With hook guards on, the baseline sees the hook added after the first call: its calls are all right.
    run_id = engine.sweep(conn, SweepRequest(models=["TinyLM"], configs={sc.CSO: CSO}, options=options,
                                             base_settings=HOOK_GUARDS, progress=False)).run.id
    wrong = next(o for o in runs.outcomes(conn, run_id) if o.config == sc.CSO)
    assert [c.accuracy for c in wrong.calls][0] == "wrong" and wrong.calls[0].output == "last_hidden_state"
    verdict = steps.verify(conn, run_id, settings)[(sc.CSO, FIRST)].verdict
    assert verdict is not None and verdict.status == "confirmed" and verdict.model == "TinyLM", verdict
    out = tmp_path / "out"
    publish.publish_run(conn, settings, run_id, dry_run=True, out_dir=str(out),
                        publisher=publish.open_publisher(settings, dry_run=True, out_dir=str(out)))
    [held] = sorted((out / "pending").glob("watching-t*.md"))
    body = held.read_text()
    assert f"Signature: `{FIRST}`" in body and "Not verified" not in body
    assert "Verified in fresh interpreters" in body and "with `torch.compile` replaced by the identity it passes" in body
    assert "```python" in body and "torch._dynamo.config.capture_scalar_outputs = True" in body
    assert "torch._dynamo.config.skip_nnmodule_hook_guards = False" in body        # the run's base setting, shared
    assert 'torch.testing.assert_close(compiled_out["last_hidden_state"], eager_out["last_hidden_state"]' in body


def _wrong_calls() -> list[Call]:
    return [Call("first", accuracy="wrong", output="last_hidden_state", detail="max abs diff 1.00e-01"),
            Call("second_size", accuracy="close"), Call("hook_added", accuracy="exact"),
            Call("weights_updated", accuracy="exact")]


def _twin_night(conn, date: str) -> int:
    """TinyLM wrong on its first call under capture_scalar_outputs, and under capture_dynamic_output_shape_ops
    (whose baseline the twin below says is wrong too); each with a second wrong model for the evidence rule."""
    models = {"TinyLM": {"baseline": 1}, **{m: {} for m in sc.M[1:4]}}
    right = [Call(s, accuracy="exact") for s in ("first", "second_size", "hook_added", "weights_updated")]
    made = {(m, c): right for m in models for c in sc.CONFIGS}
    made.update({(m, c): _wrong_calls() for m in ("TinyLM", sc.M[1]) for c in (sc.CSO, sc.CDO)})
    run_id = sc.record_nightly(conn, date, models, env={**sc.ENV, "python": "/nightly/bin/python"}, calls=made)
    runs.record_model(conn, run_id, TINY)
    conn.commit()
    return run_id


def test_the_step_shrinks_a_wrong_result_and_the_issue_shows_it_or_why_it_is_not_verified(
        fake_github: FakeGitHub, tmp_path: Path) -> None:
    """The verify step over a twin of the runs (no torch): the CSO case is kept and shrunk while its vocab stays
    at 20 or more; the CDO case's baseline differs too, so its issue says it is not verified, and why."""
    from bot.verify.steps import VerifySteps

    ok, differs = ScriptResult("ok", seconds=0.1), ScriptResult("error", exception=MISMATCH, seconds=0.1, signature="x")
    modes: list[tuple[bool, str]] = []

    def twin(built, c, py, timeout, mode="flag"):
        assert py == "/nightly/bin/python" and (c.rtol, c.atol) == (1e-3, 1e-3)   # the run's interpreter, tolerances
        cdo = "torch._dynamo.config.capture_dynamic_output_shape_ops" in c.settings
        modes.append((cdo, mode))
        script = render_wrong(built, c, baseline=mode == "baseline")
        if mode == "eager":
            return script, ok
        if mode == "baseline":
            return script, differs if cdo else ok
        return script, differs if built.config["vocab_size"] >= 20 else ok

    fake = fake_github
    settings = Settings(state_path=tmp_path / "state.sqlite", github=fake.settings(retry_backoff=0.0),
                        issues=IssueSettings(summary_configs=[sc.CSO, sc.CDO]), verify=VerifySettings(shrink_budget=60))
    conn = db.connect(settings.state_path)
    for date in ("2026-11-20", "2026-11-21"):
        run_id = _twin_night(conn, date)
        steps.verify(conn, run_id, settings, seams=VerifySteps(check=twin))
        publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                            publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    issues = {i.title.split(" gives")[0]: i.body for i in fake.state.issues(fake.repo) if "gives wrong results" in i.title}
    kept, refused = issues["capture_scalar_outputs=True"], issues["capture_dynamic_output_shape_ops=True"]
    assert "Verified in fresh interpreters" in kept and "Minimised: " in kept and "`vocab_size` 50 → " in kept
    assert "fails in assert_close under the flag" in kept and "torch.testing.assert_close(compiled_out" in kept
    assert "Not verified: baseline failed: compiled under the baseline settings the outputs differ" in refused
    assert "```python" not in refused
    assert [m for cdo, m in modes if cdo] == ["eager", "baseline"]   # stored: the second night ran nothing again


def _cli(tmp_path: Path, *args: str):
    import os
    import subprocess
    import sys

    root = Path(__file__).parent.parent
    return subprocess.run([sys.executable, "-m", "bot.cli.main", "--state", str(tmp_path / "s.sqlite"), "repro", *args],
                          capture_output=True, text=True, timeout=600, cwd=str(tmp_path),
                          env={**os.environ, "PYTHONPATH": str(root)})


def test_repro_refuses_a_wrong_result_it_cannot_name_in_one_line(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "BertModel", "--config", "capture_scalar_outputs", "--wrong", "later:logits")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "expected SCENARIO:OUTPUT with SCENARIO one of first, second_size" in proc.stderr


@pytest.mark.compile
def test_repro_renders_the_accuracy_reproducer_of_a_wrong_result_item(tmp_path: Path) -> None:
    out = tmp_path / "repro.py"
    proc = _cli(tmp_path, "BertModel", "--config", "capture_scalar_outputs", "--wrong", "weights_updated:pooler_output",
                "-o", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    script = out.read_text()
    ast.parse(script)
    assert "config = transformers.BertConfig.from_dict(dict(" in script and "step_weights(model)" in script
    assert "torch._dynamo.config.capture_scalar_outputs = True" in script
    assert script.rstrip().endswith('torch.testing.assert_close(compiled_out["pooler_output"], '
                                    'eager_out["pooler_output"], rtol=0.001, atol=0.001)')


def test_repro_refuses_an_output_that_is_no_output_path_before_anything_runs(tmp_path: Path) -> None:
    """Issue 38: the accuracy reproducer's OUTPUT was written into its comment lines as given (code on --run)."""
    proc = _cli(tmp_path, "BertModel", "--config", "capture_scalar_outputs", "--wrong",
                "hook_added:x\nimport os; os.system('touch pwned') #", "--run")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "is not an output path (name, [0], name[1]" in proc.stderr and not (tmp_path / "pwned").exists()


@pytest.mark.compile
def test_repro_names_the_models_outputs_when_output_is_none_of_them(tmp_path: Path) -> None:
    """Issue 38: `--wrong hook_added:nosuchoutput --run` rendered a script that failed with KeyError, exit 0."""
    proc = _cli(tmp_path, "BertModel", "--config", "capture_scalar_outputs", "--wrong", "hook_added:nosuchoutput",
                "--run")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-2000:]
    assert "'nosuchoutput': BertModel has no such output; its outputs: last_hidden_state, pooler_output" in proc.stderr


def test_repro_names_the_closest_parameters_when_a_train_gradient_is_none_of_them(tmp_path: Path) -> None:
    """`--modes train --wrong first:grad.<name>` with a name BertModel has no parameter of rendered a script that failed
    with KeyError when run: it is refused in one line naming the few parameters closest to it, and nothing is written
    (the model is built in a worker, nothing run)."""
    out = tmp_path / "repro.py"
    proc = _cli(tmp_path, "BertModel", "--config", "capture_scalar_outputs", "--modes", "train", "--wrong",
                "first:grad.encoder.layer.0.attention.self.query.wieght", "-o", str(out))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-2000:]
    assert ("BertModel has no parameter 'encoder.layer.0.attention.self.query.wieght'; the closest of its 39: "
            "encoder.layer.0.attention.self.query.weight, ") in proc.stderr and not out.exists()


def test_a_wrong_result_script_that_fails_before_its_comparison_is_a_failed_repro_run(capsys) -> None:
    from bot.cli.zoo import _wrong_run_status

    assert _wrong_run_status(ScriptResult("error", exception=MISMATCH)) == 0       # reproduced
    assert _wrong_run_status(ScriptResult("ok")) == 0                               # ran, passed
    assert capsys.readouterr().err == ""
    assert _wrong_run_status(ScriptResult("error", exception="builtins.KeyError")) == 1
    assert _wrong_run_status(ScriptResult("timeout")) == 1
    assert capsys.readouterr().err.count("failed before its comparison") == 2


def test_a_crash_script_that_ends_without_its_result_line_is_a_failed_repro_run(capsys) -> None:
    """The last stop's finding: `repro --run` exited 0 for a crash reproducer that hung or could not start."""
    from bot.cli.zoo import _crash_run_status

    assert _crash_run_status(ScriptResult("error", signature="x")) == 0   # its compile raised: reproduced
    assert _crash_run_status(ScriptResult("ok")) == 0                      # ran, did not crash
    assert capsys.readouterr().err == ""
    for ended in ("timeout", "killed", "bad_output", "not_started"):
        assert _crash_run_status(ScriptResult(ended, error="why")) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4 and all("ended without its result line" in line and line.endswith(": why)") for line in err)
