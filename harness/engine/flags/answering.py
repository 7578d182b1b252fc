"""Later calls answered from the baseline where they cannot differ (DESIGN "Words": answered), and its audit.

The rule (`answerable`), decided in the worker for each item of a group whose baseline ran first:
- the config's first call compiled, and its graphs are the baseline's first call's graphs by their code (not only
  their count), and Dynamo's guards are the baseline's (a flag can change what a later call does through the guards
  alone: what makes it recompile, or not);
- none of the config's keys is in the baseline's read sets of the later call windows (`second_size`, `hook_added`,
  `weights_updated`): a key the baseline never read there cannot change what it did there, given the same compiled
  code and guards at the window's start;
- under a backend that compiles the graphs further (aot_eager, inductor), none of its keys is in the first window's
  read set either: the code that runs is then more than the graph's code;
- the rule is on for the config (the audit did not turn it off for one of its keys this night).
Such an item makes its first call only and takes the baseline's later calls, stored with reason `answered`.

The audit (`audit`), after the sweep: a seeded sample of the answered items (and of the items of the night's named
flags stored as a pool's: compiled together, equal to the baseline) is traced in full; a disagreement (a call, or the
status, different from the stored one) is stored and shown, and turns the rule off for the config for the rest of
the night: every other answered item of that config in the run is traced in full and replaces the stored one.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from harness.core.calls import FIRST, SCENARIOS, Call
from harness.core.outcome import ANSWERED, POOLED, Outcome
from state.flags import AnswerFinding

LATER = tuple(s for s in SCENARIOS if s != FIRST)
# Backends under which the compiled code that runs is the graph's own code (the counter runs gm.forward).
GRAPH_RUNS_AS_IS = ("count", "eager")


@dataclass(frozen=True)
class FirstCall:
    """What the rule compares of a first call: how it ended, its graphs by code, Dynamo's guards (None: unknown)."""

    status: str
    codes: tuple[str, ...]
    guards: str | None

    def same_as(self, other: "FirstCall") -> bool:
        """The same compiled code and guards (unknown guards are never the same)."""
        return self.status == other.status == "ok" and self.guards is not None and \
            (self.codes, self.guards) == (other.codes, other.guards)


def answerable(keys: Iterable[str], first: FirstCall, baseline: FirstCall, windows: Mapping[str, Mapping[str, Any]],
               backend: str) -> bool:
    """Whether an item's later calls are the baseline's (the module docstring's rule)."""
    if not first.same_as(baseline):
        return False
    read = set().union(*(windows.get(w, {}) for w in LATER))
    if backend not in GRAPH_RUNS_AS_IS:
        read |= set(windows.get(FIRST, {}))
    return not any(key in read for key in keys)


def answered_calls(first: Call, baseline: list[Call]) -> list[Call]:
    """An answered item's calls: its own first call, then the baseline's later calls."""
    return [first] + [c for c in baseline if c.scenario != FIRST]


# ---- the audit ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AnswerAudit:
    """How many answered items are traced again in full each night ([accuracy] answer_audit, answer_audit_min)."""

    share: float = 0.05
    least: int = 2
    seed: int = 0


def sample(pairs: list[tuple[str, str]], audit: AnswerAudit) -> list[tuple[str, str]]:
    """A seeded random sample of the answered (model, config) pairs: the share, at least `least` (all when fewer)."""
    want = min(len(pairs), max(audit.least, math.ceil(audit.share * len(pairs))))
    return sorted(random.Random(audit.seed).sample(sorted(pairs), want))


CALL_FIELDS = ("scenario", "graphs", "recompiles", "recompile_reasons", "accuracy", "output", "error_type", "signature")


def disagreement(answered: Outcome, traced: Outcome) -> str | None:
    """Where a full trace differs from the answered item (None: it agrees): the first call that differs and how."""
    if traced.status != answered.status:
        return f"status {answered.status} answered, {traced.status} traced"
    left, right = answered.calls, traced.calls
    if [c.scenario for c in left] != [c.scenario for c in right]:
        return f"calls {[c.scenario for c in left]} answered, {[c.scenario for c in right]} traced"
    for a, t in zip(left, right):
        for name in CALL_FIELDS:
            if getattr(a, name) != getattr(t, name):
                return f"{a.scenario}: {name} {getattr(a, name)!r} answered, {getattr(t, name)!r} traced"
    return None


def audit(outcomes: list[Outcome], audit: AnswerAudit, together: Iterable[str],
          trace: Callable[[list[tuple[str, str]]], list[Outcome]]) -> tuple[list[AnswerFinding], list[Outcome]]:
    """Trace a sample of the answered items of `outcomes` (and of the pooled ones of the configs named `together`) in
    full (with `trace`, answering off); (the findings, the outcomes that replace answered ones: the sampled ones of a
    config that disagreed, and every other answered item of it, traced in full too: the rule is off for that config
    for the rest of the night)."""
    named = set(together)
    answered = {(o.model, o.config): o for o in outcomes
                if o.reason == ANSWERED or (o.reason == POOLED and o.config in named)}
    chosen = sample(list(answered), audit)
    traced = trace(chosen) if chosen else []
    findings = [AnswerFinding(m, c, disagreement(answered[(m, c)], t)) for (m, c), t in zip(chosen, traced)]
    off = {f.config for f in findings if f.disagreement}
    # A sampled item of a config the rule is now off for keeps its full trace, agreeing or not.
    replaced = [t for f, t in zip(findings, traced) if f.config in off]
    rest = [pair for pair in answered if pair[1] in off and pair not in chosen]
    return findings, replaced + (trace(rest) if rest else [])
