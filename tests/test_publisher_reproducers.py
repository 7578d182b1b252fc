"""Verified reproducers: smallest model chosen, embedded only on the same signature, verdicts stored and reused."""
from __future__ import annotations

import dataclasses

from pathlib import Path

from bot.issues.context import PlanSettings
from bot.issues.keys import tracking_key
from bot.issues.plan import plan
from bot.issues.timeline import Timeline
from bot.verify import oracle, reproducers
from bot.verify.context import StepContext
from bot.verify.steps import VerifySteps
from harness.core.effects import effects_for
from harness.core.model_build import ModelBuild
from harness.engine.script_runner import ScriptResult
from harness.core.tracking import tracking_groups
from state import db, verdicts
from state.verdicts import RunVerdict
from tests.checks_runner import answering_checks
from tests.fakegithub import scenario as sc
from tests.helpers_verify import ENV, a_run

CSO, CDO = "capture_scalar_outputs", "capture_dynamic_output_shape_ops"
def setup():
    outs = [sc.outcome(m, c, spec.get(c, spec.get("baseline", 3)), "decoder_llm")
            for m, spec in sorted(sc.corpus().items()) for c in sc.CONFIGS]
    outs[0].ops = 500                    # Model00 baseline is big: Model01 is the smallest crashing with A
    groups = tracking_groups(effects_for(outs), outs)
    builds = {m: ModelBuild(m, "X", {}, {}, 0) for m in sc.corpus()}
    return outs, groups, builds


def test_same_signature_confirms_other_does_not_and_verdicts_are_reused(tmp_path: Path) -> None:
    outs, groups, builds = setup()
    conn = db.connect(tmp_path / "state.sqlite")
    calls = []

    def runner(built, under, python, timeout, mode="flag"):
        model = built.model
        assert python == "/nightly/bin/python"            # the run's own interpreter, from its environment
        if mode != "flag":                                # every build here is valid in eager and the baseline
            return "x", ScriptResult(status="ok", graphs=1, signature=None)
        calls.append(model)
        if model == "Model01ForCausalLM":
            return "print('repro A')\n", ScriptResult(status="error", signature=sc.SIG_A, torch_version="2.14.0.dev20261121+cpu",
                                          torch_git="abc")
        if model == "Model02ForCausalLM":
            return "print('repro B')\n", ScriptResult(status="ok", graphs=1, signature=None)
        return "x", ScriptResult(status="error", signature="SomethingElse: entirely")

    v = reproducers.verify_all(StepContext.of(conn, a_run(), builds, seams=VerifySteps(run=answering_checks(runner))),
                               groups, outs)
    a, b, c = v[(CSO, sc.SIG_A)], v[(CSO, sc.SIG_B)], v[(CDO, sc.SIG_C)]
    built_on = ("2.14.0.dev20261121+cpu", "abc")
    assert a.cost.scripts == 1 and a.cost.tries == 0          # eager, baseline, flag in one run; no shrink
    a, b, c = (dataclasses.replace(x, cost=None) for x in (a, b, c))
    assert a == verdicts.Verdict(CSO, sc.SIG_A, "Model01ForCausalLM", "fp-Model01ForCausalLM", *built_on, "confirmed",
                                 script="print('repro A')\n", torch_version=built_on[0], torch_git=built_on[1])
    assert b.status == "unconfirmed" and "without crashing" in b.reason and b.script == ""
    assert c.status == "unconfirmed" and "another signature" in c.reason
    assert sorted(calls) == ["Model00ForCausalLM", "Model01ForCausalLM", "Model02ForCausalLM"]
    assert all(verdicts.get(conn, x.key) == x for x in v.values())   # each stored under its key, typed
    again = reproducers.verify_all(StepContext.of(conn, a_run(), builds,
                                                  seams=VerifySteps(run=answering_checks(runner))),
                                   groups, outs)
    assert again == v and len(calls) == 3                     # nothing re-run: all from the store
    # Another torch build is another verdict: nothing is reused.
    reproducers.verify_all(StepContext.of(conn, a_run({**ENV, "torch_git": "def"}), builds,
                                          seams=VerifySteps(run=answering_checks(runner))),
                           groups, outs)
    assert len(calls) == 6


def test_a_broken_generator_is_reported_and_not_reused(tmp_path: Path) -> None:
    outs, groups, builds = setup()
    conn = db.connect(tmp_path / "state.sqlite")
    calls = []

    def broken(*args):
        calls.append(args)
        raise RuntimeError("no such model in this transformers")

    v = reproducers.verify_all(StepContext.of(conn, a_run(), builds, seams=VerifySteps(run=broken)), groups, outs)
    assert all(x.status == "unconfirmed" and "could not be generated" in x.reason for x in v.values())
    assert all(verdicts.get(conn, x.key) is None for x in v.values())   # kept for the run, never reused
    reproducers.verify_all(StepContext.of(conn, a_run(), builds, seams=VerifySteps(run=broken)), groups, outs)
    assert len(calls) == 2 * len(groups)                                 # so the next verification tries again


def test_verdict_rules() -> None:
    assert oracle.reproduces(ScriptResult(status="timeout", signature=None), "timeout")
    nothing = ScriptResult.not_run()
    assert not oracle.reproduces(nothing, "x") and oracle.flag_problem(nothing, "x").startswith("did not report a result")


