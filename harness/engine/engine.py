"""The sweep engine: plan items, run them in warm workers, store each outcome as it finishes.

The parent never imports torch (workers do; see harness/engine/pool.py). The store's
connection is used only here, in the main process, so every finished item is
committed at once and an interrupted sweep resumes where it stopped.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import sys
import time
import zlib
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, TypeVar

from harness.engine.configs import Checked, ConfigError, check_all_syntax
from harness.engine.configs import check as config_check
from harness.core.effects import BASELINE
from harness.core.options import Accuracy, RunOptions, SweepOptions
from harness.core.outcome import ANSWERED, Outcome
from harness.core.run_environment import BuildOrigin, RunEnvironment
from harness.engine.interpreter import CallFailed, call
from harness.core.model_build import ModelBuild
from harness.engine.events import Built, CacheCounts, ConfigSpace, Result
from harness.engine.pool import Group, Pool, PoolError
from harness.engine.progress import Progress
from harness.core.scrub import scrub
from harness.engine.flags import answering
from harness.engine.flags.pruning import Pruning, audit, eligible, in_group
from state import flags as stored_flags, history, leases, runs

log = logging.getLogger(__name__)
T = TypeVar("T")

_PATH_FIELDS = ("error_message", "traceback", "torch_frame")  # outcome text that may carry machine paths

# Fields of the environment that make two runs incomparable if they differ.


class ResumeError(ValueError):
    """The run to resume does not exist, is finished, or ran in another environment."""


class ConfigUnavailable(ConfigError):
    """run_items was asked for a config whose key the torch under test lacks."""


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep: workers stopped, finished items kept, run marked interrupted."""

    def __init__(self, run_id: int):
        super().__init__(run_id)
        self.run_id = run_id


@dataclass(frozen=True)
class SweepRequest:
    """models x (baseline + configs) under `options`; where it is kept (kind, nightly, shard) and what is had."""

    models: list[str]
    configs: dict[str, dict]                   # {name: settings}; baseline (no settings, when absent) always runs
    options: SweepOptions
    base_settings: dict[str, Any] = field(default_factory=dict)   # applied to every compile, baseline included
    kind: str = "sweep"                        # sweep | nightly | baseline | command: which listings show the run
    nightly: str | None = None                 # the nightly's date
    shard: str | None = None                   # "i/N" of a sharded nightly
    resume: int | None = None                  # continue this run: its stored models, configs and base settings
    progress: bool = True                      # the bar on stderr
    # What the caller knows of the build beyond what the workers see (the index and channel it came from),
    # stored with the environment.
    build: BuildOrigin | None = None
    prior: list[Outcome] = field(default_factory=list)   # outcomes already had on this torch (a baseline pass):
    population: dict[str, Any] | None = None   # stored, not run again; and how the models were drawn
    pruning: Pruning | None = None             # what may be pruned (read-set pruning) and its audit; None: trace all
    together: frozenset[str] = frozenset()     # named configs compiled together where equal (bot.pipeline.assemble)

    @classmethod
    def resuming(cls, run_id: int, options: SweepOptions, *, progress: bool = True) -> "SweepRequest":
        """Continue run `run_id` where it stopped (what it runs is what the run stored)."""
        return cls(models=[], configs={}, options=options, resume=run_id, progress=progress)

    def baseline_pass(self, models: list[str]) -> "SweepRequest":
        """The baseline alone over `models`, on the same torch, options and base settings: a run of kind
        `baseline`, which the population `graph-breaking` is drawn from."""
        return dataclasses.replace(self, models=list(models), configs={BASELINE: self.configs.get(BASELINE, {})},
                                   kind="baseline", nightly=None, shard=None, resume=None, prior=[],
                                   population=None, pruning=None)


def _pool(options: SweepOptions, base_settings: dict, n_groups: int, fresh: bool = False) -> Pool:
    return Pool(options, items=n_groups, base_settings=base_settings, fresh_workers=fresh)


