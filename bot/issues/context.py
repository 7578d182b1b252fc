"""The run as its issues tell it: what every issue body of one run shares, and the words to say it.

`RunContext` holds the run view, its timeline and the settings, indexed once (outcomes by item, effects by
config), and gives the fields every body of a config shares: environment, method, the config's effects,
dates. The small words (date phrases, one-line templates, a body that fits GitHub's limit) are here too.
"""
from __future__ import annotations

import fnmatch
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bot.issues.routing import Rule
from bot.issues.timeline import Seen, Timeline, issue_date
from bot.settings import SUMMARY_CONFIGS
from bot.text import markdown, render
from bot.view.run_view import RunView
from harness.core.diff import Transition
from harness.core import defaults, unsafe
from harness.core.defaults import Default, Findings
from harness.core.effects import effect_table
from harness.core.outcome import Effect, Outcome
from harness.core.unsafe import Unsafe
from state.links import Link
from state.resolutions import Tally

# The environment fields an issue shows, in this order.
ENV_FIELDS = ("torch_version", "torch_git", "transformers_version", "python_version", "device", "cuda_version",
              "flagsweep_version", "recipe_fingerprint")
ROW_LIMITS = (200, 100, 50, 20, 5)       # table rows tried, largest first, until the body fits


@dataclass
class PlanSettings:
    verify_nightlies: int = 2    # consecutive nightlies on which every crashing model must compile before a close
    labels: list[str] = field(default_factory=lambda: ["flagsweep"])
    rules: list[Rule] = field(default_factory=list)
    report_url: str | None = None
    max_new_per_night: int = 5   # new tracking issues per publish (the rest wait: pending, by leverage)
    max_open: int = 25           # open tracking issues at most
    max_comments_per_issue_per_day: int = 1   # "what changed" comments per issue per day
    min_models: int = 2          # evidence for a new issue: a confirmed crash and this many models...
    min_nights: int = 2          # ...or this many consecutive nightlies
    gate: list[dict[str, Any]] | None = None    # why the run is environment_suspect (bot.pipeline.gate), if it is
    precision: Tally | None = None              # the measured precision (state.resolutions.tally)
    culprit_repo: str = "pytorch/pytorch"       # the repository commits are linked in (`[culprit] repo`)
    dynamic_label: str = "module: dynamic shapes"   # added when dynamic=False makes the reproducer pass (bot.issues.routing.verdict_labels)
    summary_configs: list[str] = field(default_factory=lambda: list(SUMMARY_CONFIGS))   # names or globs
    # flags unsafe by their own documentation: their wrong results are shown, never filed (harness.core.unsafe)
    unsafe: dict[str, Unsafe] = field(default_factory=unsafe.load)
    # Dynamo's defaults wrong by design in a scenario: the baseline findings they explain fold (harness.core.defaults)
    defaults: dict[str, Default] = field(default_factory=defaults.load)

    def summarised(self, config: str) -> bool:
        """Whether `config` gets a summary issue (the rest of an every-flag sweep: the report's readiness table)."""
        return any(fnmatch.fnmatchcase(config, pattern) for pattern in self.summary_configs)


