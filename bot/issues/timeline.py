"""What the store's history says about one run's issues (the I/O shell around the pure planner).

For each (config, signature) of the run's configs: its signature record, how many nightlies it has been
quiet and, for an open issue awaiting a verified fix, the nightlies since it was last seen with what they did
to its models; for each config, its trend over the recent runs; for each of the run's tracking groups without
an issue, on how many consecutive nightlies it was seen (the evidence rule, bot.issues.filing); and the
comments the bot has posted (the daily comment budget, one comment per issue and run). Read once per publish from the run view and
the run history; the planner (bot.issues.plan) only reads the typed result.
"""
from __future__ import annotations

import dataclasses
import sqlite3
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping

from bot.issues.keys import tracking_key
from bot.view.run_view import RunView
from harness.core.fixes import MAX_NIGHTS, Night
from harness.core.tracking import issue_groups
from state import history, outbox
from state.history import SignatureRow
from state.outbox import Posted
from state.runs import Run

TREND_RUNS = 60
GroupKey = tuple[str, str]                 # (config, signature)


def issue_date(run: Run) -> str:
    """The date an issue gives a run: a nightly's date, or a run's start time to the minute."""
    return history.run_date(run)[:10] if run.nightly else history.run_date(run)[:16]


@dataclass(frozen=True)
class Seen:
    """What the history says of one (config, signature): its record (state.history.signature_history), how
    many nightlies it has been quiet, and the nightlies since it was last seen when its issue awaits a fix."""

    config: str
    signature: str
    first_seen: str | None = None          # nightly dates or run start times
    last_seen: str | None = None
    nightlies_seen: int = 0
    models: tuple[str, ...] = ()           # the models it was last seen on
    last_run: int | None = None
    error_type: str | None = None
    torch_frame: str | None = None
    example_message: str | None = None
    # nightlies (run groups) since it was last seen that swept its config and one of its models
    quiet: int = 0
    # for an open issue awaiting a verified fix: the nightlies since it was last seen (oldest first)
    nights: tuple[Night, ...] = ()

    @classmethod
    def of(cls, row: SignatureRow) -> "Seen":
        """From a stored row."""
        return cls(config=row.config, signature=row.signature, first_seen=row.first_seen,
                   last_seen=row.last_seen, nightlies_seen=row.nightlies_seen, models=row.models,
                   last_run=row.last_run, error_type=row.error_type, torch_frame=row.torch_frame,
                   example_message=row.example_message)


@dataclass(frozen=True)
class TrendPoint:
    """One run of a config's trend: its date and how many models crashed, and compiled to fewer graphs."""

    date: str
    crashes: int
    reduces: int


@dataclass(frozen=True)
class Timeline:
    """The history the planner reads for one run (empty: a run with no history)."""

    signatures: Mapping[GroupKey, Seen] = field(default_factory=lambda: MappingProxyType({}))
    trend: Mapping[str, tuple[TrendPoint, ...]] = field(default_factory=lambda: MappingProxyType({}))  # oldest first
    # (config, signature) of a tracking group without an issue -> consecutive nightlies it was seen on, this one
    # included (counted up to the evidence rule's min_nights)
    streaks: Mapping[GroupKey, int] = field(default_factory=lambda: MappingProxyType({}))
    comments: tuple[Posted, ...] = ()      # every comment the bot posted, oldest first

    def streak(self, config: str, signature: str) -> int:
        """Consecutive nightlies, this one included, on which the signature was seen (1 when unknown)."""
        return self.streaks.get((config, signature), 1)

    def seen(self, config: str, signature: str) -> Seen:
        """The signature's record; an empty one when the history has none."""
        return self.signatures.get((config, signature)) or Seen(config, signature)


def gather(conn: sqlite3.Connection, view: RunView, streak_depth: int = 2) -> Timeline:
    """Read the history the planner needs about the viewed run (`streak_depth`: how far back a streak is counted)."""
    configs = {e.config for e in view.effects}
    axis, groups = _axis(conn, view)
    model_sets: dict[int, set[str]] = {view.run.id: set(view.models)}

    def models_of(r: Run) -> set[str]:
        if r.id not in model_sets:
            model_sets[r.id] = history.models_of(conn, r)
        return model_sets[r.id]

    sigs = {}
    for seen in (Seen.of(row) for row in view.signatures if row.config in configs):
        # Nightlies (run groups) that had this config and started after the group that last saw the signature.
        last = max(history.run_group(conn, seen.last_run) or [seen.last_run or 0])
        # ...that also swept at least one of the models it was last seen on.
        seen_on = set(seen.models)
        quiet = sum(1 for r in axis if seen.config in r.configs and min(groups[r.id]) > last
                    and (not seen_on or seen_on & models_of(r)))
        nights = _nights(conn, view, axis, groups, models_of, seen) if _awaits_fix(view, seen) else ()
        sigs[(seen.config, seen.signature)] = dataclasses.replace(seen, quiet=quiet, nights=nights)
    return Timeline(signatures=MappingProxyType(sigs), trend=MappingProxyType(_trend(conn, axis, configs)),
                    streaks=MappingProxyType(_streaks(conn, view, axis, groups, streak_depth)),
                    comments=tuple(outbox.posted_comments(conn)))