def plan_groups(models: list[str], configs: dict[str, dict], done: set[tuple[str, str]] = frozenset(),
                prune: frozenset[str] = frozenset(), pool: bool = False,
                together: frozenset[str] = frozenset(), unanswered: frozenset[str] = frozenset(),
                audit: Mapping[str, frozenset[str]] | None = None,
                prune_audit: tuple[Mapping[str, list[str]], int] = ({}, 0)) -> list[Group]:
    """One group per model: baseline first, then its configs, skipping items already done; `prune`: the configs
    the worker may report without compiling when the baseline never read their keys (and, with `pool`, may
    compile together first when it did); `together`: configs compiled together after the baseline, never pruned;
    `unanswered`: configs whose later calls are always made (quarantined); `audit`: {model: the configs whose
    answered item its group traces in full too} (answering.in_group); `prune_audit`: the pruning audit's part drawn
    in the groups ({model: its order}, how many; pruning.in_group)."""
    names = [BASELINE] + [c for c in configs if c != BASELINE]
    groups, index = [], 0
    for model in models:
        items = []
        for name in names:
            if (model, name) not in done:
                items.append((index, name, configs.get(name, {})))
            index += 1
        if items:
            groups.append(Group(model, items, prune=prune, pool=pool, together=together, unanswered=unanswered,
                                audit=(audit or {}).get(model, frozenset()),
                                prune_audit=prune_audit[0].get(model, []), prune_audit_n=prune_audit[1]))
    return groups


def _stratum_lookup() -> Callable[[str], str | None]:
    """Strata for models that never built (their outcome has none); asks the zoo once, lazily."""
    cache: dict[str, str | None] = {}

    def lookup(model: str) -> str | None:
        if model not in cache:
            from harness import zoo   # late: scanning transformers is slow, and most outcomes carry their stratum

            try:
                cache.update({c.model: c.stratum for c in zoo.resolve([model])})
            except ValueError:  # zoo.UnknownModel, or a name that is no model glob: the stratum stays empty
                pass
            cache.setdefault(model, None)
        return cache[model]

    return lookup


def _outcome(outcome: Outcome, stratum_of: Callable[[str], str | None]) -> Outcome:
    # Stored without machine paths (the signature, made from the raw text, keeps only file names).
    scrubbed = {k: scrub(getattr(outcome, k)) for k in _PATH_FIELDS if getattr(outcome, k)}
    return dataclasses.replace(outcome, **scrubbed, stratum=outcome.stratum or stratum_of(outcome.model))


def answer_audit(accuracy: Accuracy, night: str | None, run_id: int) -> answering.AnswerAudit:
    """The answered items' audit of a run, seeded by its night (else the run): the same sample in the groups, after the
    sweep and on a resume."""
    return answering.AnswerAudit(accuracy.answer_audit, accuracy.answer_audit_min,
                                 zlib.crc32((night or f"run {run_id}").encode()))


def _audit_answers(conn: Any, request: SweepRequest, plan: "_Plan", after: Counter) -> None:
    """The answered items' audit (harness.engine.flags.answering) completed after the sweep: the part of its sample
    the groups did not trace in full (their findings are stored already) traced now, its findings stored; the full
    traces that replace answered items stored in their place; each config that disagreed quarantined for its next
    nights; `after` counts the items it traced."""
    accuracy = request.options.accuracy
    already = stored_flags.answer_audit(conn, plan.run_id)

    def trace(items: list[tuple[str, str]]) -> list[Outcome]:
        after["answer audit"] += len(items)
        return run_items(items, configs=plan.configs, base_settings=plan.base_settings, options=request.options,
                         progress=request.progress, answer=False)
    findings, replaced = answering.audit(runs.outcomes(conn, plan.run_id), plan.audit, plan.together, trace, already)
    stored_flags.record_answer_audit(conn, plan.run_id, findings)
    for outcome in replaced:
        runs.record_outcome(conn, plan.run_id, outcome)
        stored_flags.record_answered(conn, plan.run_id, outcome.model, outcome.config, None)
    stored_flags.quarantine(conn, plan.run_id, plan.night, accuracy.answer_quarantine, [*already, *findings])
    for f in findings:
        if f.disagreement:
            log.warning("answered from the baseline, but traced in full %s under %s differs (%s): the rule is off "
                        "for %s for the rest of the night and the next %d", f.model, f.config, f.disagreement,
                        f.config, accuracy.answer_quarantine)