class RunContext:
    """One run's view, timeline and settings, with what its issues share."""

    def __init__(self, view: RunView, timeline: Timeline, settings: PlanSettings) -> None:
        self.view, self.timeline, self.settings = view, timeline, settings
        self.mode = view.run.options.sweep.mode     # one mode a run: every issue of this run is one of its
        self._outcome: dict[tuple[str, str], Outcome] = {(o.model, o.config): o for o in view.outcomes}
        self.by_config: dict[str, list[Effect]] = {}
        for e in view.effects:
            self.by_config.setdefault(e.config, []).append(e)
        self.date = issue_date(view.run)
        previous = issue_date(view.previous) if view.previous else ""
        self.previous_text = short(previous) if previous else "the previous run"
        self.transitions: list[Transition] = list(view.diff.transitions) if view.diff else []

    def outcome_of(self, e: Effect) -> Outcome | None:
        """The outcome an effect was classified from (None: the view has none)."""
        return self._outcome.get((e.model, e.config))

    def effects(self, config: str) -> list[Effect]:
        """The config's effects, by model."""
        return self.by_config.get(config, [])

    def display(self, config: str) -> str:
        """How issues name a config."""
        return config_display(config, self.view.run.configs.get(config, {}))

    def unsafe(self, config: str) -> str | None:
        """Why `config` is unsafe by its own documentation (its wrong results are expected), or None."""
        return unsafe.reason(self.view.run.configs.get(config, {}), self.settings.unsafe)

    def findings(self) -> Findings:
        """The run's baseline findings, folded by the Dynamo default that explains them (the rest one per model)."""
        return defaults.explain(self.view.outcomes, self.view.run.configs, self.settings.defaults)

    def notices(self) -> dict[str, Any]:
        """The gate's reasons and the maintainers' verdicts, for a summary's material: only those set, so a
        summary without them hashes as it did before they existed."""
        tally = self.settings.precision
        shown = self._verdicts() if tally and tally.closed_by_maintainer else None
        told = {"gate": self.settings.gate, "precision": shown}
        return {k: v for k, v in told.items() if v}

    def _verdicts(self) -> dict[str, Any] | None:
        """The measured precision as summaries show it (state.resolutions.Tally.verdicts), or None unmeasured."""
        tally = self.settings.precision
        return tally.verdicts() if tally else None

    def meta(self, data: dict[str, Any]) -> str:
        """A body's hidden meta line: `data`, and the mode's key where the mode is not the default (so an eval body
        is written as before modes existed)."""
        return markdown.meta_marker({**data, "mode": self.mode.key} if self.mode.key else data)

    def owns(self, link: Link) -> bool:
        """Whether a stored issue link is one of this run's mode (another mode's issues are not this run's to
        refresh, count quiet or close)."""
        return link.mode == self.mode.key

    def comment_marker(self, key: str, what: str) -> str:
        """The marker that makes one comment of this run on issue `key` findable (and so never sent twice)."""
        return f"<!-- flagsweep:comment={key}/{self.view.run.id}/{what} -->"

    def shared(self, config: str) -> dict[str, Any]:
        """The body fields every issue of `config` shares (the template context they start from)."""
        run = self.view.run
        env, options = run.environment, run.options
        how = options.sweep
        table = effect_table(self.effects(config), config)
        strata = Counter(o.stratum or "unknown" for o in self.view.outcomes if o.config == "baseline")
        return {
            "config": config, "config_display": self.display(config),
            "mode": self.mode, "mode_words": line("mode_words.txt.j2", mode=self.mode),
            "environment": [(k, getattr(env, k)) for k in ENV_FIELDS if getattr(env, k)],
            "n_models": len(self.view.models or strata), "strata": sorted(strata.items()),
            "configs": [(n, json.dumps(v, sort_keys=True)) for n, v in sorted(run.configs.items())],
            "backend": how.backend, "device": how.device,
            "effects_table": table.rows, "testable": table.testable, "report_url": self.settings.report_url,
            "gate": self.settings.gate, "precision": self._verdicts(),
            "begin": markdown.BEGIN, "end": markdown.END, "date": self.date, "date_text": when(self.date),
            "population": options.population,
            "unavailable": sorted((n, u["missing"] or []) for n, u in run.unavailable.items()),
        }


def config_display(name: str, settings: dict[str, Any]) -> str:
    """`capture_scalar_outputs=True` for a one-flag config, else its name."""
    if len(settings) == 1:
        (key, value), = settings.items()
        return f"{key.rsplit('.', 1)[-1]}={value!r}"
    return name


def when(stamp: str) -> str:
    """'in nightly 2026-11-20' for a nightly date, 'on 2026-11-20 13:47 UTC' for a run's start time."""
    return line("date_phrase.txt.j2", stamp=str(stamp))


def line(template: str, **values: Any) -> str:
    """A one-line template (a title, a date phrase) rendered without its trailing newline."""
    return render.render(template, **values).strip("\n")


def short(stamp: str) -> str:
    """A date, or a run's start time to the minute."""
    return str(stamp)[:16].replace("T", " ")


def render_fitting(template: str, ctx: dict[str, Any]) -> str:
    """Render with the largest table size that keeps the body under GitHub's limit."""
    for limit in ROW_LIMITS:
        body = render.render(template, limit=limit, **ctx)
        if markdown.fits(body):
            return body
    cut = body[: markdown.MAX_BODY - 200]
    return cut + "\n\n… (truncated)\n" + markdown.END + "\n"


def seen_fields(ctx: RunContext, seen: Seen) -> dict[str, Any]:
    """A tracking issue's history fields: first and last seen (this run when the history has none), nightlies seen."""
    first, last = seen.first_seen or ctx.date, seen.last_seen or ctx.date
    return {"first_seen": short(first), "last_seen": short(last), "first_seen_text": when(first),
            "last_seen_text": when(last), "nightlies_seen": seen.nightlies_seen or 1}
