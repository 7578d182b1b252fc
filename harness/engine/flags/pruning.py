"""Read-set pruning in a sweep: which configs may be pruned, and the audit that keeps pruning honest.

The worker decides per item (harness.engine.worker: a config none of whose keys the model's baseline read is
reported as the baseline's result, reason "not_read"; the others are pooled, compiled together and reported as
the baseline's result, reason "pooled", while their compile matches it). A seeded random sample of the pairs stored
either way (not traced alone) is traced for real; a pair whose trace differs turns pruning off for the config's keys
for good (state.flags), and its traced outcome replaces the pruned one. The sample is drawn in the sweep's own groups,
where the model, its references and its baseline already are (`in_group`: each model's first pruned pairs in an order
seeded by the model, up to its share of what the audit wants); after the sweep, `audit` traces only what they left
short of its size (`sample` around them: a few models with few pruned pairs, a resume).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterable

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


def size(pairs: int, pruning: Pruning) -> int:
    """How many of `pairs` pruned pairs the audit traces: the audit share, at least audit_min (all when fewer)."""
    return min(pairs, max(pruning.audit_min, math.ceil(pruning.audit * pairs)))


def sample(pairs: list[tuple[str, str]], pruning: Pruning, already: int = 0) -> list[tuple[str, str]]:
    """A seeded random sample of the pruned (model, config) pairs not yet audited, `already` others having been (in
    their groups): with them, the audit share of all, at least audit_min."""
    want = max(0, size(len(pairs) + already, pruning) - already)
    return sorted(random.Random(pruning.seed).sample(sorted(pairs), want))


def in_group(models: list[str], prunable: Iterable[str], pruning: Pruning) -> tuple[dict[str, list[str]], int]:
    """The audit's part drawn in the sweep's groups, fixed before it: ({model: its prunable configs in an order seeded
    by the model}, how many of its pairs reported pruned or pooled its group traces again, the first in that order).
    The number is the audit's size were every prunable pair pruned, shared out over the models: at least the size
    over the pairs actually pruned, wherever each model has that many."""
    configs = sorted(set(prunable))
    orders = {}
    for model in models:
        order = list(configs)
        random.Random(f"{pruning.seed} {model}").shuffle(order)
        orders[model] = order
    return orders, math.ceil(size(len(models) * len(configs), pruning) / max(1, len(models)))


def audit(conn: Any, run_id: int, *, configs: dict[str, dict], pruning: Pruning,
          trace: Callable[[list[tuple[str, str]]], list[Outcome]]) -> stored.AuditSummary:
    """Complete the audit after the sweep: trace (with `trace`: the engine's run_items) the part of its sample the
    groups did not (those they traced are stored already, as their audit rows and outcomes); store what each gave,
    replacing the pruned outcome."""
    outcomes = runs.outcomes(conn, run_id)
    chosen = sample([(o.model, o.config) for o in outcomes if o.reason in REASONS], pruning,
                    stored.audit_summary(conn, run_id).audited)
    if chosen:
        baselines = {o.model: o for o in outcomes if o.config == BASELINE}
        traced = trace(chosen)
        stored.record_audit(conn, run_id, [stored.AuditResult(m, c, tuple(configs[c]), baselines[m], t)
                                           for (m, c), t in zip(chosen, traced)])
        for outcome in traced:
            runs.record_outcome(conn, run_id, outcome)
    return stored.audit_summary(conn, run_id)