def _streaks(conn: sqlite3.Connection, view: RunView, axis: list[Run], groups: dict[int, list[int]],
             nights: int) -> dict[GroupKey, int]:
    """For each tracking group of the run without an issue: the consecutive nightlies (this one included, at most
    `nights`) that had it; a nightly that did not sweep its config is skipped, one that swept it without it ends it."""
    found = issue_groups(list(view.effects), list(view.outcomes))
    streaks = {k: 1 for k in found if tracking_key(*k, view.run.options.sweep.mode) not in view.links}
    counting = set(streaks)
    for r in reversed([r for r in axis if max(groups[r.id]) < max(view.group)]):
        asked = {k for k in counting if streaks[k] < nights and k[0] in r.configs}
        counting -= {k for k in counting if streaks[k] >= nights}
        if not counting:
            break
        had = issue_groups(history.effects(conn, r.id), history.group_outcomes(conn, r.id)) if asked else {}
        for k in asked:
            if k in had:
                streaks[k] += 1
            else:
                counting.discard(k)
    return streaks


def _axis(conn: sqlite3.Connection, view: RunView) -> tuple[list[Run], dict[int, list[int]]]:
    """Runs up to this one, oldest first, one per group (the axis for quiet counts and trends), and each one's group.

    A nightly is measured against nightlies only: an ad-hoc sweep of three models is not a quiet night; and a run
    against the runs of its mode only (a train run is no quiet night for an eval crash).
    """
    run = view.run
    kinds = ("nightly",) if run.kind == "nightly" else history.HISTORY_KINDS
    me = max(view.group)
    latest = [r for r in history.latest_runs(conn, 500, kinds=kinds)
              if r.options.sweep.mode.key == run.options.sweep.mode.key]
    groups = {r.id: history.run_group(conn, r.id) or [r.id] for r in latest}
    axis = [r for r in reversed(latest) if max(groups[r.id]) <= me]
    if not any(max(groups[r.id]) == me for r in axis):
        groups[run.id] = list(view.group)
        axis.append(run)
    return axis, groups


def _trend(conn: sqlite3.Connection, axis: list[Run], configs: set[str]) -> dict[str, tuple[TrendPoint, ...]]:
    """Each config's crash and fewer-graphs counts over the recent runs that had it, oldest first."""
    recent = axis[-TREND_RUNS:]
    counts = history.effect_counts(conn, [r.id for r in recent])
    trend = {}
    for c in configs:
        points = [(r, counts[r.id][c]) for r in recent if c in counts[r.id]]
        trend[c] = tuple(TrendPoint(issue_date(r)[:10], n["crashes"], n["reduces_graphs"])
                         for r, n in points)
    return trend


def _awaits_fix(view: RunView, seen: Seen) -> bool:
    """An open, unmuted tracking issue whose signature this run did not show."""
    link = view.links.get(tracking_key(seen.config, seen.signature, view.run.options.sweep.mode))
    return link is not None and link.state == "open" and not link.muted and seen.last_run not in view.group


def _nights(conn: sqlite3.Connection, view: RunView, axis: list[Run], groups: dict[int, list[int]],
            models_of: Callable[[Run], set[str]], seen: Seen) -> tuple[Night, ...]:
    """The newest nightlies since the signature was last seen, oldest first, with what they did to its models.

    A nightly counts whatever it swept (a missing shard leaves models untested); an ad-hoc run counts only
    when it swept one of the models, so a comment-command sweep of others is no night at all.
    """
    config = seen.config
    last = max(history.run_group(conn, seen.last_run) or [seen.last_run or 0])
    models = list(seen.models)
    after = [r for r in axis if config in r.configs and min(groups[r.id]) > last
             and (r.kind == "nightly" or set(models) & models_of(r))][-MAX_NIGHTS:]
    out = []
    for r in after:
        this_run = max(groups[r.id]) == max(view.group)
        items = view.outcomes if this_run else history.group_items(conn, r.id, models, ("baseline", config))
        got = {(o.model, o.config): o for o in items}
        out.append(Night(date=issue_date(r), items={m: (got.get((m, "baseline")), got[(m, config)])
                                                    for m in models if (m, config) in got}))
    return tuple(out)
