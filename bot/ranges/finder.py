"""Regression ranges for a nightly: which nightlies a confirmed new crash or fix lies between.

The two ends come from the stored runs (the previous comparable nightly and this
one): nothing is installed for them, and two nightlies adjacent on the index give
the range at once. The nightlies strictly between are bisected (bot.ranges.bisect),
installed and swept through the `RangeSteps` the caller passes (the pipeline's provider
and `range_sweep`: bot.pipeline.steps.Steps.range_steps). Cost rule: a probed build is swept once, for every item of
every search still pending, and its outcomes are kept for the searches after it;
the night installs at most `[ranges] installs` builds (past it: `OutOfInstalls`,
and the range found so far is kept as "bounded").

A target groups the models of one (config, signature, kind). A build is "new"
for it when any of its models tested there is in the new state (crashes, for a
new crash; compiles, for a fix) and "old" when all of them are in the old one;
models that could not be built there do not count, and a build where none could
is skipped for that target. Failing is what `harness.core.diff` calls failing.
"""
from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol

from bot.ranges.bisect import Bisection, OutOfInstalls, Probe, SkipNightly, is_date, outcome_key, search
from harness.core.diff import DiffResult
from bot.settings import Settings
from bot.builds.provider import Nightly, SpecError
from bot.builds.wheel_index import ProviderError, dev_date
from harness.core.modes import Mode
from harness.core.outcome import UNTESTED_STATUSES, Outcome
from state import ranges as store
from state import runs as runs_mod
from state.ranges import Build, Range
from state.runs import Run

log = logging.getLogger(__name__)

Outcomes = Mapping[tuple[str, str], Outcome]


class ProvideStep(Protocol):
    """A torch build named the way people name them, installed in its venv (bot.pipeline.steps.provide)."""

    def __call__(self, settings: Settings, torch: str, date: str | None, progress: bool) -> Nightly: ...


class SweepItemsStep(Protocol):
    """The items run once on an installed build, nothing stored (bot.pipeline.steps.range_sweep)."""

    def __call__(self, items: list[tuple[str, str]], *, configs: dict[str, dict], base_settings: dict[str, Any],
                 build: Nightly, settings: Settings, mode: Mode) -> list[Outcome]: ...


class ListBuildsStep(Protocol):
    """The index's installable builds, oldest first (bot.pipeline.steps.list_builds)."""

    def __call__(self, settings: Settings) -> list[str]: ...


@dataclass(frozen=True)
class RangeSteps:
    """The range search's calls into other areas. No defaults: the real ones live above this package, in
    bot.pipeline.steps (`Steps.range_steps()` makes this from the pipeline's own); tests pass twins."""

    provide: ProvideStep
    sweep_items: SweepItemsStep
    list_builds: ListBuildsStep


@dataclass(frozen=True)
class Target:
    """The models of one (config, signature) that made one transition (new_crash or fixed)."""

    config: str
    signature: str
    kind: str                    # new_crash | fixed
    models: tuple[str, ...]

    @property
    def key(self) -> tuple[str, str, str]:
        """(config, signature, kind), as a stored range is keyed."""
        return (self.config, self.signature, self.kind)

    @property
    def items(self) -> list[tuple[str, str]]:
        """The (model, config) items a probe of a build must run for this target."""
        return [(m, self.config) for m in self.models]


def state(target: Target, outcomes: Outcomes) -> str | None:
    """`old`, `new`, or None when none of the target's models could be tested on the build."""
    tested = [o for o in (outcomes.get(item) for item in target.items) if o is not None
              and o.status not in UNTESTED_STATUSES]
    if not tested:
        return None
    old_failed = target.kind == "fixed"
    return "new" if any((o.status != "ok") != old_failed for o in tested) else "old"


@dataclass
class RangeReport:
    """What one range search did: the ranges stored, builds installed, sweeps run."""

    ranges: list[Range] = field(default_factory=list)
    installs: int = 0
    sweeps: int = 0
    items_swept: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"ranges": [r.to_dict() for r in self.ranges], "installs": self.installs, "sweeps": self.sweeps,
                "items_swept": self.items_swept}


