"""Verified reproducers: a tracking issue embeds a script only if it was run and seen to fail the same way.

For each tracking group the smallest affected model (fewest ops, then fewest
baseline graphs, then name) gets a standalone script rendered from what the run
stored (bot/verify/script.py; no model is built here and torch is never imported),
run in fresh subprocesses of the interpreter the run used (a crash that exists
only in a nightly is checked on that nightly) and judged by the validity oracle
(bot/verify/oracle.py: it runs in eager, it compiles under the baseline, it fails
under the flag with the same signature). That is slow (a new Python, a
compile), so verdicts are stored (state/verdicts.py) per (config, signature,
model, fingerprint, torch build) and reused. A confirmed one is then shrunk
(bot/verify/shrink.py) under a time budget, and the verdict keeps the smallest
script the oracle still keeps, with its shrink.
"""
from __future__ import annotations

import dataclasses
import logging
import sqlite3
from typing import Any, Callable

from bot.verify import oracle, shrink
from harness.core.outcome import Effect, Outcome
from state import verdicts as store
from state.runs import Run
from state.verdicts import Shrink, Verdict

log = logging.getLogger(__name__)
Runner = oracle.Runner   # (stored build, settings, backend, device, python, timeout, mode, baseline) -> (script, result)
Groups = dict[tuple[str, str], list[Effect]]   # (config, signature) -> effects (harness.core.tracking)


