"""The pipeline's steps: the one public function per call into another area, and the typed seams tests replace.

The nightly pipeline (bot/pipeline/nightly.py) and the comment commands (bot/commands/work.py,
through `CommandSteps.pipeline`) call these functions; a test swaps one step (usually `sweep`) for
a cheap twin that has the same signature, checked through the Protocols below.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from bot.builds import provider, wheel_index
from bot.view import run_view
from harness.core.diff import DiffResult
from bot.github.port import Publisher
from bot.github.publish import PublishSummary, Unreachable
from bot.ranges.finder import ListBuildsStep, RangeReport, RangeSteps
from bot.ranges.finder import SweepItemsStep as RangeSweepStep
from bot.verify.steps import VerifySteps
from bot.view.run_view import RunView
from bot.settings import Settings
from harness.core.modes import DEFAULT as DEFAULT_MODE, Mode
from harness.core.outcome import Outcome
from harness.engine.engine import SweepRequest
from harness.engine.events import ConfigSpace
from harness.zoo.select import Candidate
from state.culprits import CommitRange
from state.ranges import Build
from state.resolutions import Tally
from state.runs import Run
from state.verdicts import RunVerdict

log = logging.getLogger(__name__)


# ---- the steps ---------------------------------------------------------------------------------

def select_configs(settings: Settings, names: list[str]) -> dict[str, dict]:
    """{name: settings}, baseline first, of the catalog's configs among `names`; ConfigError (a ValueError) for
    unknown names. A named set (all-dynamo, ...) is only checked here: it expands in the torch under test
    (expand_sets), once the nightly has one."""
    from harness.engine import configs
    from harness.engine.flags import sets
    sets.refuse(names, settings.sweep.backend, how='[sweep] backend = "inductor"')   # nightly has no --backend
    return configs.select(configs.load_catalog(settings.sweep.config_file), [n for n in names if n not in sets.NAMED])


def expand_sets(settings: Settings, names: list[str], *, python: str | None) -> dict[str, dict]:
    """The configs of the named sets among `names`, expanded in the torch at `python`; {} when no set is named."""
    from harness.engine.flags import sets
    return sets.expand_named(names, backend=settings.sweep.backend, python=python)


def candidates(patterns: list[str]) -> list[Candidate]:
    """Zoo candidates (name and stratum) for globs; the embedded default corpus when none are given."""
    from harness import zoo
    if not patterns:
        from harness.zoo.corpus import DEFAULT_CORPUS
        patterns = list(DEFAULT_CORPUS)
    return zoo.resolve(list(patterns))


def resolve_models(patterns: list[str]) -> list[str]:
    """Model class names for globs; the embedded default corpus when none are given."""
    return [c.model for c in candidates(patterns)]


def sweep(conn: sqlite3.Connection, request: SweepRequest) -> Run:
    """Sweep (the engine stores, finishes and finalizes the run); the run. The unsafe flag table is checked against
    the config space its workers listed (`unsafe_unmatched`)."""
    from harness.engine import engine
    swept = engine.sweep(conn, request)
    unsafe_unmatched(swept.config_space)
    return swept.run


def unsafe_unmatched(space: ConfigSpace, table: Path | None = None) -> list[str]:
    """The unsafe flag table's keys the torch under test has no flag for (a typo, or a key this build removed: the
    entry marks nothing unsafe), each one warning line naming it, as exclusions.toml's are (the same rule,
    `sets.unmatched`, over the keys of either table)."""
    from harness.core import unsafe
    from harness.engine.flags import sets
    path = table or unsafe.TABLE
    keys = sets.unmatched(dict.fromkeys(unsafe.load(path)), space.modules, space.entries)
    for key in keys:
        log.warning("%s: %s matches no flag of the torch under test (a typo, or a key this build removed)",
                    path.name, key)
    return keys


def diff_with_previous(conn: sqlite3.Connection, run: Run) -> tuple[Run | None, DiffResult | None]:
    """(previous comparable run, the diff from it), or (None, None) for a first run."""
    from bot.view.stored_diff import diff_runs
    from state import history
    prev = history.previous_comparable(conn, run, history.models_of(conn, run))
    if prev is None:
        return None, None
    return prev, diff_runs(conn, prev, run)


def confirm(conn: sqlite3.Connection, run_id: int, result: DiffResult | None, settings: Settings,
            python: str | None) -> DiffResult | None:
    """Re-run the new crashes and fixes in fresh workers; the same diff with flaky ones marked.

    A first run (no diff) re-runs each of its tracked crashes: all are new, and none may be filed unconfirmed.
    """
    from bot.pipeline import flake
    if settings.confirm.runs <= 0 or (result is not None and not result.news()):
        return result
    transitions = result.transitions if result is not None else flake.first_night(conn, run_id)
    if not transitions:
        return result
    from harness.engine.engine import ConfigUnavailable
    from state import runs
    run = runs.get_run(conn, run_id)
    try:
        # the modules the run's workers imported (--import: models registered there) rebuild its models again
        # ... in the run's mode: a train crash is confirmed by train re-runs
        options = dataclasses.replace(settings.sweep_options(python, run.options.sweep.extra_modules),
                                      mode=run.options.sweep.mode)
        confirmed = flake.confirm(conn, run_id, transitions, configs=run.configs, base_settings=run.base_settings,
                                  options=options, runs=settings.confirm.runs)
    except ConfigUnavailable as exc:   # this host's torch lacks a flag the run swept (a merge): nothing re-runs
        log.warning("flake confirmation not run: %s; the run's crashes stay unconfirmed", exc)
        return result
    return dataclasses.replace(result, transitions=confirmed) if result is not None else None


def list_builds(settings: Settings) -> list[str]:
    """The index's installable builds, oldest first: nightlies by date (ProviderError when it cannot be read)."""
    return wheel_index.build_labels(wheel_index.list_wheels(settings.nightly))


