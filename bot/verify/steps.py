"""The verifier's calls into other processes, as typed seams: one dataclass, the real functions as its defaults.

Every script the verify step runs goes through one of these: a reproducer rendered from a stored build and run
in a fresh interpreter (`run`), a wrong result's accuracy reproducer run under its driver (`check`), the
maintainer's script run under its driver (`drive`), and the config's defaults asked in the torch under test
(`ask`); and the step's clock (`clock`). The entry points (step.verify_run, reproducers.verify_all, isolate.isolate_all, ablation.ablate_all)
take a `VerifySteps`; tests pass a twin of the same type (house style: bot.pipeline.steps.Steps).
Stdlib only here: torch is never imported.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from bot.text.render import render
from bot.verify.script import HARNESS, module_source, render_script
from bot.verify.wrong_script import MISMATCH, Case, render_wrong
from harness.core.model_build import ModelBuild
from harness.core.modes import DEFAULT, Mode
from harness.engine.interpreter import call
from harness.engine.script_runner import ScriptResult, run_script


@dataclass(frozen=True)
class Under:
    """What a crash's reproducer script is rendered under: the flag's settings, the backend and device it compiles
    with, the baseline's settings (each base + config) that its `baseline` mode runs, and the run's mode."""

    settings: dict[str, Any]
    backend: str
    device: str
    baseline: dict[str, Any] | None = None
    mode: Mode = DEFAULT                   # how the model runs (harness.core.modes): the script renders it


class Runner(Protocol):
    """(stored build, what it compiles under, python, timeout, mode) -> (script, result)."""

    def __call__(self, built: ModelBuild | None, under: Under, python: str, timeout: float,
                 mode: str = ...) -> tuple[str, ScriptResult]: ...


class Check(Protocol):
    """(stored build, a wrong result's case, python, timeout, mode: eager | baseline | flag) -> (script, result)."""

    def __call__(self, built: ModelBuild | None, case: Case, python: str, timeout: float,
                 mode: str = ...) -> tuple[str, ScriptResult]: ...


class Drive(Protocol):
    """(the maintainer's script, python, timeout, mode: eager | None | False | True) -> its result."""

    def __call__(self, script: str, python: str, timeout: float, mode: str) -> ScriptResult: ...


class Ask(Protocol):
    """(config class, stored config, python, timeout) -> the fields set away from the class's defaults."""

    def __call__(self, config_class: str, config: dict[str, Any], python: str, timeout: float) -> dict[str, Any]: ...


def render_and_run(built: ModelBuild | None, under: Under, python: str, timeout: float,
                   mode: str = "flag") -> tuple[str, ScriptResult]:
    """Render the script from stored data, run it in `mode` (oracle.MODES) under `python`; (script, its result)."""
    script = render_script(built, under.settings, under.backend, under.device, under.baseline, under.mode)
    return script, run_script(script, python, timeout, args=() if mode == "flag" else (mode,))


def render_and_check(built: ModelBuild | None, case: Case, python: str, timeout: float,
                     mode: str = "flag") -> tuple[str, ScriptResult]:
    """A wrong result's reproducer rendered from stored data (the baseline's settings in `baseline` mode) and run
    under its driver in a fresh interpreter of `python`, compiled or (`eager`) with the identity; (script, result)."""
    script = render_wrong(built, case, baseline=mode == "baseline")
    driver = render("wrong_driver.py.j2", mismatch=MISMATCH,
                    signature_source=module_source(HARNESS / "core" / "signature.py"))
    return script, run_script(driver, python, timeout, args=("eager" if mode == "eager" else "compiled",),
                              files={"repro.py": script}, name="drive.py")


def drive(script: str, python: str, timeout: float, mode: str) -> ScriptResult:
    """Run the maintainer's script as repro.py under the driver, in `mode`, in a fresh interpreter; its result."""
    driver = render("maintainer_driver.py.j2",
                    signature_source=module_source(HARNESS / "core" / "signature.py"))
    return run_script(driver, python, timeout, args=(mode,), files={"repro.py": script}, name="drive.py")


def ask_overrides(config_class: str, config: dict[str, Any], python: str, timeout: float) -> dict[str, Any]:
    """bot.verify.overrides.overrides, asked in `python` (the torch and transformers under test)."""
    return call("bot.verify.overrides:overrides", config_class, config, python=python, timeout=timeout)


@dataclass(frozen=True)
class VerifySteps:
    """The verifier's seams; tests swap one (usually `run`) for a twin of the same type."""

    run: Runner = render_and_run
    check: Check = render_and_check
    drive: Drive = drive
    ask: Ask = ask_overrides
    clock: Callable[[], float] = time.monotonic    # the step's clock: its budget and what each group cost
