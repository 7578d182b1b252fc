"""`flagsweep publish`: file or update the GitHub issues for a run (dry run by default without credentials);
`flagsweep stats`: how maintainers closed the bot's issues (the measured precision)."""
from __future__ import annotations

import argparse
import dataclasses

from bot.cli import arguments as types, say
from bot.cli.interrupts import sigterm_as_interrupt
from bot.settings import Settings


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands."""
    p = sub.add_parser("publish", help="file or update the GitHub issues for a run",
                       description="Plan the tracking and summary issues for RUN (default: the latest finished run) and "
                                   "publish them. Without GitHub credentials this is a dry run: the issues are rendered "
                                   "to files in --out.")
    p.add_argument("run", nargs="?", type=int, metavar="RUN", help="run id (default: the latest finished run)")
    p.add_argument("--dry-run", action="store_true", help="render to files instead of writing to GitHub")
    p.add_argument("--repo", metavar="OWNER/NAME", type=types.repo, help="repository to publish to (default: github.repo)")
    p.add_argument("--out", metavar="DIR", type=types.nonempty("the output folder"), help="where a dry run writes its files (default: issues.dry_run_out)")
    p.add_argument("--no-verify", action="store_true", help="skip running the reproducers (faster; none is embedded)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (and nothing else on stdout)")
    p.set_defaults(func=run_publish)
    p = sub.add_parser("stats", help="how maintainers closed the bot's tracking issues: the measured precision",
                       description="Of the tracking issues the bot opened: how many maintainers closed as completed, "
                                   "not planned or duplicate, or labelled invalid; how many the bot closed as verified "
                                   "fixed; how many were reopened; and the precision. Read from the store, refreshed "
                                   "by each publish.")
    p.add_argument("--repo", metavar="OWNER/NAME", type=types.repo, help="only this repository (default: github.repo, else all)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON (and nothing else on stdout)")
    p.set_defaults(func=run_stats)


def run_stats(args: argparse.Namespace, settings: Settings) -> int:
    """Handler of `flagsweep stats`."""
    from bot.cli.store import open_existing
    from bot.text.render import render
    from state import culprits, resolutions

    conn = open_existing(settings)     # a read: a mistyped --state is refused, never created and reported as 0
    try:
        tally = resolutions.tally(conn, args.repo or settings.github.repo)
        named, wrong = culprits.wrong_count(conn)
    finally:
        conn.close()
    # beside the filing precision: the culprits bisected, and how many a maintainer said were wrong (wrong-culprit)
    figures = {**tally.to_dict(), "culprits": {"named": named, "wrong": wrong}}
    if args.json:
        say.json(figures, indent=2, sort_keys=True)
    else:
        say.out(render("stats.txt.j2", t=figures), end="")
    return 0


def run_publish(args: argparse.Namespace, settings: Settings) -> int:
    """Handler of `flagsweep publish`: SIGTERM ends it as Ctrl-C does (reproducer folders removed, exit 130)."""
    with sigterm_as_interrupt():
        return _publish(args, settings)


def _publish(args: argparse.Namespace, settings: Settings) -> int:
    from bot.github import publish
    from bot.github.port import ActionRefused
    from bot.issues.routing import RoutingError
    from bot.pipeline import steps
    from harness.core.unsafe import UnsafeTableError
    from state import db, history, runs

    try:   # the routing rules and the unsafe flag table, checked as `serve` checks them: before anything
        publish.plan_settings(settings)
    except (RoutingError, UnsafeTableError) as exc:
        say.err(f"flagsweep publish: {exc}")
        return 2
    if args.repo:     # checked by its type (arguments.repo)
        settings = dataclasses.replace(settings, github=dataclasses.replace(settings.github, repo=args.repo))
    dry_run = args.dry_run or not settings.github.has_credentials
    if dry_run and not args.dry_run:
        say.err("flagsweep publish: no GitHub credentials configured, so this is a dry run")
    conn = db.connect(settings.state_path)
    run_id = args.run
    if run_id is None:
        latest = history.latest_runs(conn, 1)
        if not latest:
            say.err(f"flagsweep publish: no finished run in {settings.state_path}")
            return 1
        run_id = latest[0].id
    stored = runs.get_run(conn, run_id)
    if stored is None:
        say.err(f"flagsweep publish: no run {run_id}")
        return 2
    out_dir = publish.dry_run_dir(settings, args.out, stored.options.sweep.mode)   # the nightly's folder for its mode
    try:
        # The pipeline's verify step first (stored verdicts are reused: nothing runs twice), then publish reads them.
        steps.verify(conn, run_id, settings, enabled=False if args.no_verify else None,
                     progress=publish.stderr_progress(True))
        publisher = publish.open_publisher(settings, dry_run=dry_run, out_dir=out_dir)
        summary = publish.publish_run(conn, settings, run_id, publisher=publisher, dry_run=dry_run,
                                      out_dir=str(out_dir), progress=True)
    except (RoutingError, ActionRefused, KeyError) as exc:
        say.err(f"flagsweep publish: {exc}")
        return 2
    if args.json:
        say.json(summary.to_dict(), indent=2, sort_keys=True)
    else:
        say.out(summary.render(), end="")
    return 0 if not summary.stopped and not summary.failed else 1