def range_sweep(items: list[tuple[str, str]], *, configs: dict[str, dict], base_settings: dict[str, Any],
                build: provider.Nightly, settings: Settings, mode: Mode = DEFAULT_MODE) -> list[Outcome]:
    """Run the items once on an installed build in the run's mode (nothing stored); a config that build lacks is
    left out."""
    from harness.engine import configs as configs_mod
    from harness.engine import engine
    options = dataclasses.replace(settings.sweep_options(build.python), mode=mode)
    try:
        return engine.run_items(items, configs=configs, base_settings=base_settings, options=options)
    except engine.ConfigUnavailable:
        # Rare: a key this build lacks. Its config's items are untested there; the rest still run, once.
        runnable = configs_mod.check(configs, base_settings, build.python).configs
        kept = [(m, c) for m, c in items if c in runnable]
        return engine.run_items(kept, configs=configs, base_settings=base_settings, options=options) if kept else []


def ranges(conn: sqlite3.Connection, run_id: int, prev_id: int | None, result: DiffResult | None,
           settings: Settings, *, seams: RangeSteps, keys: list[tuple[str, str]] | None = None,
           starts: dict[tuple[str, str, str], tuple[Build, Build]] | None = None) -> RangeReport:
    """Search and store the regression ranges of the run's confirmed new crashes and fixes (none: nothing runs).

    seams: how builds are listed, installed and swept (`Steps.range_steps()`). keys: only these (config,
    signature); starts: narrower ends per (config, signature, kind) (a bounded range searched again). See
    `bot.ranges.finder.search_run`.
    """
    from bot.ranges import finder as ranges_mod
    return ranges_mod.search_run(conn, run_id, prev_id, result, settings, seams=seams, keys=keys, starts=starts)