def _pruning_trace(conn: Any, request: SweepRequest, plan: "_Plan",
                   after: Counter) -> Callable[[list[tuple[str, str]]], list[Outcome]]:
    """The pruning audit's trace after the sweep: its items after their baselines (`after_baselines`), each one's
    answering rule stored as the sweep stores an item's (an item stored as answered always has its rule); `after`
    counts them."""
    def trace(items: list[tuple[str, str]]) -> list[Outcome]:
        after["pruning audit"] += len(items)
        traced = after_baselines(items, request.options.accuracy.enabled, lambda its: trace_items(
            its, configs=plan.configs, base_settings=plan.base_settings, options=request.options,
            progress=request.progress))
        for outcome, rule in traced:
            stored_flags.record_answered(conn, plan.run_id, outcome.model, outcome.config, rule,
                                         answered=outcome.reason == ANSWERED)
        return [outcome for outcome, _ in traced]
    return trace


def after_baselines(items: list[tuple[str, str]], checks: bool,
                    trace: Callable[[list[tuple[str, str]]], list[T]]) -> list[T]:
    """The outcomes of `items` traced (the pruning audit's); with the checks on, each model's baseline is traced first
    in its group, so the screen may answer the items' later calls from it as it does in the sweep (a pruned pair's
    keys were never read: traced alone, each would make its later calls in full); the baselines' outcomes dropped."""
    if not checks:
        return trace(items)
    models = list(dict.fromkeys(m for m, _ in items))
    return trace([(m, BASELINE) for m in models] + items)[len(models):]


@dataclass(frozen=True)
class Swept:
    """A sweep that finished: its run (finalized), the builds its workers made, the config space they listed, and
    where a bench's time went: the wall seconds of its phases (the items, the pruning audit, the answer audit), the
    items each audit traced after the items (`after`), and why the items' later calls were made in full, counted
    (`traced_why`: harness.engine.flags.answering's reasons; the baselines left out)."""

    run: runs.Run
    builds: dict[str, ModelBuild]      # model -> its build, stored with the run (what a reproducer embeds)
    config_space: ConfigSpace          # kept with the run's environment (state.flags)
    seconds: dict[str, float] = field(default_factory=dict)
    after: dict[str, int] = field(default_factory=dict)
    traced_why: dict[str, int] = field(default_factory=dict)


def sweep(conn: Any, request: SweepRequest) -> Swept:
    """Run models x (baseline + configs), storing each outcome as it finishes; the finished run.

    `request.prior` outcomes are stored into a new run instead of run again; `request.pruning`: see
    harness.engine.flags.pruning (its audit runs here, after the items). A run that finishes is finalized here
    (effects, signature history): the engine ends it, so the engine finalizes it, once. An interrupted or failed
    run is not finalized; Ctrl-C is SweepInterrupted, a broken interpreter leaves the run resumable.
    """
    plan = _prepare(conn, request)
    if plan.stored is not None:   # a resumed run continues in the mode it was swept in (and its audits too)
        request = dataclasses.replace(request, options=dataclasses.replace(request.options,
                                                                           mode=plan.stored.options.sweep.mode))
    pool = _pool(request.options, plan.base_settings, len(plan.groups()))
    try:
        _start(pool, request.options)   # the workers import torch while we check the configs
        if plan.stored is None:
            plan.check(request.options.python)
        found, space = pool.environment()
        env = _open_run(conn, request, plan, found)
        plan.audit = answer_audit(request.options.accuracy, plan.night, plan.run_id)
        stored_flags.record_space(conn, env, space.modules, space.entries)
        seconds, start, after, why = {}, time.perf_counter(), Counter(), Counter()
        builds = _store_items(conn, plan, pool, request.progress, why)
        seconds["items"], start = time.perf_counter() - start, time.perf_counter()
        if plan.prune:
            audit(conn, plan.run_id, configs=plan.configs, pruning=request.pruning,
                  trace=_pruning_trace(conn, request, plan, after))
        seconds["pruning audit"], start = time.perf_counter() - start, time.perf_counter()
        _audit_answers(conn, request, plan, after)
        seconds["answer audit"] = time.perf_counter() - start
        runs.finish_run(conn, plan.run_id, "finished")
    except BaseException as exc:
        pool.close(kill=True)
        interrupted = _abandon(conn, plan.run_id, exc)
        if interrupted is None:
            raise
        raise interrupted from None
    finally:
        if plan.lease is not None:
            plan.lease.release(conn)
    history.finalize_run(conn, plan.run_id)
    return Swept(runs.get_run(conn, plan.run_id), builds, space, seconds, dict(after), dict(why))


