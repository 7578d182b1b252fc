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
script the oracle still keeps, with its shrink. A wrong result's group (harness.core.tracking
`wrong_result_groups`) goes the same way with its own reproducer and oracle (bot/verify/wrong_script.py,
oracle.judge_wrong: eager agrees with itself, the baseline passes assert_close, the flag fails it), at the run's
[accuracy] tolerances.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
from typing import Any, Callable

from bot.verify import oracle, pool, shrink
from bot.verify.context import StepContext
from bot.verify.wrong_script import Case
from harness.core.correctness import is_wrong_signature
from harness.core.model_build import ModelBuild
from harness.core.modes import Mode
from harness.core.outcome import Effect, Outcome
from state import verdicts as store
from state.runs import Run
from state.verdicts import Shrink, Verdict

log = logging.getLogger(__name__)
Groups = dict[tuple[str, str], list[Effect]]   # (config, signature) -> effects (harness.core.tracking)


def pick_model(effects: list[Effect], outcomes: dict[tuple[str, str], Outcome]) -> Effect:
    """The smallest affected model: fewest ops, then fewest baseline graphs, then name."""
    def size(e: Effect) -> tuple:
        base = outcomes.get((e.model, "baseline"))
        ops = base.ops if base and base.ops is not None else float("inf")
        return (ops, e.baseline_graphs if e.baseline_graphs is not None else float("inf"), e.model)
    return min(effects, key=size)


def run_python(run: Run) -> str | None:
    """The interpreter the run's workers used (its environment records it)."""
    return run.environment.python


def run_settings(run: Run, config: str) -> dict[str, Any]:
    """The settings a run applied for `config`: its base settings, then the config's own."""
    return {**run.base_settings, **run.configs.get(config, {})}


def run_how(run: Run) -> tuple[str, str]:
    """(backend, device) the run compiled under; the backend as its mode compiled (a train run's `eager` is
    `aot_eager`: harness.core.modes.Mode.compiles_under)."""
    sweep = run.options.sweep
    return sweep.mode.compiles_under(sweep.backend), sweep.device


def run_mode(run: Run) -> Mode:
    """The mode the run swept in (harness.core.modes): its reproducers run the model the same way."""
    return run.options.sweep.mode


def run_tolerances(run: Run) -> tuple[float, float]:
    """(rtol, atol) the run's accuracy oracle judged with ([accuracy], stored with its options)."""
    accuracy = run.options.sweep.accuracy
    return accuracy.rtol, accuracy.atol


@dataclasses.dataclass(frozen=True)
class Job:
    """One tracking group's reproducer work, planned on the store's thread and run on a worker."""

    group: tuple[str, str]
    blank: Verdict                    # the verdict's key, before anything ran
    built: ModelBuild | None          # the model's stored build
    settings: "Settings"
    cached: Verdict | None            # stored for this key but never (fully) shrunk: shrink it now
    carry: Verdict | None             # the newest shrunk case of another build: judged first, kept while it holds
    place: str = ""                   # "n/N": its place among the run's groups (progress lines)


def verify_all(ctx: StepContext, groups: Groups, outcomes: list[Outcome] | tuple[Outcome, ...],
               done: Callable[[tuple[str, str]], None] | None = None) -> dict[tuple[str, str], Verdict]:
    """{(config, signature): verdict} for each group that got one; verdicts (and their shrinks) are stored and reused.

    Each confirmed reproducer is shrunk in `ctx.shrink_budget` seconds (0: embedded as built); groups run side by
    side on `ctx.workers`; a group not started by `ctx.deadline` gets no verdict (pending: the next verification
    does it), and a shrink stops there. Groups run in leverage order (models blocked, most first). done: called
    (on this thread) per group.
    """
    by_item = {(o.model, o.config): o for o in outcomes}
    out: dict[tuple[str, str], Verdict] = {}
    jobs: list[Job] = []
    place = {group: f"{n}/{len(groups)}" for n, group in enumerate(groups, 1)}
    for group, effects in sorted(groups.items(), key=lambda kv: (-len(kv[1]), list(groups).index(kv[0]))):
        job = _plan(ctx, group, effects, by_item)
        if isinstance(job, Verdict):
            out[group] = job
        else:
            jobs.append(dataclasses.replace(job, place=place[group]))
    oracles = _Oracles(ctx, run_how(ctx.run), run_tolerances(ctx.run))

    def finished(n: int, result: tuple[Verdict, bool] | None) -> None:
        job = jobs[n]
        if result is not None:
            found, reusable = result
            if reusable or job.cached is None:
                store.put(ctx.conn, dataclasses.replace(found, cost=job.cached.cost if job.cached else None),
                          reusable=reusable)
            cost = ctx.meter.take(job.group)
            if cost:
                store.add_cost(ctx.conn, found.key, cost)
            out[job.group] = store.get(ctx.conn, found.key) or found
        if done:
            done(job.group)

    pool.side_by_side([functools.partial(_work, job, oracles) for job in jobs], ctx.workers, finished)
    return {group: out[group] for group in groups if group in out}


