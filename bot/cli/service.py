"""Subcommands of the bot service: `nightly`, `merge`, `serve`. Thin shells over bot.pipeline.nightly, bot.pipeline.merge, bot.service.daemon."""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
from pathlib import Path
from typing import Any

from bot.cli import arguments as types, say
from bot.cli.interrupts import sigterm_as_interrupt
from harness.core.population import POPULATIONS

log = logging.getLogger(__name__)

def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's subcommands."""
    p = sub.add_parser("nightly", help="install a nightly, sweep, diff, confirm and publish (one shot, for cron/CI)",
                       description="Install the PyTorch nightly (or use the installed torch), sweep the corpus, "
                                   "compare with the previous comparable run, confirm changes and publish. Dry run "
                                   "(files only) unless GitHub credentials are configured.")
    p.add_argument("--dry-run", action="store_true", default=None, help="write nothing to GitHub; render to files")
    p.add_argument("--date", metavar="YYYY-MM-DD", type=types.iso_date, help="the nightly of this date (default: the newest)")
    p.add_argument("--torch", default="nightly", metavar="BUILD", type=types.nonempty("the torch build"),
                   help="'nightly': the newest dev build on the index (default); 'current': the torch installed "
                        "here; a date (YYYY-MM-DD); a version (2.14.1, 2.15.0rc1, 2.15.0.dev20261101); or the "
                        "path of a Python interpreter that has torch")
    p.add_argument("--configs", metavar="NAME[,NAME]", type=types.name_list, help="configs to sweep, or a named set: all-dynamo, all-functorch, all-inductor (default: [nightly] configs)")
    p.add_argument("--models", metavar="GLOB[,GLOB]", type=types.model_patterns, help="models to sweep (default: [nightly] models or the embedded corpus)")
    p.add_argument("--force", action="store_true", help="sweep again even if this nightly was swept with these configs")
    p.add_argument("--population", choices=POPULATIONS, metavar="all|graph-breaking",
                   help="sweep every model, or only those with more than one graph at baseline (default: [sweep] population)")
    p.add_argument("--shard", metavar="i/N", type=types.shard, help="sweep only the i-th of N slices of the models (CI matrix)")
    p.add_argument("--out", metavar="DIR", type=types.nonempty("the output folder"), help="where dry-run issues and the report go (default: [issues] dry_run_out)")
    p.add_argument("--export", metavar="FILE", type=types.nonempty("the export file"), help="also write the run (environment, outcomes, builds) to FILE, "
                                                     "for `flagsweep merge` on another host")
    p.add_argument("--modes", metavar="A,B", type=types.name_list,
                   help="the modes to sweep, one run each, each diffed, verified and published on its own: eval, "
                        "train, bf16, fp16, train-bf16, dynamic-true, dynamic-marked, sdpa, eager-attention or a "
                        "[modes.NAME] table (default: [sweep] modes)")
    p.add_argument("--json", action="store_true", help="print the result as JSON (and nothing else on stdout)")
    p.set_defaults(func=cmd_nightly)

    p = sub.add_parser("merge", help="join the shard runs of one nightly into one run, then diff and publish it",
                       description="Join shard runs (from `nightly --shard i/N`) into one run and run the rest of "
                                   "the nightly on it: diff, confirmation, publish, report. A RUN is a run id in "
                                   "this store or a file written by `nightly --export` on another host, imported first.")
    p.add_argument("runs", nargs="+", metavar="RUN|FILE")
    p.add_argument("--torch", metavar="BUILD", type=types.nonempty("the torch build"), help="verify reproducers on this build (as `nightly --torch` takes it; "
                                                     "it must be the shards' torch); default: the shards' interpreter")
    p.add_argument("--dry-run", action="store_true", default=None, help="write nothing to GitHub")
    p.add_argument("--out", metavar="DIR", type=types.nonempty("the output folder"))
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_merge)

    p = sub.add_parser("serve", help="run the scheduler, the webhook server and the job runner in one process",
                       description="Long-running bot: nightly on the [scheduler] cron, the webhook server on "
                                   "[webhook] host:port (GET /healthz for health), comment commands as stored jobs.")
    p.add_argument("--host", type=types.nonempty("the host"), help="override [webhook] host")
    p.add_argument("--port", type=types.port, help="override [webhook] port")
    p.add_argument("--no-schedule", action="store_true", help="do not schedule nightlies (commands only)")
    p.add_argument("--dry-run", action="store_true", default=None, help="write nothing to GitHub")
    p.set_defaults(func=cmd_serve)


def _split(text: str | None) -> list[str] | None:
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


def _emit(result: Any, as_json: bool) -> None:
    from bot.text.render import render
    if as_json:
        say.json(result.to_dict(), indent=2, default=str)
    else:
        say.out(render("nightly_summary.txt.j2", r=result), end="")