@dataclass
class _Plan:
    """What a sweep runs once its request is read: the request's (a new run) or the stored run's (a resume)."""

    models: list[str]
    configs: dict[str, dict]
    base_settings: dict[str, Any]
    done: set[tuple[str, str]]                 # items not to run: stored already, or had (prior)
    prior: list[Outcome] = field(default_factory=list)
    prune: frozenset[str] = frozenset()
    pooled: bool = False
    together: frozenset[str] = frozenset()
    unanswered: frozenset[str] = frozenset()   # configs under quarantine: their later calls always made
    night: str | None = None                   # the nightly's date (the stored one, on a resume)
    audit: answering.AnswerAudit | None = None   # the answer audit, once the run is open (it is seeded by it)
    pruning: Pruning | None = None             # read-set pruning and its audit, where it prunes anything
    stored: runs.Run | None = None             # the run resumed
    lease: leases.Lease | None = None
    run_id: int | None = None
    unavailable: dict[str, Any] = field(default_factory=dict)

    def groups(self) -> list[Group]:
        """The items still to run, one group per model."""
        audit = None if self.audit is None else answering.in_group(
            self.models, [c for c in self.configs if c != BASELINE], self.audit)
        prune_audit = ({}, 0) if self.pruning is None else in_group(self.models, self.prune, self.pruning)
        return plan_groups(self.models, self.configs, self.done, self.prune, self.pooled, self.together,
                           self.unanswered, audit, prune_audit)

    def check(self, python: str | None) -> None:
        """In the interpreter under test, before any model runs: ConfigError on a wrong type, a config whose key
        that torch lacks set aside (unavailable)."""
        checked = check_configs(self.configs, self.base_settings, python)
        self.configs, self.unavailable = checked.configs, checked.unavailable


def _prepare(conn: Any, request: SweepRequest) -> _Plan:
    """The plan of a new run (malformed config keys stop it before a worker starts), or of the run resumed
    (claimed first: a live holder is refused at once)."""
    if request.resume is None:
        configs = {BASELINE: request.configs.get(BASELINE, {}),
                   **{k: v for k, v in request.configs.items() if k != BASELINE}}
        check_all_syntax(configs, request.base_settings)
        prior = [o for o in request.prior if o.model in set(request.models) and o.config in configs]
        plan = _Plan(list(request.models), configs, request.base_settings, {(o.model, o.config) for o in prior}, prior)
    else:
        plan = _resumed(conn, request.resume)
    plan.prune = eligible(request.pruning, plan.configs, stored_flags.disabled_keys(conn))
    plan.pooled = bool(request.pruning and request.pruning.pool)
    plan.pruning = request.pruning if plan.prune else None
    plan.together = frozenset(request.together) & set(plan.configs) - plan.prune
    plan.night = request.nightly if request.resume is None else plan.stored.nightly
    plan.unanswered = frozenset(q.config for q in stored_flags.quarantined(conn, plan.night)) & set(plan.configs)
    return plan


def _resumed(conn: Any, run_id: int) -> _Plan:
    stored = runs.get_run(conn, run_id)
    if stored is None:
        raise ResumeError(f"run {run_id} does not exist")
    if stored.status == "finished":
        raise ResumeError(f"run {run_id} is already finished")
    try:
        lease = leases.acquire(conn, run_id)
    except leases.LeaseHeld as exc:
        raise ResumeError(str(exc)) from None
    lease.keep_alive()
    return _Plan(stored.models, stored.configs, stored.base_settings, runs.finished_items(conn, run_id),
                 stored=stored, lease=lease, run_id=run_id)


