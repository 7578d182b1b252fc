"""Glue: plan → outbox → publisher, for one run. The entry point of the nightly pipeline's last step.

Real publish, in order: (1) send what an earlier publish left in the outbox,
(2) fold GitHub's view of the bot's issues into the links (human closes,
lost store), (3) plan, (4) store the whole plan in the outbox, (5) send it one
action at a time, marking each done together with its link update. When GitHub
stays down the rest stays pending and the summary says so. A dry run takes
the same five steps against an in-memory copy of the store and a publisher
that writes files (bot.github.dryrun), so the file store is left as it was.

Before (1), the kill switch: an open issue labelled `[issues] pause_label` stops
every write (nothing is planned or sent). Step (2) also stores how the bot's
tracking issues ended (state.resolutions, the measured precision). A run the
environment gate marked suspect (state.gates) files and closes nothing: of its
plan only the summary issues' edits are sent, each saying why. In shadow mode
(`[issues] shadow`) GitHub is read as in a real publish and the writes go to
files as in a dry run.

Publishing only reads: the reproducer verdicts and components come with the run
view, stored by the pipeline's verify step (bot/verify/) before it; nothing here
runs a script or starts a process.
"""
from __future__ import annotations

import dataclasses
import logging
import sqlite3
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from bot.issues import plan as issue_plan, routing, timeline
from bot.issues.lifecycle import Plan
from bot.github import resolutions as resolutions_mod
from bot.issues.context import PlanSettings
from bot.issues.material import BodyHash, labels_digest
from bot.text import render
from bot.text.terminal import visible
from bot.view import run_view
from bot.github.dryrun import DryRunPublisher
from bot.github.outbox_steps import Out, step as outbox_step
from bot.github.port import ActionRefused, GitHubUnavailable, IssueRef, Publisher
from bot.view.run_view import RunView
from bot.settings import Settings
from state import db, gates, links as links_mod, outbox, resolutions
from state.db import transaction
from harness.core.modes import Mode

log = logging.getLogger(__name__)
DRY_RUN_REPO = "dry-run/no-repository"   # where a dry run without github.repo files its (scratch) links