def _identity(settings: Any, dry_run: bool | None) -> tuple[Any, str | None]:
    """Ask GitHub once, at start-up, who the credentials write as: (the settings with that login as
    [github] bot_login, adopted when unset; the reason to refuse, if any)."""
    if dry_run or not settings.github.has_credentials:
        return settings, None
    from bot.github.client import ActionRefused, GitHubPublisher, GitHubUnavailable
    try:
        login = GitHubPublisher(settings.github).login     # checks (or adopts) [github] bot_login
    except ActionRefused as exc:
        return settings, str(exc)
    except GitHubUnavailable as exc:            # GitHub down: sweep anyway; publishing asks again
        log.warning("github: cannot ask who we are yet: %s", exc)
        return settings, None
    return dataclasses.replace(settings, github=dataclasses.replace(settings.github, bot_login=login)), None


def cmd_nightly(args: argparse.Namespace, settings: Any) -> int:
    """flagsweep nightly."""
    from bot.github import publish
    from bot.pipeline import nightly
    from harness.engine.engine import SweepInterrupted
    from state import db
    publish.plan_settings(settings)    # routing rules, the unsafe flag table: refused before the night, not after it
    settings, refused = _identity(settings, args.dry_run)
    if refused:
        say.err(f"flagsweep nightly: {refused}")
        return 2
    mismatch = _date_refusal(args.torch, args.date)
    if mismatch:
        say.err(f"flagsweep nightly: {mismatch}")
        return 2
    unwritable = _export_refusal(args.export) if args.export else None
    if unwritable:
        say.err(f"flagsweep nightly: --export {args.export}: {unwritable}")
        return 2
    conn = db.connect(settings.state_path)
    try:
        with sigterm_as_interrupt():
            result = nightly.run_nightly(conn, settings, torch=args.torch, date=args.date, configs=_split(args.configs),
                                         models=args.models, force=args.force, shard=args.shard,
                                         dry_run=args.dry_run, out_dir=args.out, population=args.population,
                                         modes=_split(args.modes))
        if args.export and result.run_id is not None:
            from bot.pipeline import merge
            merge.export_night(conn, [each.run_id for each in result.each], args.export)    # a file per mode
    except SweepInterrupted as exc:
        say.err(f"flagsweep nightly: interrupted; run {exc.run_id} keeps its finished items and is resumed by the "
                "next `flagsweep nightly` for the same nightly")
        return 130
    except ValueError as exc:   # ConfigError, UnknownModel, NightlyError, ResumeError: a user error, nothing ran
        say.err(f"flagsweep nightly: {exc}")
        return 2
    finally:
        conn.close()
    _emit(result, args.json)
    return exit_status(result)


ENVIRONMENT_SUSPECT = 3     # the environment gate held the night back: stored and reported, nothing filed or closed


def exit_status(result: Any) -> int:
    """0: done; 1: the nightly failed (or a merge lacked shards); 3: environment_suspect (nothing filed); the worst
    of the night's modes."""
    if result.status == "failed":
        return 1
    if any(r.suspect for r in result.each):
        return ENVIRONMENT_SUSPECT
    return 1 if result.missing_shards else 0


def _date_refusal(torch: str, date: str | None) -> str | None:
    """Why `--date` cannot go with this `--torch`, or None: only `nightly` (the default) is chosen by date; any other
    build is what it is, and its run would be stored under a date it was not built on."""
    from bot.builds import provider
    if date is None:
        return None
    try:
        kind = provider.parse_spec(torch).kind
    except provider.SpecError:
        return None          # the bad build name is refused on its own, with its reason
    if kind == "nightly":
        return None
    return (f"--date {date} picks a nightly build; --torch {torch} is another build, so the date would be wrong: "
            f"drop --date, or use --torch nightly --date {date}")


def _export_refusal(target: str) -> str | None:
    """Why the run cannot be exported to `target` (checked before the sweep, so it is not lost after), or None."""
    path = Path(target)
    if path.is_dir():
        return "is a folder; name the file to write"
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        return f"no folder {folder}"
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return "cannot be written"
    return None


def cmd_merge(args: argparse.Namespace, settings: Any) -> int:
    """flagsweep merge RUN...: SIGTERM ends it as Ctrl-C does (reproducer folders removed, exit 130)."""
    with sigterm_as_interrupt():
        return _merge(args, settings)


def _merge(args: argparse.Namespace, settings: Any) -> int:
    from bot.builds import provider
    from bot.pipeline import merge
    from state import db, runs
    from state.db import transaction
    refused = settings.compile_cache_refusal()     # flake confirmation re-runs items in workers of [sweep] backend
    if refused:
        say.err(f"flagsweep merge: {refused}")
        return 2
    conn = db.connect(settings.state_path)
    try:
        try:
            # the worker modules this host's settings import: the only ones a merged run's confirmation may import
            modules = settings.sweep_options().extra_modules
            shards = merge.read_files(args.runs, modules)        # every file read and checked: nothing stored yet
            first = merge.environment_of(conn, args.runs[0], shards)
            python = _verifying_python(args, settings, first) if args.torch else None
            with transaction(conn):     # the files' runs and the merge, or nothing (a refused merge keeps no shard)
                run_ids = merge.merge_modes(conn, merge.resolve_runs(conn, args.runs, shards), python=python,
                                            modules=modules)
        except (ValueError, provider.ProviderError) as exc:   # MergeError, SpecError, NightlyError: nothing merged
            say.err(f"flagsweep merge: {exc}")
            return 2
        dry_run = (not settings.github.has_credentials) if args.dry_run is None else args.dry_run
        each = [_publish_merged(conn, settings, runs.get_run(conn, run_id), dry_run=dry_run, out=args.out,
                                python=python or settings.sweep.python) for run_id in run_ids]   # one per mode
        result = dataclasses.replace(each[0], others=each[1:])
    finally:
        conn.close()
    _emit(result, args.json)
    return exit_status(result)     # 1: published, but not the whole nightly


