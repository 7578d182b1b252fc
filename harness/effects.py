"""Effects: what a config did to a model, compared with its baseline (DESIGN "Words").

Pure functions over Outcomes; no I/O.
"""
from __future__ import annotations

from harness.outcome import BUILD_STATUSES, Effect, Outcome

BASELINE = "baseline"


def classify(baseline: Outcome, flagged: Outcome) -> str:
    """One of EFFECTS for a (baseline, flagged) pair of the same model."""
    # A model that could not be built (or whose eager run failed) says nothing
    # about any flag, whichever of the two items noticed it.
    if baseline.status in BUILD_STATUSES or flagged.status in BUILD_STATUSES:
        return "create_error"
    base_ok = baseline.status == "ok"
    flag_ok = flagged.status == "ok"
    if base_ok and flag_ok:
        bg, fg = baseline.graphs or 0, flagged.graphs or 0
        if fg < bg:
            return "reduces_graphs"
        if fg > bg:
            return "increases_graphs"
        return "no_effect"
    if base_ok:
        return "crashes"      # error, timeout and killed all count as crashes
    if flag_ok:
        return "fixes_crash"
    return "both_crash"


def effects_for(outcomes: list[Outcome]) -> list[Effect]:
    """One Effect per model x non-baseline config that has both items, in model then config order."""
    baselines = {o.model: o for o in outcomes if o.config == BASELINE}
    effects = []
    for o in sorted(outcomes, key=lambda o: (o.model, o.config)):
        base = baselines.get(o.model)
        if o.config == BASELINE or base is None:
            continue
        effect = classify(base, o)
        effects.append(Effect(
            model=o.model, stratum=base.stratum or o.stratum, config=o.config, effect=effect,
            baseline_graphs=base.graphs, config_graphs=o.graphs,
            baseline_signature=base.signature, config_signature=o.signature,
        ))
    return effects
