"""One assembler of a sweep, for both callers: `flagsweep sweep` (bot/cli/sweep.py) and the nightly
(bot/pipeline/nightly.py).

The configs: the catalog's among the names asked, plus the named sets' flips expanded in the torch under test.
What may be pruned, by one rule (`pruning`): on when asked (the command line's `--prune`), else when a named set
flipped something; the flips may be pruned, or every config when no set flipped any. The models: the zoo's
candidates for the globs asked, the embedded corpus when none are (`steps.candidates`), then the population drawn
(`draw`), with one baseline pass when none is stored. What differs between the callers is an input: `prune`, the
seeds, how a baseline pass is announced.
"""
from __future__ import annotations

import dataclasses
import sqlite3
from dataclasses import dataclass
from typing import Any, Callable

from bot.pipeline import sampling
from bot.pipeline.steps import Steps
from bot.settings import Settings
from harness.engine.flags.pruning import Pruning
from harness.core.effects import BASELINE
from harness.engine.engine import SweepRequest


@dataclass(frozen=True)
class Configs:
    """The configs a sweep runs (baseline first), the named sets' flips among them, and what it may prune."""

    configs: dict[str, dict]
    flips: dict[str, dict]
    pruning: Pruning | None
    together: frozenset[str] = frozenset()   # the named configs compiled together where equal (`together`)


def configs(steps: Steps, settings: Settings, names: list[str], chosen: dict[str, dict], *, python: str | None,
            prune: bool | None, seed: int) -> Configs:
    """`chosen` (the catalog's configs among `names`, as the caller selected them with `steps.select_configs`: the
    nightly does so before it installs a build, so a bad name fails first) and the named sets' flips, expanded in the
    torch at `python`; what may be pruned (`pruning`), its audit seeded with `seed`."""
    flips = steps.expand_sets(settings, names, python=python)
    everything = {**chosen, **flips}
    return Configs(everything, flips, pruning(everything, flips, prune=prune, audit=settings.sweep.prune_audit,
                                              seed=seed), together(chosen, flips, settings.sweep.pool_named))


def together(chosen: dict[str, dict], flips: dict[str, dict], enabled: bool) -> frozenset[str]:
    """The one rule for named flags: the configs named one by one (not a set's flips, not the baseline) are compiled
    together, later calls included, where there are two or more and `[sweep] pool_named` is on; equal to the
    baseline, each is stored as its result (`pooled`); else split until they are, down to each alone."""
    named = frozenset(c for c in chosen if c != BASELINE and c not in flips)
    return named if enabled and len(named) > 1 else frozenset()


def pruning(configs: dict[str, dict], flips: dict[str, dict], *, prune: bool | None, audit: float,
            seed: int) -> Pruning | None:
    """The one rule: pruning is on when asked (`prune`), else when a named set flipped something; it may prune the
    flips, or every config when there are none (`--prune on` over configs named one by one)."""
    if not (prune if prune is not None else bool(flips)):
        return None
    return Pruning(frozenset(flips or configs), audit=audit, seed=seed)


def draw(conn: sqlite3.Connection, steps: Steps, request: SweepRequest, cands: list[Any], *, population: str,
         sample: int | None, seed: int, torch_version: str | None, say: Callable[[str], None]) -> SweepRequest:
    """`request` over the models drawn from `cands` (`.model`, `.stratum`): the population, then a stratified
    sample; a baseline pass (`request.baseline_pass`, announced with `say`) runs first when one is needed and
    none is stored, and its outcomes are the request's prior."""

    def baseline_pass(models: list[str]) -> int:
        say(f"baseline pass over {len(models)} models to find the graph-breaking ones")
        return steps.sweep(conn, request.baseline_pass(models)).id

    drawn = sampling.draw(conn, cands, population=population, sample=sample, seed=seed,
                          base_settings=request.base_settings, torch_version=torch_version, baseline_pass=baseline_pass)
    return dataclasses.replace(request, models=drawn.models, prior=drawn.prior, population=drawn.meta)