def _publish_merged(conn: Any, settings: Any, run: Any, *, dry_run: bool, out: str | None, python: str | None) -> Any:
    """Diff, confirm, verify and publish one mode's merged run, its dry-run files where the nightly writes its mode's
    (publish.dry_run_dir)."""
    from bot.github.publish import dry_run_dir
    from bot.pipeline import nightly
    from bot.pipeline.steps import Steps
    mode = run.options.sweep.mode
    out = dry_run_dir(settings, out, mode)
    result = nightly.NightlyResult(status="swept", run_id=run.id, nightly=run.nightly, models=len(run.models),
                                   configs=list(run.configs), dry_run=dry_run, out_dir=str(out), mode=mode.name,
                                   torch={"version": run.environment.torch_version,
                                          "git": run.environment.torch_git, "current": False},
                                   missing_shards=list(run.options.missing_shards or []))
    return nightly.publish_stage(conn, settings, result, run, python=python, steps=Steps(), out=out)


def _verifying_python(args: argparse.Namespace, settings: Any, environment: Any) -> str:
    """The interpreter of `--torch` on this host, once it is known to be the shards' torch (`environment`'s)."""
    from bot.pipeline import nightly, steps
    built = steps.provide(settings, args.torch, None, True)
    want = (environment.torch_version, environment.torch_git)
    if (built.version, built.git) != want:
        raise nightly.NightlyError(f"--torch {args.torch} is torch {built.version} (git {built.git}); "
                                   f"the shards ran {want[0]} (git {want[1]})")
    return built.python


def _nightly_error(settings: Any) -> str | None:
    """What the scheduled nightly would fail on at 03:00, found at start-up: [nightly] torch, [sweep] device on it,
    [sweep] compile_cache (under the inductor backend), configs (named sets included, as the nightly selects them),
    models and canaries (each must be in the zoo lock)."""
    from bot.builds import provider
    from bot.pipeline import nightly, steps
    from harness.engine import configs
    where = settings.source or "settings"
    n = settings.nightly
    try:
        spec = provider.parse_spec(n.torch)
    except provider.SpecError as exc:
        return f"{where}: [nightly] torch = {n.torch!r}: {str(exc).split(': ', 1)[-1]}"
    refused = nightly.device_refusal(settings, n.torch) or settings.compile_cache_refusal() or \
        _device_here(settings, spec)
    if refused:
        return refused
    try:
        steps.select_configs(settings, list(n.configs))
    except configs.ConfigError as exc:
        return f"{where}: [nightly] configs = {n.configs!r}: {exc}"
    for name, patterns in (("models", n.models), ("canaries", n.canaries)):
        try:
            if patterns:      # an empty list: the embedded corpus (models) or no canaries
                nightly.setting_models(steps.Steps(), settings, name, list(patterns))
        except nightly.NightlyError as exc:
            return str(exc)
    return None


def _device_here(settings: Any, spec: Any) -> str | None:
    """Why `[sweep] device` is missing from the interpreter a `current` or interpreter-path `[nightly] torch` runs
    (asked in it, as `sweep` asks); None for an installed build (nightly.device_refusal judges its channel)."""
    from bot.pipeline import nightly
    if spec.kind not in ("current", "python"):
        return None
    return nightly.device_missing(settings, spec.value if spec.kind == "python" else settings.sweep.python)


def cmd_serve(args: argparse.Namespace, settings: Any) -> int:
    """flagsweep serve."""
    from bot.github import publish
    from bot.service import daemon
    # The same validation as `publish`: a bad routing rule or unsafe flag table stops the service before it listens
    # (exit 2, one line: bot.cli.errors).
    publish.plan_settings(settings)
    refused = _nightly_error(settings)
    if refused:
        say.err(f"flagsweep serve: {refused}")
        return 2
    if args.host:
        settings = dataclasses.replace(settings, webhook=dataclasses.replace(settings.webhook, host=args.host))
    if args.port is not None:
        settings = dataclasses.replace(settings, webhook=dataclasses.replace(settings.webhook, port=args.port))
    settings, refused = _identity(settings, args.dry_run)
    if refused:
        say.err(f"flagsweep serve: {refused}")
        return 2
    return daemon.serve(settings, schedule=not args.no_schedule, dry_run=args.dry_run)