def targets(result: DiffResult | None, keys: Iterable[tuple[str, str]] | None = None) -> list[Target]:
    """One target per (config, signature, kind) of the believed new crashes and fixes (only `keys`, when given)."""
    wanted = set(keys) if keys is not None else None
    groups: dict[tuple[str, str, str], list[str]] = {}
    for t in (result.believed() if result else []):
        side = t.after if t.transition == "new_crash" else t.before if t.transition == "fixed" else None
        if side is None or not side.signature:
            continue
        if wanted is None or (t.config, side.signature) in wanted:
            groups.setdefault((t.config, side.signature, t.transition), []).append(t.model)
    return [Target(c, s, k, tuple(sorted(models))) for (c, s, k), models in sorted(groups.items())]


def series_problem(run: Run, prev: Run | None) -> str | None:
    """Why the two runs have no series of nightlies between them to search, or None when they do."""
    if prev is None:
        return "no previous run to compare with"
    for which, r in (("this run", run), (f"the previous run ({prev.id})", prev)):
        env = r.environment
        if r.kind != "nightly" or not r.nightly:
            return f"{which} is a {r.kind} run, not a nightly"
        if not env.torch_index:
            return f"{which} used a torch not installed from an index (current torch or an interpreter path)"
        if not dev_date(env.torch_version or ""):
            return f"{which} used torch {env.torch_version}, which is not a dated nightly"
    if (run.environment.torch_index, run.environment.torch_channel) != \
            (prev.environment.torch_index, prev.environment.torch_channel):
        return "the two runs installed torch from different indexes or channels"
    if end(prev).date >= end(run).date:
        return f"the previous run's nightly ({end(prev).date}) is not older than this one ({end(run).date})"
    return None


def end(run: Run) -> Build:
    """A run's nightly as a range end: its date, torch version and git commit, as stored."""
    env = run.environment
    return Build(dev_date(env.torch_version or "") or run.nightly, env.torch_version, env.torch_git)


class Prober:
    """Installs and sweeps builds for the searches of one night: each build once, within the install budget."""

    def __init__(self, settings: Settings, run: Run, pending: list[Target], *, seams: RangeSteps,
                 budget: int) -> None:
        self.settings, self.run, self.pending = settings, run, list(pending)
        self.seams, self.budget = seams, budget
        self.cache: dict[str, tuple[Build, Outcomes] | None] = {}   # None: could not be installed
        self.installs = self.sweeps = self.items_swept = 0

    def done(self, target: Target) -> None:
        """A search finished: later probes need not run its items."""
        self.pending = [t for t in self.pending if t != target]

    def __call__(self, label: str) -> tuple[Build, Outcomes]:
        if label not in self.cache:
            if self.installs >= self.budget:
                raise OutOfInstalls(label)
            self.installs += 1
            self.cache[label] = self._probe(label)
        hit = self.cache[label]
        if hit is None:
            raise SkipNightly(label)
        return hit

    def _probe(self, label: str) -> tuple[Build, Outcomes] | None:
        try:
            built = self.seams.provide(self.settings, "nightly", label, False)
        except (ProviderError, SpecError) as exc:
            log.warning("range: skipping nightly %s: %s", label, exc)
            return None
        items = list(dict.fromkeys(item for t in self.pending for item in t.items))
        configs = {c: self.run.configs.get(c, {}) for _, c in items}
        try:
            outcomes = self.seams.sweep_items(items, configs=configs, base_settings=self.run.base_settings, build=built,
                                              settings=self.settings, mode=self.run.options.sweep.mode)
        except Exception:   # a build the engine cannot sweep is untested, like one that cannot be installed
            log.exception("range: the sweep of nightly %s failed; skipping it", label)
            return None
        self.sweeps += 1
        self.items_swept += len(items)
        return Build(label, built.version, built.git), {(o.model, o.config): o for o in outcomes}


