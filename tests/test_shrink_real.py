"""Shrinking the real crash: MimiModel under capture_scalar_outputs fails with PendingUnbackedSymbolNotFound on
torch 2.13. The reproducer is built from the zoo's lock entry as a worker stores it, verified, shrunk with a
cap of 2 tries (each one oracle judgement: eager, baseline, flag in one interpreter), and the shrunk script is run
once more: the checks of the try that kept it show it runs in eager and under the baseline and fails under the flag
(that run is kept, not run again), and on its own it fails with the same signature, with fewer parameters. About
four real runs of the script (~5 s each on an idle core)."""
from __future__ import annotations

import sys

import pytest

from bot.verify import oracle, shrink
from bot.verify.steps import Under, render_and_run
from harness.engine.script_runner import run_script
from tests.helpers_verify import stored_build

MODEL = "MimiModel"
CSO = {"torch._dynamo.config.capture_scalar_outputs": True}


@pytest.mark.compile
def test_the_real_mimi_crash_shrinks_and_still_fails_the_same_way() -> None:
    built = stored_build(MODEL)       # what a worker stores for it, from the lock entry
    script, result = render_and_run(built, Under(CSO, "count", "cpu"), sys.executable, 300)
    signature = result.signature
    assert result.status == "error" and signature.startswith("PendingUnbackedSymbolNotFound"), result
    assert result.parameters > 0 and result.seconds > 0              # the script reports both
    checked = {}    # each try's checks run (eager, baseline, flag in one interpreter), by the script it ran

    def checking(*args):
        tried, seen = render_and_run(*args)
        checked[tried] = seen
        return tried, seen
    judge = shrink.crash_judge(oracle.Crash(CSO, {}, "count", "cpu", signature), sys.executable, checking)
    small = shrink.minimise(built, (script, result), judge, shrink.Limits(600, timeout=300, max_tries=2))
    st = small.stats
    # Two tries: every knob at once is refused on this model, its first half is kept (one kept step is the point)
    assert st["tries"] <= 2 and st["kept"] >= 1, st
    # The oracle's checks in one interpreter (eager, baseline, flag in order), as the judgement that kept the shrunk
    # script ran them: a valid test case runs in eager (no compile) and under the baseline, and the flag still fails
    # the same way.
    checks = checked[small.script]
    eager, baseline = checks.modes["eager"], checks.modes["baseline"]
    assert list(checks.modes) == ["eager", "baseline", "flag"], checks
    assert eager.status == "ok" and eager.mode == "eager" and eager.graphs == 0, eager
    assert baseline.status == "ok" and baseline.graphs >= 1, baseline
    assert checks.signature == signature, checks
    again = run_script(small.script, sys.executable, 300)                 # the embedded script, run on its own
    assert again.status == "error" and again.signature == signature, again
    assert again.parameters < result.parameters and again.parameters == st["after"]["parameters"]
    assert st["before"]["parameters"] == result.parameters and st["rows"]