def _start(pool: Pool, options: SweepOptions) -> None:
    try:
        pool.start()
    except OSError as exc:   # no such interpreter: a bad --python, said in one line
        raise ConfigError(f"{options.python or sys.executable}: cannot start the workers ({exc.strerror})") from None


def _open_run(conn: Any, request: SweepRequest, plan: _Plan, found: RunEnvironment) -> RunEnvironment:
    """The run's environment (as stored); a new run is created (and claimed) with it, a resumed one checked."""
    # "python": the interpreter the workers were started with, what a reproducer is verified under.
    env = dataclasses.replace(found, python=request.options.python or sys.executable)
    env = env.with_build(request.build) if request.build else env
    if plan.stored is not None:
        _check_same_environment(plan.stored.environment, env, plan.stored.id)
        return env
    stored = RunOptions(sweep=request.options, population=request.population or None)
    plan.lease = leases.create_held(conn, lambda: runs.create_run(
        conn, environment=env, models=plan.models, configs=plan.configs, base_settings=plan.base_settings,
        options=stored, kind=request.kind, nightly=request.nightly,
        shard=request.shard, unavailable=plan.unavailable))
    plan.run_id = plan.lease.run_id
    plan.lease.keep_alive()
    for outcome in plan.prior:
        runs.record_outcome(conn, plan.run_id, outcome)
    return env


def _store_items(conn: Any, plan: _Plan, pool: Pool, progress: bool, why: Counter) -> dict[str, ModelBuild]:
    """Run the plan's items, storing each outcome (and each model's build and baseline read set) as it comes; `why`
    counts why their later calls were made in full."""
    builds: dict[str, ModelBuild] = {}
    stratum_of = _stratum_lookup()
    bar = Progress(total=len(plan.models) * len(plan.configs), done=len(plan.done), enabled=progress,
                   label=f"sweep {len(plan.models)} models")
    cache = CacheTally()
    baselines: dict[str, Outcome] = {}   # what the pruning audit's traces in the groups are compared with
    with _running(pool, bar):
        for event in pool.run(plan.groups()):
            if isinstance(event, CacheCounts):
                cache.add(event)
                continue
            if isinstance(event, Built):     # once per model: what its reproducer is rendered from
                builds[event.build.model] = event.build
                runs.record_model(conn, plan.run_id, event.build)
                continue
            outcome = _outcome(event.outcome, stratum_of)
            if event.config_reads is not None:
                stored_flags.record_reads(conn, plan.run_id, outcome.model, event.config_reads)
            if event.window_reads is not None:
                stored_flags.record_windows(conn, plan.run_id, outcome.model, event.window_reads)
            runs.record_outcome(conn, plan.run_id, outcome)
            stored_flags.record_answered(conn, plan.run_id, outcome.model, outcome.config, event.answered_by,
                                         answered=outcome.reason == ANSWERED)
            if event.audited:   # the answer audit, made in the group: its finding now, so a resume keeps it
                stored_flags.record_answer_audit(conn, plan.run_id, [stored_flags.AnswerFinding(
                    outcome.model, outcome.config, event.disagreement)])
            if outcome.config == BASELINE:
                baselines[outcome.model] = outcome
            elif event.traced_why is not None:
                why[event.traced_why] += 1
            if event.prune_audit:   # the pruning audit, made in the group: the item was counted when it was pruned
                stored_flags.record_audit(conn, plan.run_id, [stored_flags.AuditResult(
                    outcome.model, outcome.config, tuple(plan.configs[outcome.config]), baselines[outcome.model],
                    outcome)])
                continue
            bar.advance(crashed=outcome.crashed)
    if cache.compiles:
        log.info("%s", cache.describe())
    return builds


@dataclass
class CacheTally:
    """The compile cache's hits and misses over a sweep's inductor compiles (CacheCounts events, summed)."""

    compiles: int = 0
    fxgraph_hit: int = 0
    fxgraph_miss: int = 0
    autograd_hit: int = 0
    autograd_miss: int = 0

    def add(self, counts: CacheCounts) -> None:
        """Count one compile's hits and misses."""
        self.compiles += 1
        self.fxgraph_hit += counts.fxgraph_hit
        self.fxgraph_miss += counts.fxgraph_miss
        self.autograd_hit += counts.autograd_hit
        self.autograd_miss += counts.autograd_miss

    def describe(self) -> str:
        """One log line."""
        return (f"compile cache over {self.compiles} compiles: FX graphs {self.fxgraph_hit} hits, "
                f"{self.fxgraph_miss} misses; AOTAutograd {self.autograd_hit} hits, {self.autograd_miss} misses")


