"""Which crashes form a tracking group (pure): one group per (config, signature) of a crash the flag causes.

The planner files one tracking issue per group (its key: bot/issues/keys.py
`tracking_key`); the verify step (bot/verify/) verifies one reproducer per group.
A crash that flake confirmation found flaky is not believed, so it forms no group. A wrong result the flag causes
(correctness effect `wrong_result`) forms a group of its own per (config, wrong signature): the scenario and the
first output that differs (harness.core.correctness.wrong_signature); `issue_groups` holds both kinds, the verify
step only the crashes.
"""
from __future__ import annotations

from harness.core.correctness import WRONG_RESULT, first_wrong, wrong_signature
from harness.core.outcome import Effect, Outcome


def crash_signature(outcome: Outcome | None, effect: Effect) -> str:
    """The signature a crash is grouped by: the effect's, else the outcome's signature or status."""
    return effect.config_signature or (outcome.crash_signature if outcome else "error")


def tracking_groups(effects: list[Effect], outcomes: list[Outcome]) -> dict[tuple[str, str], list[Effect]]:
    """{(config, signature): effects} for every crash the flag causes, sorted by (config, signature)."""
    by_item = {(o.model, o.config): o for o in outcomes}
    groups: dict[tuple[str, str], list[Effect]] = {}
    for e in effects:
        o = by_item.get((e.model, e.config))
        if e.effect == "crashes" and not (o and o.flaky_rate is not None):
            groups.setdefault((e.config, crash_signature(o, e)), []).append(e)
    return dict(sorted(groups.items()))


def wrong_result_groups(effects: list[Effect], outcomes: list[Outcome]) -> dict[tuple[str, str], list[Effect]]:
    """{(config, wrong signature): effects} for every wrong result the flag causes, sorted by (config, signature)."""
    by_item = {(o.model, o.config): o for o in outcomes}
    groups: dict[tuple[str, str], list[Effect]] = {}
    for e in effects:
        o = by_item.get((e.model, e.config))
        call = first_wrong(o.calls) if o is not None and e.correctness == WRONG_RESULT else None
        if call is not None:
            groups.setdefault((e.config, wrong_signature(call)), []).append(e)
    return dict(sorted(groups.items()))


def issue_groups(effects: list[Effect], outcomes: list[Outcome]) -> dict[tuple[str, str], list[Effect]]:
    """Every group a tracking issue may be filed for: the crashes and the wrong results, sorted by key."""
    return dict(sorted({**tracking_groups(effects, outcomes), **wrong_result_groups(effects, outcomes)}.items()))
