"""Later calls answered from the baseline where they cannot differ (DESIGN "Words": answered), and its audit.

The screen (`why_traced`; `rule_of`: the rule an item it answers is stored with), decided in the worker for each item
of a group whose baseline ran first. The later calls (`second_size`, `hook_added`, `weights_updated`) are traced in
full where
- the config's first call differs from the baseline's: how it ended, its graphs by their code (not only their
  count), or Dynamo's guards (a flag can change what a later call does through the guards alone);
- one of its keys was read in a later window of the baseline and not in its first: a key only the recompile or a
  later call reads, whose effect the first call cannot show;
- one of its keys sets Dynamo's dynamic-shape policy (`LATER_CALL_KEYS`): the first compile reads it too, but only
  the recompile at the second size applies it;
- under a backend that compiles the graphs further (aot_eager, inductor), one of its keys was read at all: the code
  that runs is then more than the graph's code;
- the rule is off for the config (a quarantine: the audit found it wrong on an earlier night).
Otherwise the item makes its first call only and takes the baseline's later calls, stored with reason `answered` and
the rule that answered it (`RULE_GRAPHS`, `RULE_COMPILED`). This is a screen, not a proof: a key read by the first
compile and again by the recompile is answered on the evidence of the first call; the audit is its guard.

The sibling rule (`sibling`), the same screen against a sibling instead of the baseline: an item whose first call is
not the baseline's takes the later calls of an earlier config of its group (a `Traced`) whose first call is its own
(the same graphs by code, the same guards) and that made them in full on its own compiled object, where no key the
two set differently is read only by a later call of that sibling (nor any of its keys only by a later call of the
baseline). Stored with reason `answered` and `RULE_SIBLING`, under the same audit.

The audit: at least one answered item of every config, and the configured share of all (and of the items of the
night's named flags stored as a pool's: compiled together, equal to the baseline), traced in full. Most of it is
made inside the sweep's own groups (`in_group`, fixed before the sweep and seeded by the night): the group that
answers an item of the sample makes its later calls in full there too, on the model, references and first compile it
already holds, and reports where the answered form differs (`disagreement`): its full trace is stored where it
differs. After the sweep, `audit` traces what the groups did not cover (`sample` around what they did: a config none
of whose answered items was in the groups' sample, the share, the least). A disagreement (a call, or the status,
different from the answered form) is stored and shown, turns the rule off for that config for the rest of the night
(every other answered item of it is traced in full and replaces the stored one), and quarantines the config for the
next `answer_quarantine` nights (state.flags).
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

    @property
    def comparable(self) -> bool:
        """It ended ok with its guards known: another first call can be the same as it."""
        return self.status == "ok" and self.guards is not None

    def same_as(self, other: "FirstCall") -> bool:
        """The same compiled code and guards (unknown guards are never the same)."""
        return self.comparable and (self.status, self.codes, self.guards) == (other.status, other.codes, other.guards)


# The rules that answer an item, stored with it (state.flags.record_answered): its first call is the baseline's, and
# no key of it is read only by a later call (a backend that runs the graph as is); or none of its keys is read at all
# (a backend that compiles the graphs further).
RULE_GRAPHS = "first call as the baseline's; no key read only by a later call"
RULE_COMPILED = "first call as the baseline's; no key read (the backend compiles further)"


def rule_of(backend: str) -> str:
    """The rule an item the screen answers is stored with, under `backend`."""
    return RULE_GRAPHS if backend in GRAPH_RUNS_AS_IS else RULE_COMPILED


# Why an item's later calls were made in full (events.Result.traced_why; a bench counts them): the screen's own
# reasons (`why_traced`), then the group's.
FIRST_DIFFERS = "first call not the baseline's"
LATER_KEY = "a key read only in a later window of the baseline"
LATER_CALL_KEY = "a key whose effect only a recompile shows (LATER_CALL_KEYS)"
COMPILES_FURTHER = "a key read, under a backend that compiles further"
QUARANTINED = "quarantined"
AUDITED = "in the answer audit's sample"
ANSWERING_OFF = "answering off"
NO_BASELINE = "no baseline's later calls to answer from"


def why_traced(keys: Iterable[str], first: FirstCall, baseline: FirstCall, windows: Mapping[str, Mapping[str, Any]],
               backend: str) -> str | None:
    """Why the screen (the module docstring's) sends an item's later calls to a full trace (None: it answers them,
    with `rule_of` its backend): its first call, then its keys (`keys_why`)."""
    return FIRST_DIFFERS if not first.same_as(baseline) else keys_why(keys, windows, backend)


# Keys the first compile reads but whose effect only a recompile shows: Dynamo's dynamic-shape policy, which decides
# what the second size compiles (and so the calls after it), never traced in full by the read sets alone. The
# first three were found by the miss count (bench/every_flag.py --checks --no-answer, the seed-0 sample,
# 2026-11-29): on Qwen2AudioForConditionalGeneration each compiles the second size in 4 graphs where the baseline
# makes 5, with a first call the same as the baseline's; the rest set the same policy.
LATER_CALL_KEYS = frozenset(f"torch._dynamo.config.{name}" for name in (
    "automatic_dynamic_shapes", "specialize_int", "replay_side_effects",
    "assume_static_by_default", "dynamic_shapes", "specialize_float", "force_parameter_static_shapes",
    "force_nn_module_property_static_shapes", "allow_unspec_int_on_nn_module", "automatic_dynamic_exclusion_guard",
    "allow_ignore_mark_dynamic"))


def keys_why(keys: Iterable[str], windows: Mapping[str, Mapping[str, Any]], backend: str) -> str | None:
    """The screen's half that its keys decide, before any compile: why they alone send a config's later calls to a
    full trace (None: a config whose first call is the baseline's is answered)."""
    keys = set(keys)
    if keys & LATER_CALL_KEYS:
        return LATER_CALL_KEY
    if backend not in GRAPH_RUNS_AS_IS:
        return COMPILES_FURTHER if keys & set().union(*windows.values()) else None
    later_only = set().union(*(windows.get(w, {}) for w in LATER)) - set(windows.get(FIRST, {}))
    return LATER_KEY if keys & later_only else None


def keys_rule(keys: Iterable[str], windows: Mapping[str, Mapping[str, Any]], backend: str) -> str | None:
    """The rule that answers a config whose first call is the baseline's, as far as its keys decide (`keys_why`);
    None: they send its later calls to a full trace."""
    return None if keys_why(keys, windows, backend) else rule_of(backend)


RULE_SIBLING = "first call as a sibling's traced in full; no key the two set differently read only by a later call"


@dataclass(frozen=True)
class Traced:
    """A config of a group traced in full: its settings, its read sets per call window, its later calls."""

    settings: Mapping[str, Any]
    windows: Mapping[str, Mapping[str, Any]]
    later: tuple[Call, ...]


_UNSET = object()


def sibling(settings: Mapping[str, Any], first: FirstCall, traced: Mapping[FirstCall, Traced],
            baseline: Mapping[str, Mapping[str, Any]], backend: str) -> Traced | None:
    """The sibling whose later calls answer an item's (the module docstring's sibling rule; `traced`: the group's
    configs traced in full by their first call, `baseline`: the baseline's read sets); None: traced in full."""
    found = traced.get(first) if first.comparable else None
    if found is None or keys_rule(settings, baseline, backend) is None:
        return None
    differ = {k for k in {*settings, *found.settings} if settings.get(k, _UNSET) != found.settings.get(k, _UNSET)}
    return found if keys_rule(differ, found.windows, backend) is not None else None


def answered_calls(first: Call, baseline: list[Call]) -> list[Call]:
    """An answered item's calls: its own first call, then the baseline's later calls."""
    return [first] + [c for c in baseline if c.scenario != FIRST]


# ---- the audit ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AnswerAudit:
    """How many answered items are traced again in full each night ([accuracy] answer_audit, answer_audit_min): one
    of every config at least, the share of all, at least `least`."""

    share: float = 0.05
    least: int = 2
    seed: int = 0


def sample(pairs: list[tuple[str, str]], audit: AnswerAudit,
           already: Iterable[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    """A seeded random sample of the answered (model, config) pairs, around those `already` audited (in the groups):
    one of every config that has none of them, then more drawn from the rest up to the share of all, at least `least`
    (all when fewer)."""
    rng = random.Random(audit.seed)
    have = set(already) & set(pairs)
    by_config: dict[str, list[tuple[str, str]]] = {}
    for pair in sorted(pairs):
        by_config.setdefault(pair[1], []).append(pair)
    chosen = have | {rng.choice(its) for _, its in sorted(by_config.items()) if not have & set(its)}
    want = min(len(pairs), max(audit.least, math.ceil(audit.share * len(pairs)), len(chosen)))
    rest = [p for p in sorted(pairs) if p not in chosen]
    return sorted(chosen | set(rng.sample(rest, want - len(chosen))))


def in_group(models: list[str], configs: Iterable[str], audit: AnswerAudit) -> dict[str, frozenset[str]]:
    """The audit's part made in the groups, fixed before the sweep: {model: the configs whose item of it, if answered,
    its group traces in full too}. For each config, the first K models of an order seeded by the night and the config
    (K: the share of the models, at least one), so that every config's answered items are likely audited in place and
    about the share of them, without knowing beforehand which items the screen will answer."""
    k = max(1, math.ceil(audit.share * len(models)))
    chosen: dict[str, set[str]] = {model: set() for model in models}
    for config in sorted(set(configs)):
        order = sorted(set(models))
        random.Random(f"{audit.seed} {config}").shuffle(order)
        for model in order[:k]:
            chosen[model].add(config)
    return {model: frozenset(its) for model, its in chosen.items()}


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
          trace: Callable[[list[tuple[str, str]]], list[Outcome]],
          already: Iterable[AnswerFinding] = ()) -> tuple[list[AnswerFinding], list[Outcome]]:
    """Complete the audit after the sweep: trace in full (with `trace`, answering off) the sample of the answered items
    of `outcomes` (and of the pooled ones of the configs named `together`) that the groups did not audit (`already`:
    their findings; an item that disagreed is stored as its full trace, one that agreed as answered); (the new
    findings, the outcomes that replace answered ones: the sampled ones of a config that disagreed, here or in a
    group, and every other answered item of it, traced in full too: the rule is off for that config for the rest of
    the night)."""
    named, before = set(together), list(already)
    done = {(f.model, f.config) for f in before}
    answered = {(o.model, o.config): o for o in outcomes if (o.model, o.config) not in done
                and (o.reason == ANSWERED or (o.reason == POOLED and o.config in named))}
    chosen = [pair for pair in sample(sorted({*answered, *done}), audit, done) if pair not in done]
    traced = trace(chosen) if chosen else []
    findings = [AnswerFinding(m, c, disagreement(answered[(m, c)], t)) for (m, c), t in zip(chosen, traced)]
    off = {f.config for f in [*before, *findings] if f.disagreement}
    # A sampled item of a config the rule is now off for keeps its full trace, agreeing or not.
    replaced = [t for f, t in zip(findings, traced) if f.config in off]
    agreed = sorted((f.model, f.config) for f in before if not f.disagreement)   # stored answered: traced again
    rest = [pair for pair in [*answered, *agreed] if pair[1] in off and pair not in chosen]
    return findings, replaced + (trace(rest) if rest else [])
