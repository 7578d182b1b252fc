"""What the data of one tracking group says at a glance: the patterns a maintainer triages by (pure).

Each observation is a fact computed from the run, never a guess: where the crashing models concentrate
(stratum), how the flag's crashes weigh against the models it helps, which of them also crash under the
other configs, and whether this is the flag's only crash signature. An observation the data does not
support is left out. The words are templates/tracking_observations.md.j2's.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bot.issues.context import RunContext
from harness.core.effects import UNTESTABLE
from harness.core.outcome import Effect
from harness.core.tracking import crash_signature

CONCENTRATED = 0.75     # a stratum holding at least this share of the crashing models (and two of them) is named


@dataclass(frozen=True)
class Observation:
    """One fact about a group: its kind (which sentence says it) and the numbers the sentence needs."""

    kind: str                       # "stratum", "ratio", "overlap", "one_signature", "signatures"
    facts: dict[str, Any] = field(default_factory=dict)


def observe(ctx: RunContext, config: str, signature: str, models: list[str]) -> list[Observation]:
    """The observations of the group of `signature` under `config`, whose crashing models are `models`."""
    effects = ctx.effects(config)
    found = [_stratum(effects, set(models)), _ratio(effects), *_overlap(ctx, config, signature, set(models)),
             _signatures(ctx, effects, signature)]
    return [o for o in found if o is not None]


def _stratum(effects: list[Effect], models: set[str]) -> Observation | None:
    """The stratum most crashing models belong to, with how many of its testable models crash."""
    strata = Counter(e.stratum for e in effects if e.model in models and e.stratum)
    if not strata:
        return None
    name, count = strata.most_common(1)[0]
    if count < 2 or count < CONCENTRATED * len(models):
        return None
    testable = [e for e in effects if e.effect not in UNTESTABLE]
    inside = sum(1 for e in testable if e.stratum == name)
    outside = [e for e in testable if e.stratum != name]
    return Observation("stratum", {"stratum": name, "count": count, "of": len(models), "stratum_testable": inside,
                                   "others_testable": len(outside),
                                   "others_crashing": sum(1 for e in outside if e.model in models)})


def _ratio(effects: list[Effect]) -> Observation | None:
    """Crash : benefit: the models the flag crashes against those it gives fewer graphs."""
    crashes = sum(1 for e in effects if e.effect == "crashes")
    helps = sum(1 for e in effects if e.effect == "reduces_graphs")
    return Observation("ratio", {"crashes": crashes, "helps": helps}) if crashes else None


def _overlap(ctx: RunContext, config: str, signature: str, models: set[str]) -> list[Observation]:
    """Per other config, how many of these models crash there too (and how many with this same signature)."""
    found = []
    for other in sorted(ctx.by_config):
        if other == config:
            continue
        crashed = [e for e in ctx.by_config[other] if e.effect == "crashes" and e.model in models]
        if crashed:
            same = sum(1 for e in crashed if crash_signature(ctx.outcome_of(e), e) == signature)
            found.append(Observation("overlap", {"config": other, "display": ctx.display(other),
                                                 "count": len(crashed), "of": len(models), "same": same}))
    return found


def _signatures(ctx: RunContext, effects: list[Effect], signature: str) -> Observation | None:
    """Whether every crash of the flag has this one signature, or how many signatures share them."""
    sigs = Counter(crash_signature(ctx.outcome_of(e), e) for e in effects if e.effect == "crashes")
    if len(sigs) == 1:
        return Observation("one_signature", {"count": sigs[signature]}) if sigs[signature] > 1 else None
    return Observation("signatures", {"signatures": len(sigs), "count": sigs[signature],
                                      "crashes": sum(sigs.values())})