def _abandon(conn: Any, run_id: int | None, exc: BaseException) -> SweepInterrupted | None:
    """End the run a sweep could not finish; the SweepInterrupted to raise for Ctrl-C (None: raise `exc`)."""
    if run_id is None:
        return None
    if isinstance(exc, KeyboardInterrupt):
        runs.finish_run(conn, run_id, "interrupted", reason="interrupted (Ctrl-C or SIGTERM)")
        return SweepInterrupted(run_id)
    if isinstance(exc, PoolError):
        # The interpreter, not the run, is broken: keep the run resumable with a working --python.
        runs.finish_run(conn, run_id, "interrupted", reason=str(exc).splitlines()[0][:500])
    elif not isinstance(exc, ResumeError):
        runs.finish_run(conn, run_id, "failed", reason=f"{type(exc).__name__}: {exc}"[:500])
    return None


def check_configs(configs: dict[str, dict], base_settings: dict, python: str | None) -> Checked:
    """The configs checked in `python`'s torch (a subprocess): runnable ones and unavailable ones."""
    checked = config_check(configs, base_settings, python)
    for line in checked.describe():
        log.warning("%s", line)
    return checked


def _check_same_environment(old: RunEnvironment, new: RunEnvironment, run_id: int) -> None:
    diffs = old.differences(new)
    if diffs:
        raise ResumeError(f"run {run_id} ran in another environment ({'; '.join(diffs)}); start a new sweep instead")


def run_items(items: list[tuple[str, str]], *, configs: dict[str, dict], base_settings: dict,
              options: SweepOptions, fresh_workers: bool = False, progress: bool = False,
              answer: bool = True, together: frozenset[str] = frozenset()) -> list[Outcome]:
    """Run (model, config) items without storing them; outcomes in the order of `items` (`trace_items`'s)."""
    return [outcome for outcome, _ in trace_items(items, configs=configs, base_settings=base_settings,
                                                  options=options, fresh_workers=fresh_workers, progress=progress,
                                                  answer=answer, together=together)]


def trace_items(items: list[tuple[str, str]], *, configs: dict[str, dict], base_settings: dict,
                options: SweepOptions, fresh_workers: bool = False, progress: bool = False,
                answer: bool = True, together: frozenset[str] = frozenset()) -> list[tuple[Outcome, str | None]]:
    """Run (model, config) items without storing them; (outcome, the rule that answered its later calls) in the order
    of `items`.

    Every config named must be in `configs` (baseline, when absent, is no settings).
    fresh_workers: every item in a new worker (flake confirmation); answer: False traces every call in full (the
    answered items' audit); together: configs compiled together where their results are equal (a bench).
    """
    checked = check_configs({name: configs.get(name, {}) for _, name in items}, base_settings, options.python)
    if checked.unavailable:
        raise ConfigUnavailable(checked.describe()[0])
    settings_of = {}
    for _, name in items:
        if name not in configs and name != BASELINE:
            raise KeyError(f"config {name!r} is not in the configs given")
        settings_of[name] = configs.get(name, {})
    if fresh_workers:
        groups = [Group(model, [(i, name, settings_of[name])], answer=answer) for i, (model, name) in enumerate(items)]
    else:
        by_model: dict[str, list] = {}
        for i, (model, name) in enumerate(items):
            by_model.setdefault(model, []).append((i, name, settings_of[name]))
        groups = [Group(model, its, answer=answer, together=together) for model, its in by_model.items()]
    pool = _pool(options, base_settings, len(groups), fresh=fresh_workers)
    return _traced(pool, groups, items, progress, f"compile {len(items)} items")


# The label an eager check's outcomes carry where a sweep's name their config: no config ran.
EAGER = "eager"


