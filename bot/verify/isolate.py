"""Component isolation: does a confirmed crash live in Dynamo tracing, AOTAutograd or Inductor?

PyTorch's troubleshooting guide: re-run the failure under `eager` (Dynamo
only), `aot_eager` (Dynamo, then AOTAutograd) and `inductor` (all three). Each
stage includes the previous one, so the first stage that fails with the same
signature names the component. A stage is one run of the verified reproducer in
a fresh interpreter of the run's torch, through the runner `verify_all` uses
(rendered from stored build data: hand `isolate` a shrunk build and it isolates
that). Stages stop at the run's own backend: a crash seen under `aot_eager` is
never run under `inductor`.

No runs are spent when the answer is known by construction: under the counting
backend (nothing is compiled after Dynamo) and under `eager`, a crash is
Dynamo's; not in train, where the backward is compiled through AOTAutograd under
either (reproducers.run_how: the run's backend as its mode compiled). Runs are spent once per (config, signature): the record is stored with
the signature's verdict (state/verdicts.py) and carried to later verdicts of the
same signature, so a new torch build re-verifies but does not re-isolate, and a
quiet nightly runs nothing. Stdlib only: torch is never imported here.
"""
from __future__ import annotations

import dataclasses
import functools
import sqlite3
import time
from typing import Callable

from bot.verify import oracle, pool, reproducers
from bot.verify.context import StepContext
from bot.verify.reproducers import Groups
from bot.verify.steps import Runner
from harness.core.model_build import ModelBuild
from harness.engine.script_runner import ScriptResult
from state import verdicts as store
from state.verdicts import Component, Stage, Verdict

STAGES = ("eager", "aot_eager", "inductor")
COMPONENT_OF = {"eager": "dynamo", "aot_eager": "aot_autograd", "inductor": "inductor"}
BY_CONSTRUCTION = ("count", "eager")     # backends under which a crash can only be Dynamo's


def stages_for(backend: str) -> tuple[str, ...]:
    """The backends to run for a crash seen under `backend`: each stage up to and including it."""
    return STAGES[:STAGES.index(backend) + 1] if backend in STAGES else ()


def by_construction(backend: str) -> Component:
    """The component of any crash under `backend` when it is known without a run (count, eager)."""
    return Component(component="dynamo", backend=backend, by_construction=True)


def stage_result(result: ScriptResult, signature: str) -> str:
    """One stage's run: "fails" (same signature), "passes", "other" (another failure) or "no_result"."""
    if not result.reported:
        return "no_result"
    if result.status == "ok":
        return "passes"
    return "fails" if oracle.reproduces(result, signature) else "other"


def isolate(built: ModelBuild | None, crash: oracle.Crash, python: str, *, timeout: float, runner: Runner,
            progress: Callable[[str], None] | None = None) -> Component:
    """Where `crash` lives, for a reproducer of `built` under the crash's settings seen under its backend.

    Runs `eager`, `aot_eager`, `inductor` in order (up to `backend`) and stops at
    the first stage that fails with the same signature (its component) or that
    ends otherwise (another signature, a hang, no result: "undetermined"). Passing
    every stage is "none": it fails only under the run's own backend and settings.
    """
    backend = crash.backend
    if backend in BY_CONSTRUCTION:
        return by_construction(backend)
    if backend not in STAGES:
        raise ValueError(f"no isolation stages for backend {backend!r}")
    component, stages, result = "none", [], ScriptResult.not_run()
    for stage in stages_for(backend):
        if progress:
            progress(f"isolating under {stage}")
        start = time.monotonic()
        under = dataclasses.replace(crash.under, backend=stage, baseline={})
        _, result = runner(built, under, python, timeout, "flag")   # the flag's run
        outcome = stage_result(result, crash.signature)
        stages.append(Stage(backend=stage, result=outcome, seconds=round(time.monotonic() - start, 1),
                            signature=result.said, error=result.error))
        if outcome == "fails":
            component = COMPONENT_OF[stage]
            break
        if outcome != "passes":
            component = "undetermined"
            break
    return Component(component=component, backend=backend, by_construction=False, stages=tuple(stages),
                     torch_version=result.torch_version, torch_git=result.torch_git)


def _build_for(verdict: Verdict, builds: dict[str, ModelBuild]) -> ModelBuild | None:
    """What to isolate: the shrunk build when the verdict carries one, else the model's stored build."""
    small = verdict.shrink
    return small.build if small and small.build else builds.get(verdict.model)


def isolate_all(ctx: StepContext, groups: Groups,
                verdicts: dict[tuple[str, str], Verdict]) -> dict[tuple[str, str], Component]:
    """{(config, signature): component record} for each group: by construction, stored already, or isolated now.

    Only confirmed verdicts are isolated (their model's stored build, the run's
    settings and device, its interpreter); the record is stored with the verdict
    (unless a stage did not report: a later run tries again). A group without a
    confirmed verdict has no record; nor has one reached past the deadline (a later run isolates it).
    Groups run side by side on `ctx.workers`; the store is written on this thread.
    """
    backend, device = reproducers.run_how(ctx.run)     # a train run's count and eager: aot_eager (its backward)
    if backend in BY_CONSTRUCTION:
        return {group: by_construction(backend) for group in groups}
    conn, meter = ctx.conn, ctx.meter
    known = store.components(conn, reproducers.run_mode(ctx.run).key)
    out: dict[tuple[str, str], Component] = {}
    todo: list[tuple[tuple[str, str], Verdict]] = []
    for group in groups:
        verdict = verdicts.get(group)
        if verdict is None or verdict.status != "confirmed" or not ctx.python:
            continue
        record = verdict.component or known.get(group)
        if record is None:
            todo.append((group, verdict))
        else:
            out[group] = record
            _store(conn, verdict, record)

    def job(group: tuple[str, str], verdict: Verdict) -> Component | None:
        if ctx.past_deadline():
            return None
        ctx.say(f"component: {verdict.model} under {group[0]}")
        try:
            crash = oracle.Crash(reproducers.run_settings(ctx.run, group[0]), {}, backend, device, group[1],
                                 reproducers.run_mode(ctx.run))
            record = isolate(_build_for(verdict, ctx.builds), crash, ctx.python or "", timeout=ctx.timeout,
                             runner=meter.timed(group, "isolate", ctx.seams.run), progress=ctx.progress)
        except Exception:  # nothing to render from: no component, and nothing stored
            return None
        return dataclasses.replace(record, config=group[0], signature=group[1], model=verdict.model)

    def done(n: int, record: Component | None) -> None:
        group, verdict = todo[n]
        if record is not None:
            out[group] = record
            _store(conn, verdict, record)
        cost = meter.take(group)
        if cost:
            store.add_cost(conn, verdict.key, cost)

    pool.side_by_side([functools.partial(job, g, v) for g, v in todo], ctx.workers, done)
    return {group: out[group] for group in groups if group in out}


def _store(conn: sqlite3.Connection, verdict: Verdict, record: Component) -> None:
    """Keep a complete record with the verdict (its stored cost too)."""
    if verdict.component != record and record.complete:
        current = store.get(conn, verdict.key) or verdict
        store.put(conn, dataclasses.replace(current, component=record))
