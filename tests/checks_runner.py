"""A test runner's answer to the oracle's `checks` mode, the way the real script gives it.

The oracle (bot/verify/oracle.py) asks a runner for `checks`: eager, baseline, then the flag, in one
interpreter, stopping at the first of eager and baseline that fails, each mode's result with its mode.
Test runners answer one mode at a time; `answering_checks` runs them in that order and answers the same.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from bot.verify.oracle import CHECKS, MODES
from bot.verify.steps import Runner, Under
from harness.engine.script_runner import ScriptResult


def answering_checks(one: Runner) -> Runner:
    """`one`, which answers one mode at a time, answering `checks` as the real script does."""
    def runner(built: Any, under: Under, python: str, timeout: float, mode: str = "flag") -> tuple[str, ScriptResult]:
        if mode != CHECKS:
            return one(built, under, python, timeout, mode)
        script, modes = "", {}
        for each in MODES:
            script, result = one(built, under, python, timeout, each)
            modes[each] = dataclasses.replace(result, mode=each)
            if each != "flag" and result.status != "ok":
                break
        return script, dataclasses.replace(modes[each], modes=modes)
    return runner
