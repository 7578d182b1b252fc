"""The validity oracle: one rule for whether a reproducer (the initial one and every shrink step) is kept.

A candidate build is kept only when, in fresh interpreters of the run's torch,
its script (one script, run in three modes; templates/repro_script.py.j2):
  (a) eager    - runs without torch.compile on the same inputs: the test case is valid,
  (b) baseline - compiles and runs under the run's baseline settings: the crash needs the flag,
  (c) flag     - fails under the flag's settings with the same signature: it reproduces.
Checks run cheapest first and stop at the first that fails; the timeout bounds them all. They run in one
interpreter (the script's `checks` mode: one start, one import of torch, one build, as a sweep worker runs
eager, baseline and flag); a check that interpreter did not report (it died, or the runner answers one mode at
a time) runs alone in a fresh one.
Without (a) a shrink can keep the signature while making inputs the model cannot take
(Qwen2-VL: pixel_values cut to one image, image_grid_thw still saying two): Dynamo
reaches the crash before the bad shapes matter, and the report is bogus in eager.
A wrong result's reproducer (bot/verify/wrong_script.py, run under its driver) is judged by `judge_wrong`, in the
same order and to the same end: kept only when (a) with torch.compile replaced by the identity its assert_close
passes (eager run twice, on the model and on its deep copy, agrees), (b) compiled under the baseline it passes,
and (c) compiled under the flag it fails in assert_close: "fails as filed". A crash under the flag is not a
reproduced wrong result. One interpreter per check (the baseline's is another script).
Stdlib only: torch is never imported here.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, NamedTuple

from bot.verify.steps import Check, Runner, Under
from bot.verify.wrong_script import MISMATCH, Case
from harness.core.model_build import ModelBuild
from harness.core.modes import DEFAULT, Mode
from harness.engine.script_runner import ScriptResult

MODES = ("eager", "baseline", "flag")     # cheapest first
CHECKS = "checks"                         # the script's mode that runs MODES in one interpreter
FAILED = {"eager": "eager failed", "baseline": "baseline failed"}


@dataclasses.dataclass(frozen=True)
class Crash:
    """What a crash's reproducer is judged against: the flag's settings and the baseline's (each base + config), the
    backend and device it compiled under, and the signature the flag must fail with."""

    settings: dict[str, Any]
    baseline: dict[str, Any]
    backend: str
    device: str
    signature: str
    mode: Mode = DEFAULT                  # the run's mode: its script runs the model as the sweep did

    @property
    def under(self) -> Under:
        """What its reproducer script is rendered under."""
        return Under(self.settings, self.backend, self.device, self.baseline, self.mode)


class Judged(NamedTuple):
    """What the oracle saw: kept or not, the check that failed, why, and the script with its last result."""

    passed: bool
    failed: str | None            # eager | baseline | flag (None: passed)
    reason: str                   # "" when passed
    script: str
    result: ScriptResult          # the last run's result (the flag run's when passed)


def reproduces(result: ScriptResult, signature: str) -> bool:
    """Check (c): a script reproduces a crash when it failed and its signature (or status) is the same."""
    return result.reported and result.status != "ok" and (result.signature or result.status) == signature


def flag_problem(result: ScriptResult, signature: str) -> str:
    """Why a flag run does not reproduce `signature` ("" when it does)."""
    if reproduces(result, signature):
        return ""
    if result.status == "ok":
        return "ran without crashing in a fresh interpreter"
    if not result.reported:
        return f"did not report a result ({result.error or 'no FLAGSWEEP_RESULT line'})"
    return f"ended with {result.status} and another signature: {result.signature or result.status}"


def _valid_problem(mode: str, result: ScriptResult) -> str:
    """Why an eager or baseline run makes the candidate invalid ("" when it ran)."""
    if result.status == "ok":
        return ""
    if not result.reported:
        return f"{FAILED[mode]}: did not report a result ({result.error or 'no FLAGSWEEP_RESULT line'})"
    where = "without torch.compile" if mode == "eager" else "compiled under the baseline settings"
    return f"{FAILED[mode]}: the script fails {where} ({result.signature or result.status})"


def reported(result: ScriptResult) -> dict[str, ScriptResult]:
    """{mode: its result} of what a `checks` run reported (every mode's line, or a lone line's own mode); a run
    that timed out after reporting some gave the next mode its timeout (a hang is that check's answer)."""
    if result.modes:
        seen = {m: r for m, r in result.modes.items() if m in MODES}
    else:
        seen = {result.mode: result} if result.mode in MODES else {}
    if seen and result.status == "timeout":
        hung = next((m for m in MODES if m not in seen), None)
        if hung:
            seen[hung] = dataclasses.replace(result, modes={})
    return seen


def judge(built: ModelBuild | None, crash: Crash, python: str, *, runner: Runner, timeout: float,
          clock: Callable[[], float] = time.monotonic) -> Judged:
    """Run the checks in MODES order on `built` and stop at the first that fails; `timeout` bounds them all.

    A runner that raises (nothing to render from) propagates: the caller says what that means.
    """
    started = clock()
    under, signature = crash.under, crash.signature
    script, together = runner(built, under, python, timeout, CHECKS)
    seen = reported(together)
    result = ScriptResult.not_run()      # nothing checked yet
    for mode in MODES:
        mine = seen.get(mode)
        left = timeout - (clock() - started)
        if mine is None and left <= 0:
            return Judged(False, mode, f"ran out of time before the {mode} check", script, ScriptResult.not_run())
        if mine is None:
            script, result = runner(built, under, python, left, mode)
        else:
            result = mine
        problem = flag_problem(result, signature) if mode == "flag" else _valid_problem(mode, result)
        if problem:
            return Judged(False, mode, problem, script, result)
    return Judged(True, None, "", script, result)


def _wrong_problem(mode: str, result: ScriptResult) -> str:
    """Why a wrong result's check in `mode` makes the candidate not kept ("" when it answered as it must)."""
    if not result.reported:
        return f"{FAILED.get(mode, mode)}: did not report a result ({result.error or 'no FLAGSWEEP_RESULT line'})"
    mismatch = result.status == "error" and result.exception == MISMATCH
    if mode == "flag":
        if mismatch:
            return ""
        if result.status == "ok":
            return "passed assert_close in a fresh interpreter: the compiled outputs matched eager's"
        return f"ended with {result.said} instead of assert_close's mismatch (a crash is not a wrong result)"
    if result.status == "ok":
        return ""
    if mode == "eager" and mismatch:
        return "eager failed: eager run twice disagrees (assert_close fails with torch.compile replaced by the identity)"
    if mismatch:
        return "baseline failed: compiled under the baseline settings the outputs differ from eager's too"
    where = "with torch.compile replaced by the identity" if mode == "eager" else "compiled under the baseline settings"
    return f"{FAILED[mode]}: the script fails {where} ({result.said})"


def judge_wrong(built: ModelBuild | None, case: Case, python: str, *, check: Check, timeout: float,
                clock: Callable[[], float] = time.monotonic) -> Judged:
    """A wrong result's reproducer on `built`: the checks in MODES order, stopping at the first that fails; the
    script kept is the flag's (the baseline's differs by its settings). `timeout` bounds them all; a `check` that
    raises (nothing to render from) propagates."""
    started, script, result = clock(), "", ScriptResult.not_run()
    for mode in MODES:
        left = timeout - (clock() - started)
        if left <= 0:
            return Judged(False, mode, f"ran out of time before the {mode} check", script, ScriptResult.not_run())
        rendered, result = check(built, case, python, left, mode)
        script = script if mode == "baseline" else rendered
        problem = _wrong_problem(mode, result)
        if problem:
            return Judged(False, mode, problem, script, result)
    return Judged(True, None, "", script, result)