def verify(conn: sqlite3.Connection, run_id: int, settings: Settings, *, enabled: bool | None = None,
           progress: Callable[[str], None] | None = None,
           seams: VerifySteps = VerifySteps()) -> Mapping[tuple[str, str], RunVerdict]:
    """Verify, shrink and isolate the run's tracking groups' reproducers; store the verdicts publishing reads.

    enabled: run the reproducers (default: `[verify] enabled`). A verdict stored for the
    same key is reused, so verifying a run again runs nothing. progress: stage lines, and the step's bar
    on stderr (None: silent). Groups run on `[sweep] workers`, bounded by `[verify] max_minutes`. seams: how
    scripts are run (bot.verify.steps; tests pass a twin).
    """
    from bot.verify import step as verify_mod
    verify_mod.note_old_cache(settings.state_path)
    knobs = settings.verify if enabled is None else dataclasses.replace(settings.verify, enabled=enabled)
    return verify_mod.verify_run(conn, run_id, knobs, workers=settings.sweep.workers or os.cpu_count() or 1,
                                 seams=seams, progress=progress)


def load_view(conn: sqlite3.Connection, run_id: int, settings: Settings) -> RunView:
    """The run as publishing sees it, all read from the store (after the verify step stored its verdicts)."""
    return run_view.load(conn, run_id, settings.github.repo)


def load_night(conn: sqlite3.Connection, night: run_view.Night, settings: Settings) -> RunView:
    """The nightly's run as publishing sees it: what the night holds, and its items read once (after confirmation
    and the verify step stored theirs)."""
    return run_view.load_night(conn, night, settings.github.repo)


def open_publisher(settings: Settings, *, dry_run: bool, out_dir: Path) -> Publisher | Unreachable:
    """The publisher the pipeline's publish writes through (GitHub, or the files twin): see
    `bot.github.publish.open_publisher`."""
    from bot.github import publish as publish_mod
    return publish_mod.open_publisher(settings, dry_run=dry_run, out_dir=out_dir)


def culprits(conn: sqlite3.Connection, run_id: int, settings: Settings, *, dry_run: bool,
             progress: bool = False) -> list[CommitRange]:
    """The commit ranges of the run's new crashes: suspects ranked, bisected on an overlay where a checkout is set.

    The commits come from `[culprit] checkout`, else (not in a dry run, with credentials) GitHub's compare; with a
    checkout and credentials, GitHub names the authors of the commits the issue shows."""
    from bot.pipeline import culprit as culprit_mod
    client = None
    if not dry_run and (settings.github.token or settings.github.app_id):
        from bot.github.client import ActionRefused, GitHubPublisher, GitHubUnavailable
        try:
            client = GitHubPublisher(settings.github)
        except (ActionRefused, GitHubUnavailable) as exc:
            log.warning("culprit: GitHub unavailable, no commit ranges tonight: %s", exc)
    good = lambda s, r: provide(s, "nightly", r.good.date, False).python   # noqa: E731 (the good nightly's venv)
    return culprit_mod.search_night(conn, run_id, settings, source=culprit_mod.source_for(settings, client),
                                    good_build=good, progress=progress)


def publish(conn: sqlite3.Connection, settings: Settings, view: RunView, *, publisher: Publisher | Unreachable,
            dry_run: bool, out_dir: Path) -> PublishSummary:
    """Plan and publish (or, in a dry run, render to files) the issues of the viewed run through `publisher`."""
    from bot.github import publish as publish_mod
    return publish_mod.publish_run(conn, settings, view.id, publisher=publisher, dry_run=dry_run,
                                   out_dir=str(out_dir), view=view)


def report(conn: sqlite3.Connection, view: RunView, out_dir: Path, precision: Tally | None = None) -> Path:
    """Write the viewed run's HTML report into `out_dir`; returns its path.

    precision: the measured precision to show (after a publish: the publish's; None: the view's)."""
    from bot.report import report as report_mod
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.html"
    path.write_text(report_mod.render_html(report_mod.build_context(conn, view=view, precision=precision)))
    return path


