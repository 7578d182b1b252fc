"""What changed between two runs: one transition per (model, config). Pure: plain data in, plain data out.

Transitions (DESIGN.md "Words"): `new_crash`, `fixed`, `still_crashing`,
`signature_changed`, `graphs_decreased`, `graphs_increased`, `unchanged`,
`new_model`, `gone`, `not_comparable`. An item that did not build (create/input/
eager error) counts as failing: a model that stops building is news too. An item that ran out of memory on the
device was not measured: `not_comparable`, never a crash or a fix.

Beside them, per item, the two axes judged on its calls (harness.core.correctness), in `DiffResult.axes`: the
correctness effect night to night (`new_wrong_result`, `wrong_result_fixed`, `still_wrong_result`) and the later
calls' recompiles (`recompiles_increased`, `recompiles_decreased`). An item is on an axis only where both nights
judged it there, so outcomes without calls leave `axes` empty and the transitions above exactly as they were.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from harness.core.correctness import WRONG_RESULT, first_wrong, later_recompiles, wrong_signature
from harness.core.outcome import OUT_OF_MEMORY, SKIPPED, Effect, Outcome

TRANSITIONS = (
    "new_crash",
    "fixed",
    "still_crashing",
    "signature_changed",
    "graphs_decreased",
    "graphs_increased",
    "unchanged",
    "new_model",
    "gone",
    "not_comparable",
)
# Transitions a person should hear about (the rest is steady state).
NEWS = ("new_crash", "fixed", "signature_changed", "graphs_decreased", "graphs_increased", "new_model", "gone",
        "not_comparable")
# The two axes' transitions (harness.core.correctness), and those a person should hear about.
AXIS_TRANSITIONS = ("new_wrong_result", "wrong_result_fixed", "still_wrong_result", "recompiles_increased",
                    "recompiles_decreased")
AXIS_NEWS = ("new_wrong_result", "wrong_result_fixed", "recompiles_increased", "recompiles_decreased")


@dataclass(frozen=True)
class Side:
    """One run's side of an item's transition: status, effect, graphs, crash signature (None unless it failed) and
    build fingerprint; all None when the item is absent from that run."""

    status: str | None = None
    effect: str | None = None
    graphs: int | None = None
    signature: str | None = None
    fingerprint: str | None = None


@dataclass(frozen=True)
class AxisSide:
    """One night's side of an axis transition (AXIS_TRANSITIONS): the correctness effect, the first wrong call's
    signature, and the recompiles after the first call."""

    correctness: str | None
    signature: str | None
    recompiles: int | None


@dataclass
class Transition:
    """How one (model, config) changed; before/after carry status, effect, graphs, signature (an item's `Side`), or
    correctness and recompiles (an axis transition's `AxisSide`)."""

    model: str
    config: str
    transition: str
    before: Side | AxisSide
    after: Side | AxisSide
    flaky_rate: float | None = None   # set when flake confirmation saw the change not repeat
    reason: str | None = None         # why a not_comparable item was not compared ("transformers 5.23.0 → 5.24.0")
    in_note: bool = False             # told by the night's one line (DiffResult.relock), not listed on its own

    @property
    def flaky(self) -> bool:
        return self.flaky_rate is not None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class Relock:
    """A night whose builds changed under the same transformers (the zoo re-locked, or its build code changed): the
    recipe fingerprints of the two runs and how many models were not compared, told in one line
    (templates/relock_note.j2) instead of one not_comparable line per item."""

    before: str
    after: str
    models: int
    of: int


@dataclass
class DiffResult:
    """All transitions, plus what could not be compared and why."""

    transitions: list[Transition]
    configs: list[str]                                     # configs compared
    configs_only_before: list[str] = field(default_factory=list)
    configs_only_after: list[str] = field(default_factory=list)
    configs_changed: dict[str, dict[str, Any]] = field(default_factory=dict)  # same name, other settings
    notes: list[str] = field(default_factory=list)         # why something was not compared
    axes: list[Transition] = field(default_factory=list)   # correctness and recompiles night to night (AXIS_TRANSITIONS)
    relock: Relock | None = None                           # the zoo's builds changed this night (told in one line)

    @property
    def comparable(self) -> bool:
        """True when both runs had the same configs with the same settings."""
        return not (self.configs_only_before or self.configs_only_after or self.configs_changed)

    def believed(self) -> list[Transition]:
        """Transitions that are not flaky."""
        return [t for t in self.transitions if not t.flaky]

    def flaky(self) -> list[Transition]:
        """Transitions flake confirmation did not reproduce every time."""
        return [t for t in self.transitions if t.flaky]

    def counts(self) -> dict[str, int]:
        """{transition: count} over believed transitions, every transition named."""
        c = Counter(t.transition for t in self.believed())
        return {name: c.get(name, 0) for name in TRANSITIONS}

    def counts_by_config(self) -> dict[str, dict[str, int]]:
        """{config: {transition: count}} over believed transitions."""
        out: dict[str, dict[str, int]] = {}
        for t in self.believed():
            out.setdefault(t.config, {name: 0 for name in TRANSITIONS})[t.transition] += 1
        return out

    def by_config(self, config: str) -> list[Transition]:
        """The transitions of one config (what the issue planner consumes)."""
        return [t for t in self.transitions if t.config == config]

    def news(self) -> list[Transition]:
        """Believed transitions worth telling a person about."""
        return [t for t in self.believed() if t.transition in NEWS and not t.in_note]

    def axis_counts(self) -> dict[str, int]:
        """{axis transition: count}, every one named."""
        c = Counter(t.transition for t in self.axes)
        return {name: c.get(name, 0) for name in AXIS_TRANSITIONS}

    def axis_news(self, config: str | None = None) -> list[Transition]:
        """The axis transitions worth telling a person about (of one config, when given)."""
        return [t for t in self.axes if t.transition in AXIS_NEWS and config in (None, t.config)]

    def changed_models(self) -> list[str]:
        """Models with at least one believed change."""
        return sorted({t.model for t in self.news()})

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "transitions": [t.to_dict() for t in self.transitions],
            "configs": self.configs,
            "configs_only_before": self.configs_only_before,
            "configs_only_after": self.configs_only_after,
            "configs_changed": self.configs_changed,
            "comparable": self.comparable,
            "counts": self.counts(),
            "notes": self.notes,
            "axes": [t.to_dict() for t in self.axes],
            "axis_counts": self.axis_counts(),
            "relock": asdict(self.relock) if self.relock else None,
        }


OUT_OF_MEMORY_REASON = "out of memory on the device: not measured"
SKIPPED_REASON = "skipped: the lock records the model cannot run in the run's mode"


def _failed(o: Outcome) -> bool:
    return o.status != "ok"


def _side(o: Outcome | None, effect: Effect | None) -> Side:
    if o is None:
        return Side()
    return Side(status=o.status, effect=effect.effect if effect else None, graphs=o.graphs,
                signature=o.crash_signature if _failed(o) else None, fingerprint=o.fingerprint)


def classify(before: Outcome | None, after: Outcome | None) -> str:
    """The transition from one outcome of an item to the next (None: absent from that run)."""
    if before is None and after is None:
        raise ValueError("an item must exist in at least one run")
    if before is None:
        return "new_model"
    if after is None:
        return "gone"
    if before.fingerprint and after.fingerprint and before.fingerprint != after.fingerprint:
        return "not_comparable"
    if {OUT_OF_MEMORY, SKIPPED} & {before.status, after.status}:   # one side not measured
        return "not_comparable"
    if not _failed(before) and _failed(after):
        return "new_crash"
    if _failed(before) and not _failed(after):
        return "fixed"
    if _failed(before):
        same = before.crash_signature == after.crash_signature and before.status == after.status
        return "still_crashing" if same else "signature_changed"
    if before.graphs is not None and after.graphs is not None:
        if after.graphs < before.graphs:
            return "graphs_decreased"
        if after.graphs > before.graphs:
            return "graphs_increased"
    return "unchanged"


def _index(effects: Iterable[Effect] | None) -> dict[tuple[str, str], Effect]:
    return {(e.model, e.config): e for e in (effects or ())}


def diff(before: list[Outcome], after: list[Outcome], *, before_effects: list[Effect] | None = None,
         after_effects: list[Effect] | None = None, before_configs: Mapping[str, Any] | None = None,
         after_configs: Mapping[str, Any] | None = None,
         transformers: tuple[str | None, str | None] = (None, None),
         recipes: tuple[str | None, str | None] = (None, None)) -> DiffResult:
    """Compare two runs' outcomes item by item.

    Configs present in only one run, or (when `*_configs` settings are given)
    with the same name but other settings, are left out and named in the result.
    `transformers`: the two runs' transformers versions; across a bump, the models whose build changed (lock entry
    or modeling source: their fingerprint) are not comparable for that night with the bump as the reason.
    `recipes`: the two runs' recipe fingerprints (the zoo's lock and build code); where they differ under the same
    transformers, the models whose build changed are told in one line (DiffResult.relock), not listed one by one.
    """
    b_items = {(o.model, o.config): o for o in before}
    a_items = {(o.model, o.config): o for o in after}
    b_configs = set(before_configs) if before_configs is not None else {c for _, c in b_items}
    a_configs = set(after_configs) if after_configs is not None else {c for _, c in a_items}
    b_configs |= {c for _, c in b_items}
    a_configs |= {c for _, c in a_items}
    result = DiffResult(transitions=[], configs=sorted(b_configs & a_configs),
                        configs_only_before=sorted(b_configs - a_configs),
                        configs_only_after=sorted(a_configs - b_configs))
    if before_configs is not None and after_configs is not None:
        for name in result.configs:
            if name in before_configs and name in after_configs and before_configs[name] != after_configs[name]:
                result.configs_changed[name] = {"before": before_configs[name], "after": after_configs[name]}
        result.configs = [c for c in result.configs if c not in result.configs_changed]
    for name in result.configs_only_before:
        result.notes.append(f"config {name} is only in the earlier run")
    for name in result.configs_only_after:
        result.notes.append(f"config {name} is only in the later run")
    for name in result.configs_changed:
        result.notes.append(f"config {name} has other settings in the two runs")
    compared = set(result.configs)
    b_eff, a_eff = _index(before_effects), _index(after_effects)
    for key in sorted((set(b_items) | set(a_items))):
        if key[1] not in compared:
            continue
        b, a = b_items.get(key), a_items.get(key)
        t = Transition(model=key[0], config=key[1], transition=classify(b, a),
                       before=_side(b, b_eff.get(key)), after=_side(a, a_eff.get(key)))
        if a is not None and a.flaky_rate is not None and t.transition in ("new_crash", "fixed"):
            t.flaky_rate = a.flaky_rate
        result.transitions.append(t)
        if t.transition != "not_comparable" and b is not None and a is not None:
            result.axes += axis_transitions(b, a, b_eff.get(key), a_eff.get(key))
    _not_comparable_because(result, *transformers)
    _relocked(result, transformers, recipes)
    return result


def _axis_side(o: Outcome, effect: Effect | None) -> AxisSide:
    wrong = first_wrong(o.calls)
    return AxisSide(correctness=effect.correctness if effect else None,
                    signature=wrong_signature(wrong) if wrong else None, recompiles=later_recompiles(o.calls))


def correctness_transition(before: str | None, after: str | None) -> str | None:
    """The correctness axis night to night, from the two nights' correctness effects (None: either not judged, or
    nothing a wrong result is about)."""
    if before is None or after is None:
        return None
    if after == WRONG_RESULT:
        return "still_wrong_result" if before == WRONG_RESULT else "new_wrong_result"
    return "wrong_result_fixed" if before == WRONG_RESULT else None


def recompile_transition(before: int | None, after: int | None) -> str | None:
    """The later calls' recompiles night to night (None: either night made no later call, or the same count)."""
    if before is None or after is None or before == after:
        return None
    return "recompiles_increased" if after > before else "recompiles_decreased"


def axis_transitions(before: Outcome, after: Outcome, before_effect: Effect | None,
                     after_effect: Effect | None) -> list[Transition]:
    """One item's axis transitions (none for outcomes without calls)."""
    b_side, a_side = _axis_side(before, before_effect), _axis_side(after, after_effect)
    found = (correctness_transition(b_side.correctness, a_side.correctness),
             recompile_transition(b_side.recompiles, a_side.recompiles))
    return [Transition(model=after.model, config=after.config, transition=name, before=b_side, after=a_side)
            for name in found if name is not None]


def _relocked(result: DiffResult, transformers: tuple[str | None, str | None],
              recipes: tuple[str | None, str | None]) -> None:
    """The night after a re-lock (same transformers, another recipe fingerprint): the items whose build changed are
    told in one line, not one not_comparable line each (an item out of memory keeps its own line)."""
    before, after = recipes
    if transformers[0] != transformers[1] or not before or not after or before == after:
        return
    changed = [t for t in result.transitions if t.transition == "not_comparable" and t.before.fingerprint
               and t.after.fingerprint and t.before.fingerprint != t.after.fingerprint]
    for t in changed:
        t.in_note = True
    if changed:
        result.relock = Relock(before, after, len({t.model for t in changed}), len({t.model for t in result.transitions}))


def _not_comparable_because(result: DiffResult, before: str | None, after: str | None) -> None:
    """Say why items were not compared: a transformers bump (the reason on each, and one note), else their build."""
    skipped = [t for t in result.transitions if t.transition == "not_comparable"]
    bump = bool(before and after and before != after)
    reason = f"transformers {before} → {after}" if bump else "its build changed (lock entry or build code)"
    for t in skipped:
        fps = (t.before.fingerprint, t.after.fingerprint)      # an item's sides (Side)
        unmeasured = next((s for s in (OUT_OF_MEMORY, SKIPPED) if s in (t.before.status, t.after.status)), None)
        own = OUT_OF_MEMORY_REASON if unmeasured == OUT_OF_MEMORY else SKIPPED_REASON
        t.reason = own if unmeasured and not (all(fps) and fps[0] != fps[1]) else reason
    if bump:
        models = {t.model for t in result.transitions}
        result.notes.append(f"{reason}: {len({t.model for t in skipped})} of {len(models)} models not comparable "
                            "this night (their lock entry or modeling source changed); the others were compared")