def test_an_eager_invalid_reproducer_is_not_verified(tmp_path: Path) -> None:
    """The oracle, cheapest check first: a script that fails in plain eager is stored unconfirmed, and the issue
    says which check failed; nothing after the failing check runs, and nothing claims it reproduces."""
    outs, groups, builds = setup()
    conn = db.connect(tmp_path / "state.sqlite")
    runs_seen: list[tuple[str, str]] = []

    def runner(built, under, python, timeout, mode="flag"):
        model = built.model
        runs_seen.append((model, mode))
        if model == "Model01ForCausalLM" and mode == "eager":      # the inputs are not a valid test case
            return "s", ScriptResult(status="error", signature="RuntimeError: split_with_sizes expects split_sizes")
        if model == "Model02ForCausalLM" and mode == "baseline":   # crashes without the flag too
            return "s", ScriptResult(status="error", signature=sc.SIG_B)
        if mode != "flag":
            return "s", ScriptResult(status="ok", signature=None)
        sig = {"Model01ForCausalLM": sc.SIG_A, "Model02ForCausalLM": sc.SIG_B}.get(model, sc.SIG_C)
        return "s", ScriptResult(status="error", signature=sig, torch_version="2.13.0", torch_git="abc")

    from tests.issueviews import inputs

    v = reproducers.verify_all(StepContext.of(conn, a_run(), builds, seams=VerifySteps(run=answering_checks(runner))),
                               groups, outs)
    a, b, c = v[(CSO, sc.SIG_A)], v[(CSO, sc.SIG_B)], v[(CDO, sc.SIG_C)]
    assert a.status == "unconfirmed" and a.script == "" and a.reason.startswith("eager failed: ")
    assert "split_with_sizes" in a.reason and ("Model01ForCausalLM", "baseline") not in runs_seen
    assert b.status == "unconfirmed" and b.reason.startswith("baseline failed: ")
    assert ("Model02ForCausalLM", "flag") not in runs_seen
    assert c.status == "confirmed" and [m for m in runs_seen if m[0] == c.model] == [
        (c.model, "eager"), (c.model, "baseline"), (c.model, "flag")]
    assert verdicts.get(conn, a.key) == a                       # stored: a quiet nightly runs nothing
    done = plan(inputs(sc.corpus(), verdicts=[RunVerdict(CSO, sc.SIG_A, a)]), Timeline(), PlanSettings())
    body = next(x for x in done.actions if x.key == tracking_key(CSO, sc.SIG_A)).body
    assert "Not verified: eager failed: the script fails without torch.compile" in body
    assert "```python" not in body and "Verified:" not in body


def test_nothing_stored_for_a_model_is_reported_not_reused(tmp_path: Path) -> None:
    """The default runner renders from stored data only: a model the run stored nothing for is "not generated"."""
    outs, groups, _ = setup()
    conn = db.connect(tmp_path / "state.sqlite")
    v = reproducers.verify_all(StepContext.of(conn, a_run(), {}), groups, outs)
    assert all(x.status == "unconfirmed" and "stored no build data" in x.reason for x in v.values())
    assert all(verdicts.get(conn, x.key) is None for x in v.values())


def test_a_run_without_an_interpreter_says_so_and_runs_nothing(tmp_path: Path) -> None:
    outs, groups, builds = setup()
    conn = db.connect(tmp_path / "state.sqlite")

    def never(*args):
        raise AssertionError("nothing may run without an interpreter")

    v = reproducers.verify_all(StepContext.of(conn, a_run({"torch_version": "2.13.0"}), builds,
                                              seams=VerifySteps(run=never)),
                               groups, outs)
    assert {x.reason for x in v.values()} == {"could not be run: the run recorded no interpreter"}


def test_the_checks_run_in_one_interpreter_and_a_check_it_did_not_report_runs_alone():
    """The oracle asks once for all three checks; what that interpreter did not report (it died in the flag's
    compile) runs alone in a fresh one; a hang after eager and baseline is the flag's answer."""
    asked: list[str] = []
    ok = ScriptResult(status="ok", signature=None)

    def died_in_flag(built, under, python, timeout, mode="flag"):
        asked.append(mode)
        if mode == oracle.CHECKS:
            return "s", dataclasses.replace(ok, mode="baseline", returncode=-11, modes={
                "eager": dataclasses.replace(ok, mode="eager"), "baseline": dataclasses.replace(ok, mode="baseline")})
        return "s", ScriptResult(status="error", signature=sc.SIG_A, mode=mode)

    judged = oracle.judge(ModelBuild("M", "X", {}, {}, 0), oracle.Crash({}, {}, "count", "cpu", sc.SIG_A), "py",
                          runner=died_in_flag, timeout=60)
    assert judged.passed and asked == ["checks", "flag"]

    def hung_in_flag(built, under, python, timeout, mode="flag"):
        asked.append(mode)
        return "s", ScriptResult("timeout", modes={"eager": dataclasses.replace(ok, mode="eager"),
                                                   "baseline": dataclasses.replace(ok, mode="baseline")})

    asked.clear()
    judged = oracle.judge(ModelBuild("M", "X", {}, {}, 0), oracle.Crash({}, {}, "count", "cpu", "timeout"), "py",
                          runner=hung_in_flag, timeout=60)
    assert judged.passed and asked == ["checks"]      # a hang the sweep saw as its crash, seen again
