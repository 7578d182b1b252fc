"""Read-set pruning in a sweep: which configs may be pruned, and the audit that keeps pruning honest.

The worker decides per item (harness.engine.worker: a config none of whose keys the model's baseline read is
reported as the baseline's result, reason "not_read"; the others are pooled, compiled together and reported as
the baseline's result, reason "pooled", while their compile matches it). After the sweep, a seeded random
sample of the pairs stored either way (not traced alone) is traced for real; a pair whose trace differs turns pruning off for the config's keys for good
(state.flags), and its traced outcome replaces the pruned one.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable

from harness.core.effects import BASELINE
from harness.core.outcome import REASONS, Outcome
from state import flags as stored
from state import runs


@dataclass(frozen=True)
class Pruning:
    """What a sweep may prune and how much of it the audit traces again."""

    configs: frozenset[str]        # config names that may be pruned (the named sets' flips)
    audit: float = 0.05            # share of pruned pairs traced again
    audit_min: int = 20            # ... but at least this many (all of them when fewer)
    seed: int = 0
    pool: bool = True              # the configs the baseline read are pooled (compiled together) before alone


def eligible(pruning: Pruning | None, configs: dict[str, dict], disabled: set[str]) -> frozenset[str]:
    """The configs a sweep prunes: those named, minus any with a key whose pruning an audit turned off."""
    if pruning is None:
        return frozenset()
    return frozenset(n for n in pruning.configs if n in configs and n != BASELINE and not set(configs[n]) & disabled)


def sample(pairs: list[tuple[str, str]], pruning: Pruning) -> list[tuple[str, str]]:
    """A seeded random sample of the pruned (model, config) pairs: audit share, at least audit_min."""
    want = min(len(pairs), max(pruning.audit_min, math.ceil(pruning.audit * len(pairs))))
    return sorted(random.Random(pruning.seed).sample(sorted(pairs), want))


def audit(conn: Any, run_id: int, *, configs: dict[str, dict], pruning: Pruning,
          trace: Callable[[list[tuple[str, str]]], list[Outcome]]) -> stored.AuditSummary:
    """Trace (with `trace`: the engine's run_items) a sample of the run's pruned pairs; store what each gave,
    replacing the pruned outcome."""
    outcomes = runs.outcomes(conn, run_id)
    chosen = sample([(o.model, o.config) for o in outcomes if o.reason in REASONS], pruning)
    if chosen:
        baselines = {o.model: o for o in outcomes if o.config == BASELINE}
        traced = trace(chosen)
        stored.record_audit(conn, run_id, [stored.AuditResult(m, c, tuple(configs[c]), baselines[m], t)
                                           for (m, c), t in zip(chosen, traced)])
        for outcome in traced:
            runs.record_outcome(conn, run_id, outcome)
    return stored.audit_summary(conn, run_id)