@dataclass
class PublishSummary:
    """What one publish did."""

    run_id: int
    dry_run: bool
    repo: str | None
    actions: int = 0              # actions planned by this publish
    done: int = 0                 # actions finished (written, or found already as intended), this publish and resumed ones
    written: int = 0              # of those, the ones that changed something on GitHub
    unchanged: int = 0            # of those, skipped: GitHub already had what we meant to write
    pending: int = 0              # left in the outbox for the next publish
    failed: int = 0               # refused by GitHub for good
    resumed: int = 0              # left over by an earlier publish and sent now
    out_dir: str | None = None
    plan_file: str | None = None
    stopped: str | None = None    # why sending stopped early
    held: dict[str, int] = field(default_factory=dict)   # new signatures not filed: {"pending": n, "watching": n}
    paused: int | None = None     # the open issue with the pause label: nothing was written
    shadow: bool = False          # GitHub was read, the writes went to files
    gated: int = 0                # actions the environment gate held back (a suspect run files and closes nothing)
    gate: dict[str, Any] | None = None        # the run's gate verdict (state.gates.EnvironmentVerdict), when judged
    precision: dict[str, Any] | None = None   # the measured precision (state.resolutions.Tally) after this publish
    synced: dict[str, int] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    # The precision in the store once this publish ended (of the view's repository): what the run's report shows.
    after: resolutions.Tally | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (`after` is the report's, not part of the summary printed)."""
        return {k: v for k, v in asdict(self).items() if k != "after"}

    def render(self) -> str:
        """The terminal summary table."""
        return render.render("summary_publish.txt.j2", rows=self.rows, total=len(self.rows), dry_run=self.dry_run,
                             done=self.done, written=self.written, unchanged=self.unchanged, pending=self.pending,
                             failed=self.failed, out_dir=self.out_dir, stopped=self.stopped, paused=self.paused,
                             shadow=self.shadow, gated=self.gated, gate=self.gate,
                             held=self.held)


def plan_settings(settings: Settings) -> PlanSettings:
    """The planner's view of the settings (routing validated here: a bad rule fails before anything runs)."""
    return PlanSettings(verify_nightlies=settings.issues.verify_nightlies, labels=list(settings.issues.labels),
                        rules=routing.compile_rules(settings.routing, settings.source),
                        report_url=settings.issues.report_url, max_new_per_night=settings.issues.max_new_per_night,
                        max_open=settings.issues.max_open, min_models=settings.issues.min_models,
                        min_nights=settings.issues.min_nights,
                        max_comments_per_issue_per_day=settings.issues.max_comments_per_issue_per_day,
                        dynamic_label=settings.issues.dynamic_label, culprit_repo=settings.culprit.repo,
                        summary_configs=list(settings.issues.summary_configs))


def gated(plan: Plan, gate: gates.EnvironmentVerdict | None) -> tuple[Plan, int]:
    """A suspect run's plan: only the summary issues' edits (nothing filed, closed or commented), no link notes."""
    if gate is None or not gate.suspect:
        return plan, 0
    kept = [a for a in plan.actions if a.kind == "summary" and a.action in ("edit", "labels")]
    return Plan(actions=kept), len(plan.actions) - len(kept)


def stderr_progress(enabled: bool, command: str = "publish") -> Callable[[str], None]:
    """A progress printer: one `flagsweep <command>: msg` line on stderr (stdout may hold --json); silent when off."""
    def say(msg: str) -> None:
        if enabled:
            print(visible(f"flagsweep {command}: {msg}"), file=sys.stderr, flush=True)   # msg can quote GitHub
    return say


@dataclass(frozen=True)
class Unreachable:
    """What the edge holds instead of a publisher when GitHub could not be asked who we are: nothing is sent."""

    reason: str


def dry_run_dir(settings: Settings, out_dir: str | Path | None, mode: Mode) -> Path:
    """Where a run's dry-run files go: the out folder (`--out`, else `[issues] dry_run_out`) for eval; another mode's
    in a folder of its name inside it, so that the modes of one night never write over each other's plan and issues."""
    out = Path(out_dir or settings.issues.dry_run_out)
    return out if mode.is_default else out / mode.name


def open_publisher(settings: Settings, *, dry_run: bool, out_dir: str | Path | None) -> Publisher | Unreachable:
    """The publisher a publish writes through, built at the edge (a command, the service, the pipeline's steps).

    A dry run: the files twin, without loading PyGithub. Else GitHub (asked who we are first), read through
    by the files twin in shadow mode (`[issues] shadow`).
    """
    files_dir = out_dir or settings.issues.dry_run_out
    if dry_run:
        return DryRunPublisher(files_dir)
    from bot.github.client import GitHubPublisher    # the only module importing PyGithub
    try:
        github = GitHubPublisher(settings.github)
    except GitHubUnavailable as exc:
        return Unreachable(str(exc))
    return DryRunPublisher(files_dir, reads=github) if settings.issues.shadow else github


def publish_run(conn: sqlite3.Connection, settings: Settings, run_id: int, *, publisher: Publisher | Unreachable,
                dry_run: bool, out_dir: str | None, progress: bool = False,
                view: RunView | None = None) -> PublishSummary:
    """Plan the issues for `run_id` and publish them: to GitHub, or in a dry run to files, by the same steps.

    `publisher`: as `open_publisher` opened it (a test's twin alike): GitHub, or in a dry run and in shadow mode
    the files twin (`DryRunPublisher`).

    `view`: the run as already loaded by the caller (the nightly loads it once for publish and report); its gate
    verdict is the one the pipeline judged. The run's reproducer verdicts are what the verify step stored
    (bot.pipeline.steps.verify).
    """
    view = view or run_view.load(conn, run_id, settings.github.repo)
    summary = _publish_view(conn, settings, view, dry_run=dry_run, out_dir=out_dir, publisher=publisher,
                            progress=progress)
    # read where this publish updates it (a dry run leaves the store, and so the figures, as they were)
    summary.after = resolutions.tally(conn, view.links_repo)
    return summary


def _publish_view(conn: sqlite3.Connection, settings: Settings, view: RunView, *, dry_run: bool, out_dir: str | None,
                  publisher: Publisher | Unreachable, progress: bool) -> PublishSummary:
    """publish_run's steps for a view already loaded."""
    repo, run_id = settings.github.repo, view.id
    say = stderr_progress(progress)
    psettings = plan_settings(settings)          # a bad routing rule stops us before anything is written
    gate = view.gate
    summary = PublishSummary(run_id=run_id, dry_run=dry_run, repo=repo, gate=gate.to_dict() if gate else None)
    shadow = not dry_run and settings.issues.shadow
    where = repo or DRY_RUN_REPO

    def make_plan(store: sqlite3.Connection, seen: RunView) -> Plan:
        tally = resolutions.tally(conn if shadow else store, where)
        summary.precision = tally.to_dict()
        told = dataclasses.replace(psettings, gate=gate.reasons if gate and gate.suspect else None,
                                   precision=tally)
        made, summary.gated = gated(issue_plan.plan(seen, timeline.gather(store, seen, psettings.min_nights), told),
                                    gate)
        summary.held = {s: sum(1 for h in made.held if h.status == s) for s in ("pending", "watching")}
        return made

    run = Sending(pause_label=settings.issues.pause_label, say=say, make_plan=make_plan, keep=conn)
    if isinstance(publisher, Unreachable):      # GitHub did not say who we are: nothing may be sent
        summary.stopped = publisher.reason
        return _finish(conn, summary)
    if not dry_run:
        if not repo:
            raise ActionRefused("no repository: set github.repo or pass --repo OWNER/NAME")
        if not shadow:
            _publish(conn, view, publisher, repo, summary, run)
            return _done(publisher, summary)
        summary.shadow = True
    if not isinstance(publisher, DryRunPublisher):
        raise TypeError("a dry run or a shadow publish writes through the files twin (open_publisher)")
    files = publisher
    scratch = db.scratch_copy(conn)             # the real steps against a copy: a dry run leaves the store as it was
    if not shadow:
        run.keep = scratch                      # a dry run knows nothing of GitHub: its precision is the copy's
    try:
        made = _publish(scratch, view, files, where, summary, run)
    finally:
        scratch.close()
    files.write_held([(h.status, h.key, h.title, h.body) for h in made.held] if made else [])
    return _done(files, summary)


@dataclass
class Sending:
    """What `_publish` needs beside the store and the publisher."""

    pause_label: str
    say: Callable[[str], None]
    make_plan: Callable[[sqlite3.Connection, RunView], Plan]
    keep: sqlite3.Connection          # the store that keeps the resolutions read from GitHub (a shadow's: the real one)


def _done(pub: Publisher, summary: PublishSummary) -> PublishSummary:
    """Let the publisher finish (a dry run writes plan.json; GitHub needs nothing) and say where its files are."""
    path = pub.finish({"run_id": summary.run_id, "repo": summary.repo})
    summary.out_dir, summary.plan_file = (str(path.parent), str(path)) if path else (None, None)
    return summary


def _publish(conn: sqlite3.Connection, view: RunView, pub: Publisher, repo: str, summary: PublishSummary,
             run: Sending) -> Plan | None:
    """The kill switch, then steps (1) to (5) of the module docstring, for a real publish and a dry run alike.

    Returns the plan made in step (3) (its held signatures are what a dry run writes beside its files), None when
    sending stopped before planning."""
    say = run.say
    try:
        switch = pub.paused(run.pause_label)
    except GitHubUnavailable as exc:          # say what is left from an earlier publish, not "0 actions"
        summary.stopped = str(exc)
        summary.rows += [_entry_row(conn, repo, e, "pending") for e in outbox.unfinished(conn)]
        _finish(conn, summary)
        return None
    if switch is not None:
        summary.paused = switch.number
        summary.stopped = render.render("publish_paused.txt.j2", number=switch.number, label=run.pause_label).strip()
        say(summary.stopped)
        _finish(conn, summary)
        return None
    # (1) an earlier publish may have left work behind: finish it before planning anew.
    leftovers = outbox.unfinished(conn)
    if leftovers:
        say(f"resuming {len(leftovers)} action(s) left in the outbox")
        summary.resumed = len(leftovers)
        if _drain(conn, pub, repo, summary, say):
            _finish(conn, summary)
            return None
    # (2) what GitHub says now: human closes, and links lost with the store.
    try:
        # A rebuilt link knows the labels GitHub has (so they are not re-sent) but no body hash (so it is refreshed).
        refs = pub.list_own_issues()
    except GitHubUnavailable as exc:
        summary.stopped = str(exc)
        _finish(conn, summary)
        return None
    seen = [_listed(r) for r in refs]
    summary.synced = links_mod.sync(conn, repo, seen)
    _record_resolutions(run.keep, repo, refs, seen, links_mod.all_links(conn, repo))
    if any(summary.synced.values()) or leftovers:
        view = view.with_links(links_mod.all_links(conn, repo))
    # (3) plan, (4) store, (5) send.
    plan = run.make_plan(conn, view)
    for old, new, signature in plan.moves:
        links_mod.rekey(conn, old, new, signature)
    for key, changes in plan.notes:
        links_mod.update(conn, key, **changes)
    summary.actions = len(plan.actions)
    if plan.actions:
        outbox.enqueue(conn, outbox.new_batch(), view.id, [(a.key, a.action, a.payload()) for a in plan.actions])
        _drain(conn, pub, repo, summary, say)
    _finish(conn, summary)
    return plan


def _record_resolutions(keep: sqlite3.Connection, repo: str, refs: list[IssueRef], seen: list[links_mod.Listed],
                        links: dict[str, links_mod.Link]) -> None:
    """Store how each of the bot's tracking issues ended (read from the same listing: no extra request)."""
    tracked = [(ref, item) for ref, item in zip(refs, seen)
               if (item.kind or (links[ref.key].kind if ref.key in links else None)) == "tracking"]
    resolutions.record(keep, repo, [resolutions_mod.resolve(ref, links.get(ref.key)) for ref, _ in tracked])


def _listed(ref: IssueRef) -> links_mod.Listed:
    """One listed issue as the links take it: its marker's kind, config and signature (read from GitHub's body),
    and a body hash of its labels alone (a rebuilt link knows the labels, so they are not re-sent)."""
    from bot.text.markdown import marker_meta
    meta = marker_meta(ref.body)
    kind, config, signature = (meta.get(name) for name in ("kind", "config", "signature"))
    return links_mod.Listed(key=ref.key, number=ref.number, state=ref.state, title=ref.title, kind=kind,
                            config=config, signature=signature, mode=str(meta.get("mode") or ""),
                            body_sha=BodyHash(labels=labels_digest(ref.labels)).text())


def _finish(conn: sqlite3.Connection, summary: PublishSummary) -> PublishSummary:
    counts = outbox.counts(conn)
    summary.pending = counts["pending"] + counts["sending"]
    return summary


def _row(action: str, key: str, number: int | None, title: str | None, result: str) -> dict[str, Any]:
    return {"action": action, "key": key, "where": f"#{number}" if number else "new", "title": title or "",
            "result": result}


def _drain(conn: sqlite3.Connection, pub: Publisher, repo: str, summary: PublishSummary,
           say: Callable[[str], None]) -> bool:
    """Send every unfinished outbox entry in order; True when GitHub stopped us."""
    entries = outbox.unfinished(conn)
    for n, entry in enumerate(entries, 1):
        if len(entries) > 5 and n % 5 == 1:
            say(f"sending {n}/{len(entries)}")
        out = Out(conn, pub, repo, entry, uncertain=entry.uncertain)   # as it was before this attempt
        outbox.mark_sending(conn, entry.id)
        try:
            step = outbox_step(entry.action)
            result, changed = step.send(out, entry.payload)
        except GitHubUnavailable as exc:
            outbox.mark_pending(conn, entry.id, str(exc))
            summary.stopped = str(exc)
            say(f"GitHub unavailable, {len(entries) - n + 1} action(s) left for the next publish: {exc}")
            summary.rows += [_entry_row(conn, repo, e, "pending") for e in entries[n - 1:]]
            return True
        except ActionRefused as exc:
            outbox.mark_failed(conn, entry.id, str(exc))
            summary.failed += 1
            summary.rows.append(_entry_row(conn, repo, entry, "failed"))
            log.error("%s %s refused: %s", entry.action, entry.key, exc)
            continue
        with transaction(conn):
            step.apply(out, entry.payload, result)
            outbox.mark_done(conn, entry.id, result)
        summary.done += 1
        summary.written += 1 if changed else 0
        summary.unchanged += 0 if changed else 1
        # The files twin (a dry run, shadow mode) wrote nothing on GitHub: its rows say what a publish would write.
        wrote = "would write" if summary.dry_run or summary.shadow else "written"
        summary.rows.append(_entry_row(conn, repo, entry, wrote if changed else "unchanged", result.number))
    return False


def _entry_row(conn: sqlite3.Connection, repo: str, entry: outbox.Entry, result: str,
               number: int | None = None) -> dict[str, Any]:
    """A summary row for one outbox entry: what it is, where, and what became of it."""
    issue = entry.payload if isinstance(entry.payload, outbox.IssuePayload) else None   # a reaction names none
    if number is None:
        link = links_mod.get(conn, entry.key, repo)
        number = (issue.number if issue else None) or (link.number if link else None)
    title = (issue.title or f"({issue.reason or entry.action})") if issue else f"({entry.action})"
    return _row(entry.action, entry.key, number, title, result)
