"""One run as publishing sees it: loaded from the store once, then passed down, never re-read.

The planner's inputs, the report and the terminal summary all read this object;
nothing below it goes back to the store for the run itself, its gate verdict, its
verify step's cost or the measured precision. The verify step reads the part it
needs (`load_items`: the run, its outcomes, effects and builds) before the view is
loaded, and stores the verdicts the view then carries.

Two loaders build it: `load` reads everything from the store (`flagsweep publish RUN`,
`report RUN`, a command), and `load_night` takes what the nightly already holds (the
run, its previous comparable run, the confirmed diff and the gate it judged).
"""
from __future__ import annotations

import dataclasses
import sqlite3
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from harness.core.diff import DiffResult
from bot.view.stored_diff import diff_loaded
from harness.core.effects import effects_for
from harness.core.graph_breaks import FlagBreaks, Leverage, flag_breaks, leverage
from harness.core.outcome import Effect, Outcome
from state import culprits as culprits_mod, gates, history, links as links_mod, ranges as ranges_mod, resolutions, runs
from state import verdicts as verdicts_mod
from state.gates import EnvironmentVerdict
from state.history import SignatureRow
from state.links import Link
from state.culprits import CommitRange
from state.flags import AnswerFinding, answer_audit
from state.ranges import Range
from state.resolutions import Tally
from state.runs import Run
from state.verdicts import RunVerdict, StepCost


class NoSuchRun(KeyError):
    """No run with that id (a KeyError and so a LookupError; its text is the plain message)."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class RunView:
    """A run with its group's outcomes and effects, its previous comparable run and the diff from it,
    the signature history and the issue links, as of one read of the store."""

    run: Run
    group: tuple[int, ...]                  # the runs that form this one (shards of a nightly)
    models: frozenset[str]
    outcomes: tuple[Outcome, ...]           # sorted by (model, config)
    effects: tuple[Effect, ...]             # sorted by (config, model)
    previous: Run | None
    diff: DiffResult | None
    signatures: tuple[SignatureRow, ...]  # state.history.signature_history
    links: Mapping[str, Link]
    breaks: Mapping[str, FlagBreaks]        # config -> graph-break ids it removes/introduces
    leverage: Mapping[str, Leverage]        # config -> crashes and breaks ranked by models
    # model -> stored build (what reproducers embed)
    builds: Mapping[str, dict[str, Any]] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    # (config, signature, kind) -> the newest regression range stored up to this run (this run's own included)
    ranges: Mapping[tuple[str, str, str], Range] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    # (config, signature, kind) -> the commit range stored for that regression range's two builds (issue 37)
    culprits: Mapping[tuple[str, str, str], CommitRange] = dataclasses.field(
        default_factory=lambda: MappingProxyType({}))
    # issue key -> the logins removed from its cc (never cc'd there again)
    cc_removed: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    # (config, signature) -> what the run's verify step concluded for that tracking group (none: it never ran)
    verdicts: Mapping[tuple[str, str], RunVerdict] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    gate: EnvironmentVerdict | None = None                # the environment gate's verdict (None: never judged, e.g. a plain sweep)
    verify_cost: StepCost | None = None     # what the run's verify step cost (None: it never ran)
    tally: Tally | None = None              # the measured precision as of the read (of `links_repo`)
    # The answered items' audit (harness.engine.flags.answering) over the group's runs: each item traced in full
    answer_audit: tuple[AnswerFinding, ...] = ()

    @property
    def id(self) -> int:
        """The run's id."""
        return self.run.id

    @property
    def links_repo(self) -> str | None:
        """The repository the run's issues live in (None: every repository the store knows)."""
        return next((link.repo for link in self.links.values()), None)

    def with_links(self, links: Mapping[str, Link]) -> "RunView":
        """The same view with the links as they are now (after a sync with GitHub)."""
        return dataclasses.replace(self, links=MappingProxyType(dict(links)))


@dataclass(frozen=True)
class RunItems:
    """The part of a run its items make: the run, its group's outcomes and effects, its stored builds."""

    run: Run
    group: tuple[int, ...]                  # the runs that form this one (shards of a nightly)
    outcomes: tuple[Outcome, ...]           # sorted by (model, config)
    effects: tuple[Effect, ...]             # sorted by (config, model)
    builds: Mapping[str, dict[str, Any]]    # model -> stored build (what reproducers are rendered from)


