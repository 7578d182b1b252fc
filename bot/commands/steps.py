"""The comment commands' steps: the calls a command makes into other areas, and the typed seams tests replace.

As in bot/pipeline/steps.py: each step is one function with a Protocol of its own, collected in
`CommandSteps` with the real function as its default; a test swaps one for a twin of the same type.
What a command does with the nightly's own steps (an ad-hoc sweep, a range searched again, the
builds a bisect spans) goes through `CommandSteps.pipeline`, the pipeline's `Steps`.
"""
from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from bot.pipeline.nightly import NightlyResult, run_nightly
from bot.pipeline.steps import Steps, select_configs
from bot.ranges.bisect import Probe, SkipNightly, outcome_key
from bot.settings import Settings

log = logging.getLogger(__name__)


# ---- the steps ---------------------------------------------------------------------------------

def nightly(conn: sqlite3.Connection, settings: Settings, *, force: bool, dry_run: bool,
            out_dir: Path) -> NightlyResult:
    """The nightly of `[nightly] torch`, published (forced: swept again though it is stored); what it did."""
    return run_nightly(conn, settings, torch=settings.nightly.torch, force=force, dry_run=dry_run,
                       out_dir=out_dir, progress=False)


def probe_build(settings: Settings, label: str, model: str, config: str) -> Probe:
    """Install the build `label` names (a nightly's date or a version) and run the one item under it.

    SkipNightly when the build cannot be installed; a config key that build lacks is an outcome of its own.
    """
    from bot.builds import provider
    from harness.engine import engine
    try:
        built = provider.provide_spec(settings.nightly, provider.parse_spec(label), progress=False)
    except (provider.ProviderError, provider.SpecError) as exc:
        log.warning("bisect: skipping %s: %s", label, exc)
        raise SkipNightly(label) from exc
    chosen = select_configs(settings, [config])
    try:
        out = engine.run_items([(model, config)], configs=chosen, base_settings={},
                               options=settings.sweep_options(built.python))[0]
    except engine.ConfigUnavailable as exc:
        return Probe(date=label, version=built.version, git=built.git, key="unavailable", detail=str(exc)[:300])
    return Probe(date=label, version=built.version, git=built.git, key=outcome_key(out),
                 detail=(out.error_message or "")[:300])


# ---- the seams ---------------------------------------------------------------------------------

class NightlyStep(Protocol):
    def __call__(self, conn: sqlite3.Connection, settings: Settings, *, force: bool, dry_run: bool,
                 out_dir: Path) -> NightlyResult: ...


class ProbeStep(Protocol):
    def __call__(self, settings: Settings, label: str, model: str, config: str) -> Probe: ...


@dataclass
class CommandSteps:
    """The commands' calls into other areas; tests swap one for a twin of the same type."""

    pipeline: Steps = field(default_factory=Steps)   # a command's sweep, a range searched again, a bisect's builds
    rerun: NightlyStep = nightly                     # `rerun`: the whole nightly again, forced
    probe: ProbeStep = probe_build                   # `bisect`: one build installed, one item run