def render_and_run(built: dict[str, Any] | None, settings: dict[str, Any], backend: str, device: str,
                   python: str, timeout: float, mode: str = "flag",
                   baseline: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """Render the script from stored data, run it in `mode` (oracle.MODES) under `python`; (script, its result)."""
    from bot.verify.script import render_script
    from harness.engine.script_runner import run_script

    script = render_script(built, settings, backend, device, baseline)
    return script, run_script(script, python, timeout, args=() if mode == "flag" else (mode,))


def pick_model(effects: list[Effect], outcomes: dict[tuple[str, str], Outcome]) -> Effect:
    """The smallest affected model: fewest ops, then fewest baseline graphs, then name."""
    def size(e: Effect) -> tuple:
        base = outcomes.get((e.model, "baseline"))
        ops = base.ops if base and base.ops is not None else float("inf")
        return (ops, e.baseline_graphs if e.baseline_graphs is not None else float("inf"), e.model)
    return min(effects, key=size)


def run_python(run: Run) -> str | None:
    """The interpreter the run's workers used (its environment records it)."""
    return run.environment.get("python")


def run_settings(run: Run, config: str) -> dict[str, Any]:
    """The settings a run applied for `config`: its base settings, then the config's own."""
    return {**run.base_settings, **run.configs.get(config, {})}


def run_how(run: Run) -> tuple[str, str]:
    """(backend, device) the run compiled under."""
    return run.options.get("backend", "count"), run.options.get("device", "cpu")


def verify_all(conn: sqlite3.Connection, groups: Groups, outcomes: list[Outcome] | tuple[Outcome, ...], run: Run,
               builds: dict[str, dict[str, Any]], *, python: str | None = None, timeout: float = 600.0,
               runner: Runner | None = None, shrink_budget: float = 0.0,
               progress: Callable[[str], None] | None = None) -> dict[tuple[str, str], Verdict]:
    """{(config, signature): verdict} for each group; verdicts (and their shrinks) are stored and reused.

    builds: the run's stored build data per model. python: the interpreter to verify
    under (default: the one the run used, from its environment). shrink_budget: seconds
    per confirmed reproducer to shrink it in (0: embed it as built).
    """
    runner = runner or render_and_run
    python = python or run_python(run)
    by_item = {(o.model, o.config): o for o in outcomes}
    how = run_how(run)
    out: dict[tuple[str, str], Verdict] = {}
    for n, ((config, signature), effects) in enumerate(groups.items(), 1):
        chosen = pick_model(effects, by_item)
        item = by_item.get((chosen.model, config))
        blank = Verdict(config, signature, chosen.model, item.fingerprint if item else None,
                        run.environment.get("torch_version"), run.environment.get("torch_git"), "unconfirmed")
        settings = (run_settings(run, config), run_settings(run, "baseline"))
        built = builds.get(chosen.model)
        cached = store.get(conn, blank.key)
        if cached is not None and not _wants_shrink(cached, shrink_budget, python):
            out[(config, signature)] = cached
            continue
        if progress:
            progress(f"reproducer {n}/{len(groups)}: {chosen.model} under {config}")
        if cached is not None:        # confirmed before the shrink was enabled: measure it again, then shrink
            found, ran = _remeasure(cached, built, settings, how, python or "", runner, timeout)
        else:
            found, ran = _verify(blank, built, settings, how, python, runner, timeout)
        if ran is not None and found.status == "confirmed" and shrink_budget > 0:
            found = _shrunk(found, built, settings, how, python or "", ran, shrink_budget, runner, timeout, progress)
        # Reused later only when something ran and reported; a verdict reached otherwise is kept for this run.
        reusable = ran is not None and ran.result.get("status") is not None
        if reusable or cached is None:
            store.put(conn, found, reusable=reusable)
        out[(config, signature)] = found
    return out


Settings = tuple[dict[str, Any], dict[str, Any]]   # (the flag's settings, the baseline's), each base + config


def _judge(built: dict[str, Any] | None, settings: Settings, how: tuple[str, str], python: str, signature: str,
           runner: Runner, timeout: float) -> oracle.Judged:
    flag, baseline = settings
    return oracle.judge(built, flag, baseline, *how, python, signature, runner=runner, timeout=timeout)


def _verify(blank: Verdict, built: dict[str, Any] | None, settings: Settings, how: tuple[str, str],
            python: str | None, runner: Runner, timeout: float) -> tuple[Verdict, oracle.Judged | None]:
    """(verdict, what the oracle saw); None in place of the oracle's answer when nothing could run."""
    if not python:
        return dataclasses.replace(blank, reason="could not be run: the run recorded no interpreter"), None
    try:
        judged = _judge(built, settings, how, python, blank.signature, runner, timeout)
    except Exception as exc:  # nothing stored to render from, or a template error: "not confirmed"
        return dataclasses.replace(blank, reason=f"could not be generated ({type(exc).__name__}: {exc})"), None
    status = "confirmed" if judged.passed else "unconfirmed"
    result = judged.result
    return dataclasses.replace(blank, status=status, reason=judged.reason, script=judged.script if judged.passed else "",
                               torch_version=result.get("torch_version"), torch_git=result.get("torch_git")), judged


def _remeasure(cached: Verdict, built: dict[str, Any] | None, settings: Settings, how: tuple[str, str],
               python: str, runner: Runner, timeout: float) -> tuple[Verdict, oracle.Judged | None]:
    """A stored confirmed verdict judged again so it can be shrunk; None in place of the answer when its build is gone."""
    try:
        return cached, _judge(built, settings, how, python, cached.signature, runner, timeout)
    except Exception:
        return cached, None


def _shrunk(found: Verdict, built: dict[str, Any] | None, settings: Settings, how: tuple[str, str],
            python: str, original: oracle.Judged, budget: float, runner: Runner, timeout: float,
            progress: Callable[[str], None] | None) -> Verdict:
    """The verdict with its shrink: the smallest script the oracle keeps (no shrink when it could not start)."""
    if not built or not original.passed:
        return dataclasses.replace(found, shrunk=True, shrink=None)
    flag, baseline = settings
    small = shrink.minimise(built, flag, *how, python, found.signature, baseline=baseline,
                            original=(original.script, original.result), budget=budget, runner=runner,
                            timeout=timeout, progress=progress)
    return dataclasses.replace(found, script=small.script, shrunk=True, shrink=Shrink(small.build, small.stats),
                               maintainer=None)   # rendered again from the shrunk build


def _wants_shrink(cached: Verdict, budget: float, python: str | None) -> bool:
    """A stored confirmed verdict that was never shrunk, now that shrinking is on."""
    return bool(budget > 0 and python and cached.status == "confirmed" and not cached.shrunk)