def load_items(conn: sqlite3.Connection, run_id: int) -> RunItems:
    """Read the run and its items; NoSuchRun when there is none."""
    run = runs.get_run(conn, run_id)
    if run is None:
        raise NoSuchRun(f"no run {run_id}")
    return items_of(conn, run)


def items_of(conn: sqlite3.Connection, run: Run) -> RunItems:
    """Read the items of a run already read."""
    group = tuple(history.run_group(conn, run.id))
    outcomes = history.group_outcomes(conn, run.id)
    # A run that ended without finishing (interrupted) was never finalized: classify it here, store nothing.
    effects = history.effects(conn, run.id) or sorted(effects_for(outcomes), key=lambda e: (e.config, e.model))
    return RunItems(run=run, group=group, outcomes=tuple(outcomes), effects=tuple(effects),
                    builds=MappingProxyType(runs.group_model_data(conn, list(group))))


@dataclass(frozen=True)
class Night:
    """What the nightly holds once it has judged and confirmed a run: nothing here is read from the store again."""

    run: Run
    previous: Run | None         # the previous comparable run, found once
    diff: DiffResult | None      # the diff from it, flaky transitions marked by the confirmation
    gate: EnvironmentVerdict | None            # the verdict the gate judged


def load(conn: sqlite3.Connection, run_id: int, repo: str | None = None) -> RunView:
    """Read everything publishing needs about `run_id`; NoSuchRun when there is none."""
    items = load_items(conn, run_id)
    run = items.run
    previous = history.previous_comparable(conn, run, history.models_of(conn, run))
    diff = diff_loaded(conn, previous, run, items.outcomes, items.effects) if previous is not None else None
    return _view(conn, items, Night(run=run, previous=previous, diff=diff, gate=gates.get(conn, run_id)), repo)


def load_night(conn: sqlite3.Connection, night: Night, repo: str | None = None) -> RunView:
    """The view of the nightly's run: its items read once (after confirmation), the rest as the night holds it."""
    return _view(conn, items_of(conn, night.run), night, repo)


def commit_ranges(conn: sqlite3.Connection, found: Mapping[tuple[str, str, str], Range], mode: str = ""
                  ) -> dict[tuple[str, str, str], CommitRange]:
    """The commit range stored in `mode` (Mode.key) for each regression range whose two builds' commits are known."""
    out = {}
    for key, r in found.items():
        hit = culprits_mod.get(conn, r.signature, r.good.git, r.bad.git, r.config, mode) \
            if r.good.git and r.bad.git else None
        if hit is not None:
            out[key] = hit
    return out


def _view(conn: sqlite3.Connection, items: RunItems, night: Night, repo: str | None) -> RunView:
    """Read the rest (signatures, links, ranges, verdicts, the verify cost, the precision) around the items."""
    run, outcomes = items.run, list(items.outcomes)
    links = links_mod.all_links(conn, repo or None)
    found = ranges_mod.latest(conn, max(items.group or (run.id,)), run.options.sweep.mode.key)
    view = RunView(run=run, group=items.group, models=frozenset(history.models_of(conn, run)),
                   outcomes=items.outcomes, effects=items.effects, previous=night.previous, diff=night.diff,
                   signatures=tuple(history.signature_history(conn, mode=run.options.sweep.mode.key)), links=MappingProxyType(links),
                   breaks=MappingProxyType(flag_breaks(outcomes, run.configs)),
                   leverage=MappingProxyType(leverage(outcomes)), builds=items.builds,
                   ranges=MappingProxyType(found), culprits=MappingProxyType(commit_ranges(conn, found, run.options.sweep.mode.key)),
                   cc_removed=MappingProxyType(culprits_mod.removed(conn)),
                   verdicts=MappingProxyType(verdicts_mod.for_run(conn, run.id)), gate=night.gate,
                   verify_cost=verdicts_mod.step_cost(conn, run.id),
                   answer_audit=tuple(f for rid in items.group or (run.id,) for f in answer_audit(conn, rid)))
    return dataclasses.replace(view, tally=resolutions.tally(conn, view.links_repo))