def judge(target: Target, prober: Prober) -> Callable[[str], Probe]:
    """The search's probe for one target: the build's outcomes (shared by every target), judged old or new."""
    def probe(label: str) -> Probe:
        build, outcomes = prober(label)
        keys = {m: outcome_key(outcomes[(m, target.config)]) for m in target.models if (m, target.config) in outcomes}
        return Probe(build.date, build.version, build.git, state(target, outcomes), outcomes=keys)
    return probe


def _end(build: Build, key: str) -> Probe:
    """A known end of the range (from a stored run) as the search takes it."""
    return Probe(build.date, build.version, build.git, key)


def _build(probe: Probe) -> Build:
    """An end the search found, as a stored range keeps it."""
    return Build(probe.date, probe.version, probe.git)


def _stored(run_id: int, target: Target, found: Bisection, reason: str | None) -> Range:
    rows = [{"date": p.date, "version": p.version, "git": p.git, "state": p.key or "untested",
             "outcomes": p.outcomes} for p in found.steps]
    return Range(run_id=run_id, config=target.config, signature=target.signature, kind=target.kind,
                 status=found.status, good=_build(found.good), bad=_build(found.bad), models=list(target.models),
                 installs=len(found.steps) + len(found.skipped), probes=rows, reason=reason)


def _reason(found: Bisection, prober: Prober) -> str | None:
    parts = []
    if found.status == "bounded":
        parts.append(f"stopped after {prober.installs} installs ([ranges] installs = {prober.budget}); "
                     f"{found.remaining} nightlies left between")
    if found.skipped:
        parts.append("skipped (could not be installed or tested): " + ", ".join(found.skipped))
    return "; ".join(parts) or None


def search_run(conn: sqlite3.Connection, run_id: int, prev_id: int | None, result: DiffResult | None,
               settings: Settings, *, seams: RangeSteps, keys: Iterable[tuple[str, str]] | None = None,
               starts: dict[tuple[str, str, str], tuple[Build, Build]] | None = None) -> RangeReport:
    """Search and store the ranges of `run_id`'s believed new crashes and fixes (only `keys`, when given).

    Without `keys`, a target already searched for this run is not searched again (its stored range is
    reported); with `keys` (the `bisect` command) those are searched again and replaced.
    starts: narrower ends to search between for some targets (a bounded range searched again).
    """
    report = RangeReport()
    found_targets = targets(result, keys)
    if not found_targets or settings.ranges.installs <= 0:
        return report
    if keys is None:
        # A nightly published again (reused, merged again) keeps the ranges it has: no second search.
        have = {r.key: r for r in store.for_run(conn, [run_id])}
        report.ranges = [have[t.key] for t in found_targets if t.key in have]
        found_targets = [t for t in found_targets if t.key not in have]
        if not found_targets:
            return report
    run = runs_mod.get_run(conn, run_id)
    prev = runs_mod.get_run(conn, prev_id) if prev_id is not None else None
    problem, status, labels = series_problem(run, prev), "no_series", []
    if problem is None:
        try:
            labels = seams.list_builds(settings)
        except ProviderError as exc:
            problem, status = f"cannot list the nightlies: {exc}", "failed"
    if problem:
        for t in found_targets:
            r = Range(run_id=run_id, config=t.config, signature=t.signature, kind=t.kind, status=status,
                      good=end(prev) if prev else Build(None), bad=end(run), models=list(t.models), reason=problem)
            store.record(conn, r)
            report.ranges.append(r)
        return report
    prober = Prober(settings, run, found_targets, seams=seams, budget=settings.ranges.installs)
    for t in found_targets:
        good, bad = (starts or {}).get(t.key) or (end(prev), end(run))
        between = [lb for lb in labels if is_date(lb) and good.date < lb < bad.date]
        found = search(between, judge(t, prober), good=_end(good, "old"), bad=_end(bad, "new"))
        prober.done(t)
        r = _stored(run_id, t, found, _reason(found, prober))
        store.record(conn, r)
        report.ranges.append(r)
    report.installs, report.sweeps, report.items_swept = prober.installs, prober.sweeps, prober.items_swept
    return report