def eager_check(models: list[str], *, options: SweepOptions, progress: bool = False) -> list[Outcome]:
    """Build each model and run one eager forward, in workers (`zoo check`); outcomes in the order of `models`."""
    groups = [Group(model, [(i, EAGER, {})], "eager") for i, model in enumerate(models)]
    pool = _pool(options, {}, len(groups))
    return _outcomes(pool, groups, [(m, EAGER) for m in models], progress, f"eager {len(models)} models")


def describe(models: list[str], *, options: SweepOptions) -> dict[str, ModelBuild]:
    """{model: its build} (what a reproducer embeds), from workers; nothing is stored.

    Models that do not build, or have no transformers config to embed, are left out.
    """
    groups = [Group(model, [(i, EAGER, {})], "eager") for i, model in enumerate(models)]
    pool = _pool(options, {}, len(groups))
    with _running(pool, Progress(total=0, enabled=False)):
        return {e.build.model: e.build for e in pool.run(groups) if isinstance(e, Built)}


@contextmanager
def _running(pool: Pool, bar: Progress) -> Iterator[None]:
    """While the pool runs groups: on the way out the bar is closed and so is the pool (its workers killed
    when anything went wrong, a caller that stopped listening included)."""
    try:
        yield
    except BaseException:
        pool.close(kill=True)
        raise
    finally:
        bar.close()
    pool.close()


def _outcomes(pool: Pool, groups: list[Group], items: list[tuple[str, str]], progress: bool,
              label: str) -> list[Outcome]:
    """Run the groups on the pool and close it; one outcome per (model, label) item, in order."""
    return [outcome for outcome, _ in _traced(pool, groups, items, progress, label)]


def _traced(pool: Pool, groups: list[Group], items: list[tuple[str, str]], progress: bool,
            label: str) -> list[tuple[Outcome, str | None]]:
    """`_outcomes`, each with the rule that answered its later calls (events.Result.answered_by)."""
    results: list[tuple[Outcome, str | None] | None] = [None] * len(items)
    stratum_of = _stratum_lookup()
    bar = Progress(total=len(items), enabled=progress, label=label)
    with _running(pool, bar):
        for event in pool.run(groups):
            if isinstance(event, Result):
                results[event.index] = _outcome(event.outcome, stratum_of), event.answered_by
                bar.advance(crashed=event.outcome.crashed)
    return [r if r is not None else (Outcome(model=m, config=c, status="killed", error_type="killed",
                                             error_message="no result", signature="killed"), None)
            for r, (m, c) in zip(results, items)]


@dataclass
class JobResult:
    """What a job answered for one model (status ok), or how it ended without an answer."""

    model: str
    status: str                  # ok | error (the job raised) | timeout | killed (the worker died or went over memory)
    data: Any = None             # the job's answer (JSON data) when ok
    error: str | None = None     # why there is no answer, in one line


def run_job(job: str, models: list[str], *, options: SweepOptions, progress: bool = False) -> Iterator[JobResult]:
    """Call the caller's job on each model in workers; results in the order they finish.

    job: "module:function", imported by the worker; function(model, device) returns JSON data.
    The engine knows nothing of what it does (`zoo lock` passes discovery's).
    """
    groups = [Group(model, [(i, job, {})], "job", job) for i, model in enumerate(models)]
    pool = _pool(options, {}, len(groups))
    bar = Progress(total=len(models), enabled=progress, label=f"{job.rpartition(':')[2]} {len(models)} models")
    with _running(pool, bar):
        for event in pool.run(groups):
            if isinstance(event, Result):
                lines = (event.outcome.error_message or "").strip().splitlines()
                data = None if event.data is None else json.loads(event.data)   # JSON text (worker.run_job)
                result = JobResult(event.outcome.model, event.outcome.status, data, lines[0] if lines else None)
                bar.advance(crashed=result.status != "ok")
                yield result


def collect_environment(python: str | None = None, device: str = "cpu") -> dict:
    """The run environment as seen by the interpreter that runs the workers (no torch import here)."""
    try:
        return call("harness.engine.environment:gather", device, python=python, timeout=600)
    except CallFailed as exc:
        raise RuntimeError(f"{exc.python}: cannot gather the environment: {exc.tail}") from None
