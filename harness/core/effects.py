"""Effects: what a config did to a model, compared with its baseline (DESIGN "Words").

Pure functions over Outcomes; no I/O. Beside the seven graph effects, each Effect carries the two axes judged on the
item's calls (harness.core.correctness): its correctness and recompile effects, counted by `calls_table`; the
baseline's own wrong results are the run's baseline findings (`baseline_findings`), never a flag's.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from harness.core import correctness
from harness.core.correctness import CORRECTNESS_EFFECTS, RECOMPILE_EFFECTS
from harness.core.outcome import EFFECTS, UNTESTED_STATUSES, Effect, Outcome

BASELINE = "baseline"
# Effects that leave a model untestable under a flag; percentages are of the rest (DESIGN "Words").
UNTESTABLE = ("create_error", "both_crash")


def classify(baseline: Outcome, flagged: Outcome) -> str:
    """One of EFFECTS for a (baseline, flagged) pair of the same model."""
    # A model that could not be built (or whose eager run failed, or that the device had no memory for) says
    # nothing about any flag, whichever of the two items noticed it.
    if baseline.status in UNTESTED_STATUSES or flagged.status in UNTESTED_STATUSES:
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
            baseline_signature=base.signature, config_signature=o.signature, reason=o.reason,
            correctness=correctness_of(base, o), recompile=recompile_of(base, o),
        ))
    return effects


def correctness_of(baseline: Outcome, flagged: Outcome) -> str | None:
    """The correctness effect of a pair, judged only where both compiled and ran (a crash has no outputs to judge)."""
    if baseline.status != "ok" or flagged.status != "ok":
        return None
    return correctness.correctness_effect(baseline.calls, flagged.calls)


def recompile_of(baseline: Outcome, flagged: Outcome) -> str | None:
    """The recompile effect of a pair, where both compiled and ran."""
    if baseline.status != "ok" or flagged.status != "ok":
        return None
    return correctness.recompile_effect(baseline.calls, flagged.calls)


@dataclass(frozen=True)
class BaselineFinding:
    """The baseline itself (no flag) gave a wrong result: reported once per run, never counted against a flag."""

    model: str
    stratum: str | None
    signature: str          # correctness.wrong_signature of its first wrong call
    scenario: str
    output: str | None
    detail: str | None


def baseline_findings(outcomes: Iterable[Outcome]) -> list[BaselineFinding]:
    """The run's baseline findings, by model: each baseline outcome that ran and whose calls were wrong."""
    found = []
    for o in sorted(outcomes, key=lambda o: o.model):
        call = correctness.baseline_finding(o.calls) if o.config == BASELINE and o.status == "ok" else None
        if call is not None:
            found.append(BaselineFinding(o.model, o.stratum, correctness.wrong_signature(call), call.scenario,
                                         call.output, call.detail))
    return found


def percent(count: int, testable: int) -> float | None:
    """`count` as a percentage of `testable`, rounded once, to one decimal (None when nothing is testable)."""
    return round(100.0 * count / testable, 1) if testable else None


@dataclass(frozen=True)
class EffectRow:
    """One effect's line of the table: how many models, and their share of the testable ones."""

    effect: str
    count: int
    pct: float | None     # None for the untestable effects, and when no model is testable


@dataclass(frozen=True)
class EffectTable:
    """Per flag config: each effect's count and share of testable models (the table every view shows)."""

    config: str
    total: int
    testable: int
    rows: tuple[EffectRow, ...]

    @property
    def by_effect(self) -> dict[str, EffectRow]:
        """The rows by effect name."""
        return {r.effect: r for r in self.rows}

    def count(self, effect: str) -> int:
        """How many models had `effect`."""
        return self.by_effect[effect].count


def effect_table(effects: Iterable[Effect], config: str) -> EffectTable:
    """The effects table of one config over `effects` (effects of other configs are ignored)."""
    counts = Counter(e.effect for e in effects if e.config == config)
    total = sum(counts.values())
    testable = total - sum(counts[u] for u in UNTESTABLE)
    rows = tuple(EffectRow(eff, counts[eff], None if eff in UNTESTABLE else percent(counts[eff], testable))
                 for eff in EFFECTS)
    return EffectTable(config, total, testable, rows)


@dataclass(frozen=True)
class CallsTable:
    """Per flag config: the correctness and recompile effects' counts (the columns shown only where calls were
    judged); shares are of the models judged on that axis."""

    config: str
    correctness: tuple[EffectRow, ...]
    recompiles: tuple[EffectRow, ...]
    judged: int             # models with a correctness effect
    compared: int           # models with a recompile effect

    def count(self, effect: str) -> int:
        """How many models had `effect` (a correctness or a recompile effect)."""
        return next(r.count for r in (*self.correctness, *self.recompiles) if r.effect == effect)


def judged(effects: Iterable[Effect]) -> bool:
    """Whether any effect was judged on calls (only then are the correctness and recompile columns shown)."""
    return any(e.correctness is not None or e.recompile is not None for e in effects)


def calls_table(effects: Iterable[Effect], config: str) -> CallsTable:
    """The correctness and recompile counts of one config over `effects`."""
    mine = [e for e in effects if e.config == config]
    right = Counter(e.correctness for e in mine if e.correctness is not None)
    again = Counter(e.recompile for e in mine if e.recompile is not None)
    n_right, n_again = sum(right.values()), sum(again.values())
    return CallsTable(config, tuple(EffectRow(eff, right[eff], percent(right[eff], n_right))
                                    for eff in CORRECTNESS_EFFECTS),
                      tuple(EffectRow(eff, again[eff], percent(again[eff], n_again)) for eff in RECOMPILE_EFFECTS),
                      n_right, n_again)