def provide(settings: Settings, torch: str, date: str | None, progress: bool) -> provider.Nightly:
    """The torch to sweep, named the way people name builds (provider.parse_spec), ready in its venv.

    `--date D` with `--torch nightly` is the nightly of D. SpecError (bad input) for a
    name that is none of the forms or an interpreter without torch; ProviderError when
    the index is down or has no such build.
    """
    spec = provider.parse_spec(torch)
    if spec.kind == "current":
        return provider.current(settings.sweep.python)
    if spec.kind == "nightly" and date:
        spec = provider.parse_spec(date)
        if spec.kind != "date":
            raise provider.SpecError(f"--date {date!r}: expected YYYY-MM-DD")
    return provider.provide_spec(settings.nightly, spec, progress=progress)


# ---- the seams ---------------------------------------------------------------------------------

class ProvideStep(Protocol):
    def __call__(self, settings: Settings, torch: str, date: str | None, progress: bool) -> provider.Nightly: ...


class ResolveStep(Protocol):
    def __call__(self, patterns: list[str]) -> list[str]: ...


class SelectStep(Protocol):
    def __call__(self, settings: Settings, names: list[str]) -> dict[str, dict]: ...


class ExpandStep(Protocol):
    def __call__(self, settings: Settings, names: list[str], *, python: str | None) -> dict[str, dict]: ...


class SweepStep(Protocol):
    def __call__(self, conn: sqlite3.Connection, request: SweepRequest) -> Run: ...


class DiffStep(Protocol):
    def __call__(self, conn: sqlite3.Connection, run: Run) -> tuple[Run | None, DiffResult | None]: ...


class ConfirmStep(Protocol):
    def __call__(self, conn: sqlite3.Connection, run_id: int, result: DiffResult | None, settings: Settings,
                 python: str | None) -> DiffResult | None: ...


class RangesStep(Protocol):
    def __call__(self, conn: sqlite3.Connection, run_id: int, prev_id: int | None, result: DiffResult | None,
                 settings: Settings, *, seams: RangeSteps, keys: list[tuple[str, str]] | None = ...,
                 starts: dict[tuple[str, str, str], tuple[Build, Build]] | None = ...) -> RangeReport: ...


class VerifyStep(Protocol):
    def __call__(self, conn: sqlite3.Connection, run_id: int, settings: Settings, *, enabled: bool | None = ...,
                 progress: Callable[[str], None] | None = ...,
                 seams: VerifySteps = ...) -> Mapping[tuple[str, str], RunVerdict]: ...


class CulpritsStep(Protocol):
    def __call__(self, conn: sqlite3.Connection, run_id: int, settings: Settings, *, dry_run: bool,
                 progress: bool = ...) -> list[CommitRange]: ...


class OpenPublisherStep(Protocol):
    def __call__(self, settings: Settings, *, dry_run: bool, out_dir: Path) -> Publisher | Unreachable: ...


class PublishStep(Protocol):
    def __call__(self, conn: sqlite3.Connection, settings: Settings, view: RunView, *,
                 publisher: Publisher | Unreachable, dry_run: bool, out_dir: Path) -> PublishSummary: ...


class ReportStep(Protocol):
    def __call__(self, conn: sqlite3.Connection, view: RunView, out_dir: Path,
                 precision: Tally | None = ...) -> Path: ...


@dataclass
class Steps:
    """The pipeline's calls into other areas; tests swap one (usually `sweep`) for a twin of the same type."""

    provide: ProvideStep = provide
    resolve_models: ResolveStep = resolve_models
    select_configs: SelectStep = select_configs
    expand_sets: ExpandStep = expand_sets
    sweep: SweepStep = sweep
    diff: DiffStep = diff_with_previous
    confirm: ConfirmStep = confirm
    ranges: RangesStep = ranges
    range_sweep: RangeSweepStep = range_sweep
    list_builds: ListBuildsStep = list_builds
    verify: VerifyStep = verify
    culprits: CulpritsStep = culprits
    open_publisher: OpenPublisherStep = open_publisher
    publish: PublishStep = publish
    report: ReportStep = report

    def range_steps(self) -> RangeSteps:
        """The range search's seams, from these steps (so a twin swapped in here is the one the search calls)."""
        return RangeSteps(provide=self.provide, sweep_items=self.range_sweep, list_builds=self.list_builds)