def _plan(ctx: StepContext, group: tuple[str, str], effects: list[Effect],
          by_item: dict[tuple[str, str], Outcome]) -> Job | Verdict:
    """The group's stored verdict when it can be reused as is, else the job that reaches one."""
    config, signature = group
    run, budget = ctx.run, ctx.shrink_budget
    chosen = pick_model(effects, by_item)
    item = by_item.get((chosen.model, config))
    blank = Verdict(config, signature, chosen.model, item.fingerprint if item else None,
                    run.environment.torch_version, run.environment.torch_git, "unconfirmed", mode=run_mode(run).key)
    cached = store.get(ctx.conn, blank.key)
    if cached is not None and not _wants_shrink(cached, budget, ctx.python):
        return cached
    carry = store.carried(ctx.conn, blank) if cached is None and budget > 0 and ctx.python else None
    return Job(group, blank, ctx.builds.get(chosen.model), (run_settings(run, config), run_settings(run, "baseline")),
               cached, carry)


@dataclasses.dataclass(frozen=True)
class _Oracles:
    """The oracle of each job of one verification, its runs metered: the step's context and the run's how and
    tolerances, read once."""

    ctx: StepContext
    how: tuple[str, str]                    # the run's (backend, device)
    tolerance: tuple[float, float]          # the run's (rtol, atol): a wrong result's assert_close

    def judge(self, job: Job, stage: str) -> shrink.Judge:
        """The oracle of `job`'s group for one stage: a wrong result's (judge_wrong) or a crash's, its runs metered."""
        (flag, baseline), signature = job.settings, job.blank.signature
        ctx, python = self.ctx, self.ctx.python or ""
        if is_wrong_signature(signature):     # its accuracy reproducer runs the model in the run's mode
            case = Case(signature, flag, baseline, *self.how, *self.tolerance, mode=run_mode(ctx.run))
            check = ctx.meter.timed(job.group, stage, ctx.seams.check)
            return lambda built, timeout: oracle.judge_wrong(built, case, python, check=check, timeout=timeout)
        crash = oracle.Crash(flag, baseline, *self.how, signature, run_mode(ctx.run))
        return shrink.crash_judge(crash, python, ctx.meter.timed(job.group, stage, ctx.seams.run))


def _work(job: Job, oracles: _Oracles) -> tuple[Verdict, bool] | None:
    """(the group's verdict, whether later runs may reuse it); None when the deadline passed before it started."""
    ctx = oracles.ctx
    if ctx.past_deadline():
        return None
    model, config = job.blank.model, job.blank.config
    ctx.say(f"reproducer {job.place}: {model} under {config}")
    why = None
    if job.carry is not None:
        kept, why = _carried(job, oracles)
        if kept is not None:
            return kept, True
    if job.cached is not None:        # confirmed before the shrink was enabled (or finished): measure it again
        start = job.cached.shrink.build if job.cached.shrink else job.built
        found, ran = _remeasure(job.cached, start, oracles.judge(job, "verify"), ctx.timeout)
    else:
        found, ran = _verify(job.blank, job.built, oracles.judge(job, "verify"), ctx.python, ctx.timeout)
    if ran is not None and found.status == "confirmed" and ctx.shrink_budget > 0:
        found = _shrunk(found, job, ran, oracles)
    if why and found.status == "confirmed":
        found = dataclasses.replace(found, reminimised=why)
    # Reused later only when something ran and reported; a verdict reached otherwise is kept for this run.
    return found, ran is not None and ran.result.reported


