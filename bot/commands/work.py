"""The work comment commands start: checked arguments, then a sweep, a bisect or a range searched again.

Each goes through the context's steps (bot/commands/steps.py), which tests replace with twins.
User errors (a bad config, an unknown model, no torch to sweep with) become `UserError`.
"""
from __future__ import annotations

import dataclasses
import logging
import sqlite3
from typing import Any

from bot.commands.context import Context, UserError
from bot.github.publish import dry_run_dir
from bot.pipeline import steps
from bot.ranges.bisect import Bisection, BisectError, search, window
from harness.core.modes import DEFAULT, Mode
from harness.engine.configs import ConfigError
from harness.engine.engine import SweepRequest

log = logging.getLogger(__name__)


def check_configs(ctx: Context, names: list[str]) -> dict[str, dict]:
    try:
        return steps.select_configs(ctx.settings, names)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def check_models(ctx: Context, patterns: list[str]) -> list[str]:
    try:
        names = steps.resolve_models(patterns)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if len(names) > ctx.settings.commands.max_models:
        raise UserError(f"{', '.join(patterns)} matches {len(names)} models; at most "
                        f"{ctx.settings.commands.max_models} per command")
    return names


def check_base_settings(ctx: Context, texts: list[str]) -> dict[str, Any]:
    from harness.engine import configs
    out: dict[str, Any] = {}
    try:
        for text in texts:
            key, value = configs.parse_setting(text)   # syntax here; types in the torch that runs it
            out[key] = value
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return out


def check_modes(ctx: Context, names: list[str] | None) -> list[Mode]:
    """The modes `--modes` names (eval without it); UserError naming an unknown one, in one line."""
    from bot.settings import SettingsError
    try:
        return ctx.settings.sweep_modes(names or ["eval"])
    except SettingsError as exc:
        raise UserError(str(exc)) from None


def sweep(ctx: Context, models: list[str], configs: dict[str, dict], base: dict[str, Any],
          mode: Mode = DEFAULT) -> int:
    """An ad-hoc sweep on the torch the nightly uses, in `mode`, stored as a `command` run (kept out of the nightly
    history)."""
    from bot.builds import provider
    pipeline = ctx.steps.pipeline
    try:
        built = pipeline.provide(ctx.settings, ctx.settings.nightly.torch, None, False)
    except provider.ProviderError as exc:
        raise UserError(f"no torch to sweep with: {exc}") from None
    try:
        return pipeline.sweep(ctx.conn, SweepRequest(models=models, configs=configs, base_settings=base,
                                                     options=dataclasses.replace(
                                                         ctx.settings.sweep_options(built.python), mode=mode),
                                                     kind="command",
                                                     progress=False)).id
    except ConfigError as exc:   # checked in that torch before anything ran
        raise UserError(str(exc)) from None


def model_rows(conn: sqlite3.Connection, run_id: int | None, config: str | None, models: list[str]) -> list[dict]:
    """This issue's models under its config in a run, for the reply."""
    from state import runs
    if run_id is None:
        return []
    wanted = set(models)
    return [{"model": o.model, "status": o.status, "graphs": o.graphs, "signature": o.signature}
            for o in runs.outcomes(conn, run_id) if o.model in wanted and o.config == config]


def bisect(ctx: Context, model: str, config: str, good: str | None, bad: str | None) -> Bisection:
    """The first build between good and bad (defaults: see `window`) where the item's outcome changed."""
    try:
        labels = window(ctx.steps.pipeline.list_builds(ctx.settings), good, bad)
        return search(labels, lambda label: ctx.steps.probe(ctx.settings, label, model, config))
    except BisectError as exc:
        raise UserError(str(exc)) from None


def search_range(ctx: Context, link: Any) -> dict[str, Any]:
    """Search this issue's regression range again, then publish the latest nightly (which rewrites the issue).

    The run searched is the latest of the issue's mode that holds a range of its (config, signature), else that mode's
    latest nightly; a bounded range continues between the ends it had narrowed to.
    """
    from state import ranges as stored_ranges
    from state import runs
    if ctx.settings.ranges.installs <= 0:
        raise UserError("the range search is off ([ranges] installs = 0)")
    pipeline = ctx.steps.pipeline
    key = (link.config, link.signature)

    def in_its_mode(run: Any) -> bool:   # the mode's runs only: another mode's range is not this issue's
        return run.options.sweep.mode.key == link.mode
    latest = next((r for r in runs.finished_runs(ctx.conn, ["nightly"]) if in_its_mode(r)), None)
    if latest is None:
        raise UserError("no finished nightly of this issue's mode yet, so there is no range to search")
    ranged = [r for r in stored_ranges.runs_with(ctx.conn, *key) if in_its_mode(runs.get_run(ctx.conn, r))]
    run_id = (ranged or [latest.id])[0]
    prev_run, diff = pipeline.diff(ctx.conn, runs.get_run(ctx.conn, run_id))
    prev = prev_run.id if prev_run else None
    starts = {r.key: (r.good, r.bad) for r in stored_ranges.for_run(ctx.conn, [run_id])
              if (r.config, r.signature) == key and r.status == "bounded"}
    report = pipeline.ranges(ctx.conn, run_id, prev, diff, ctx.settings, seams=pipeline.range_steps(), keys=[key],
                             starts=starts)
    if not report.ranges:
        raise UserError(f"nightly run {run_id} shows no confirmed new crash or fix of this signature to search")
    pipeline.verify(ctx.conn, latest.id, ctx.settings)
    view = steps.load_view(ctx.conn, latest.id, ctx.settings)
    out_dir = dry_run_dir(ctx.settings, ctx.out_dir, latest.options.sweep.mode)   # where the nightly wrote it
    publisher = pipeline.open_publisher(ctx.settings, dry_run=ctx.dry_run, out_dir=out_dir)
    pipeline.publish(ctx.conn, ctx.settings, view, publisher=publisher, dry_run=ctx.dry_run, out_dir=str(out_dir))
    return {"run_id": run_id, "published_run": latest.id, **report.to_dict()}
