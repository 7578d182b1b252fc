"""The maintainer's script, judged by the oracle, and its dynamic ablation; stored with the verdict.

For each confirmed verdict (after isolation, so the script can name the
component's backend) the maintainer's script (bot/verify/maintainer.py) is
rendered from the verdict's shrunk build (else the model's stored build) and
run in fresh interpreters of the run's torch through a driver
(templates/maintainer_driver.py.j2) that runs it as `python repro.py` does,
with torch.compile made the identity or given `dynamic`:
  eager           - it must run: the test case is valid,
  dynamic=None    - as written: it must fail with the group's signature,
  dynamic=False   - the ablation PyTorch's bug template asks for, and
  dynamic=True      (only once the script reproduces).
A script that fails a check is stored as unconfirmed with the reason, and the
issue embeds the harness script instead. The record is stored in the verdict
(per config, signature, model and torch build): a quiet re-publish runs nothing.
Stdlib only: torch is never imported here.
"""
from __future__ import annotations

import dataclasses
import functools
import time

from bot.verify import isolate, maintainer, oracle, pool, reproducers
from bot.verify.context import StepContext
from bot.verify.reproducers import Groups
from bot.verify.steps import Drive, VerifySteps
from harness.core.model_build import ModelBuild
from harness.engine.interpreter import CallFailed
from state import verdicts as store
from state.verdicts import Component, DynamicRun, Maintainer, Verdict

DYNAMIC = ("None", "False", "True")          # torch.compile(dynamic=...): as written first


def judge(script: str, backend: str, signature: str, python: str, timeout: float, drive: Drive) -> Maintainer:
    """Eager must run, dynamic=None must fail with `signature`; then dynamic=False and True are recorded."""
    eager = drive(script, python, timeout, "eager")
    if eager.status != "ok":
        why = eager.signature or eager.error or (eager.status if eager.reported else None) or "no result"
        return Maintainer(script, backend, "unconfirmed", f"eager failed: the script fails without torch.compile ({why})")
    runs: list[DynamicRun] = []
    for dynamic in DYNAMIC:
        start = time.monotonic()
        result = drive(script, python, timeout, dynamic)
        outcome = isolate.stage_result(result, signature)
        runs.append(DynamicRun(dynamic, outcome, result.said, round(time.monotonic() - start, 1)))
        if dynamic == "None" and outcome != "fails":
            return Maintainer(script, backend, "unconfirmed", oracle.flag_problem(result, signature), tuple(runs))
    return Maintainer(script, backend, "confirmed", "", tuple(runs))


def for_verdict(verdict: Verdict, built: ModelBuild | None, crash: oracle.Crash, python: str, timeout: float,
                seams: VerifySteps) -> Maintainer:
    """The maintainer's script of a confirmed verdict, rendered from `built` under `crash`'s settings, backend and
    device, and judged (`seams`: ask and drive)."""
    backend = crash.backend
    if not built or not built.config_class or not built.model:
        return Maintainer("", backend, "unconfirmed", "could not be rendered: no build data stored for the model")
    try:
        fields = seams.ask(built.config_class, built.config or {}, python, timeout)
        script = maintainer.render_script(built, fields, crash.settings, backend, verdict.signature, crash.device,
                                          crash.mode)
    except CallFailed as exc:   # the torch under test could not answer
        return Maintainer("", backend, "unconfirmed", f"could not be rendered: asking the config's defaults: {exc.why}")
    except ValueError as exc:   # an input kind without a line
        return Maintainer("", backend, "unconfirmed", f"could not be rendered: {exc}")
    return judge(script, backend, verdict.signature, python, timeout, seams.drive)


def ablate_all(ctx: StepContext, groups: Groups, found: dict[tuple[str, str], Verdict],
               components: dict[tuple[str, str], Component]) -> None:
    """Give each confirmed, stored verdict of `groups` its maintainer's script (once: stored with the verdict).

    A verdict carried from an earlier build keeps that build's script and ablation while the script, as
    written, still fails the same way here (one run; the dynamic=False/True runs are not repeated);
    otherwise it is judged again in full. Groups run side by side on `ctx.workers`; past the deadline none
    starts (a later run does it). The store is written on this thread.
    """
    conn, meter, python = ctx.conn, ctx.meter, ctx.python or ""
    run_backend, device = reproducers.run_how(ctx.run)
    todo: list[Verdict] = []
    for group in groups:
        seen = found.get(group)
        current = store.get(conn, seen.key) if seen is not None else None
        if current is not None and current.status == "confirmed" and python and (
                current.maintainer is None or _to_recheck(current)):
            todo.append(current)

    def job(current: Verdict) -> Maintainer | None:
        if ctx.past_deadline():
            return None
        group = (current.config, current.signature)
        metered = dataclasses.replace(ctx.seams, drive=meter.timed(group, "maintainer", ctx.seams.drive))
        if current.maintainer is not None and _still_fails(current, python, ctx.timeout, metered.drive):
            return dataclasses.replace(current.maintainer, checked_on=current.build)
        ctx.say(f"maintainer's script: {current.model} under {current.config}")
        component = components.get(group) or current.component
        backend = maintainer.backend_for(component.component if component else None, run_backend)
        built = current.shrink.build if current.shrink and current.shrink.build else ctx.builds.get(current.model)
        settings = reproducers.run_settings(ctx.run, current.config)
        crash = oracle.Crash(settings, {}, backend, device, current.signature, reproducers.run_mode(ctx.run))
        record = for_verdict(current, built, crash, python, ctx.timeout, metered)
        return dataclasses.replace(record, checked_on=current.build)

    def done(n: int, record: Maintainer | None) -> None:
        current = todo[n]
        if record is not None:
            store.put(conn, dataclasses.replace(store.get(conn, current.key) or current, maintainer=record))
        cost = meter.take((current.config, current.signature))
        if cost:
            store.add_cost(conn, current.key, cost)

    pool.side_by_side([functools.partial(job, v) for v in todo], ctx.workers, done)


def _to_recheck(verdict: Verdict) -> bool:
    """A confirmed maintainer's script carried from another build and not run on this one yet."""
    m = verdict.maintainer
    return bool(verdict.carried_from and m and m.status == "confirmed" and m.checked_on != verdict.build)


def _still_fails(verdict: Verdict, python: str, timeout: float, drive: Drive) -> bool:
    """The carried script, as written, fails with the verdict's signature on this build."""
    m = verdict.maintainer
    return bool(m and m.status == "confirmed" and verdict.carried_from
                and isolate.stage_result(drive(m.script, python, timeout, "None"), verdict.signature) == "fails")