def _carried(job: Job, oracles: _Oracles) -> tuple[Verdict | None, str | None]:
    """(the carried verdict, None) when the earlier build's shrunk case still holds here; else (None, why not)."""
    carry, ctx = job.carry, oracles.ctx
    assert carry is not None and carry.shrink is not None
    ctx.say(f"carrying {carry.model}'s case from {carry.build} under {carry.config}")
    try:
        judged = oracles.judge(job, "carry")(carry.shrink.build, ctx.timeout)
    except Exception as exc:  # the carried build no longer renders
        return None, f"the case shrunk on {carry.build} could not be run here ({type(exc).__name__})"
    if not judged.passed:
        return None, f"the case shrunk on {carry.build} no longer reproduces: {judged.reason}"
    result = judged.result
    return dataclasses.replace(job.blank, status="confirmed", script=judged.script,
                               torch_version=result.torch_version, torch_git=result.torch_git,
                               shrunk=carry.shrunk, shrink=carry.shrink, component=carry.component,
                               maintainer=carry.maintainer, carried_from=carry.carried_from or carry.build), None


Settings = tuple[dict[str, Any], dict[str, Any]]   # (the flag's settings, the baseline's), each base + config


def _verify(blank: Verdict, built: ModelBuild | None, judge: shrink.Judge, python: str | None,
            timeout: float) -> tuple[Verdict, oracle.Judged | None]:
    """(verdict, what the oracle saw); None in place of the oracle's answer when nothing could run."""
    if not python:
        return dataclasses.replace(blank, reason="could not be run: the run recorded no interpreter"), None
    try:
        judged = judge(built, timeout)
    except Exception as exc:  # nothing stored to render from, or a template error: "not confirmed"
        return dataclasses.replace(blank, reason=f"could not be generated ({type(exc).__name__}: {exc})"), None
    status = "confirmed" if judged.passed else "unconfirmed"
    result = judged.result
    return dataclasses.replace(blank, status=status, reason=judged.reason, script=judged.script if judged.passed else "",
                               torch_version=result.torch_version, torch_git=result.torch_git), judged


def _remeasure(cached: Verdict, built: ModelBuild | None, judge: shrink.Judge,
               timeout: float) -> tuple[Verdict, oracle.Judged | None]:
    """A stored confirmed verdict judged again so it can be shrunk; None in place of the answer when its build is gone."""
    try:
        return cached, judge(built, timeout)
    except Exception:
        return cached, None


def _shrunk(found: Verdict, job: Job, original: oracle.Judged, oracles: _Oracles) -> Verdict:
    """The verdict with its shrink: the smallest script the oracle keeps (no shrink when it could not start).

    Shrinks from where an unfinished earlier shrink stopped; one stopped by the step's deadline stays unfinished
    (`shrunk` False: a later verification goes on from its build).
    """
    start = job.cached.shrink.build if job.cached and job.cached.shrink else job.built
    if not start or not original.passed:
        return dataclasses.replace(found, shrunk=True, shrink=None)
    ctx = oracles.ctx
    budget = min(ctx.shrink_budget, ctx.left())
    small = shrink.minimise(start, (original.script, original.result), oracles.judge(job, "shrink"),
                            shrink.Limits(budget, timeout=ctx.timeout), progress=ctx.progress,
                            label=f"{start.model} (reproducer {job.place})" if job.place else None)
    ctx.meter.shrank(job.group, small.stats["tries"], small.stats["kept"])
    cut = small.stats["stopped"] == "budget" and budget < ctx.shrink_budget
    return dataclasses.replace(found, script=small.script, shrunk=not cut, shrink=Shrink(small.build, small.stats),
                               maintainer=None)   # rendered again from the shrunk build


def _wants_shrink(cached: Verdict, budget: float, python: str | None) -> bool:
    """A stored confirmed verdict that was never shrunk, now that shrinking is on."""
    return bool(budget > 0 and python and cached.status == "confirmed" and not cached.shrunk)
