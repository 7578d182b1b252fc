"""One model's group in a worker: built once, then traced under each config of the request (harness.engine.worker).

A Group holds what every config of one (model, build) shares: the build, eager's references (scenarios.References),
the baseline's item, its first call and its read sets per call window. `run` is the loop, one rule per branch:
- prune: a prunable config none of whose keys the baseline read, in any window, is the baseline's result (`not_read`);
- pool: the other prunable configs, and the configs named to go together (the nightly's named flags), are compiled
  together after the loop (`trace_pooled`), split where they differ. With the checks on, each pool is first split by
  what the screen's keys say (answering.keys_rule): the configs whose later calls could be answered compile together
  apart from those that must be traced in full, so a key read only by a later call no longer costs the others their
  answer; a pool of several whose first call is not the baseline's makes no later calls (it is split whatever they
  are);
- trace: the config is compiled and called once; its later calls are answered from the baseline where the screen lets
  them (harness.engine.flags.answering: the rule that answered is reported with the item), or else from a sibling
  traced in full before it whose first call is its own (`traced`, by first call: answering.sibling), else made on
  the same compiled object. A quarantined config (`unanswered`) is never answered, nor is a pool holding one of its
  keys; a pool is never answered by a sibling (it stands for its configs only as the baseline's). An answered item
  whose config is in the request's `audit` (the night's answer audit, answering.in_group) makes its later calls in
  full too, here where the model, eager's references and its first compile already are, and is reported with where
  its answered form differed (`disagreement`): it disagreed, its outcome is its full trace; it agreed, its answered
  form, as it would have been without the audit.
Last, the pruning audit's part drawn here (`prune_audit`, pruning.in_group): the first of the items reported pruned or
pooled, in its order, are traced (the baseline is here, so the screen may answer their later calls) and reported
again, replacing the pruned outcome.
The baseline's item, when it is the request's first, records the read sets; its result carries them.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable

import torch

from harness.core.calls import FIRST, Call
from harness.core.effects import BASELINE
from harness.core.outcome import ANSWERED, NOT_READ, POOLED, REASONS, Outcome
from harness.engine import backend, events, measure, scenarios
from harness.engine.backend import Compiled
from harness.engine.events import RunRequest
from harness.engine.flags import reads
from harness.engine.accuracy import Verdict
from harness.engine.flags import answering
from harness.engine.flags.answering import (RULE_SIBLING, FirstCall, Traced, answered_calls, disagreement, keys_rule,
                                            sibling)
from harness.engine.step_oracle import ModeReference
from harness.zoo import Built
from harness.zoo.build import SEED

Send = Callable[[events.Event], None]


class Group:
    """One (model, build) in a worker: its references, its baseline, and `trace(index, settings)` per config."""

    def __init__(self, req: RunRequest, built: Built, common: dict[str, Any], send: Send,
                 refs: scenarios.References | str | None):
        self.req, self.built, self.common, self.send, self.refs = req, built, common, send, refs
        self.baseline: dict[str, Any] | None = None           # the baseline's result fields
        self.baseline_first: FirstCall | None = None
        self.windows: dict[str, dict[str, Any]] = {}           # the baseline's read sets per call window
        self.rules: dict[int, str] = {}                        # index -> the rule that answered its later calls
        self.traced: dict[FirstCall, Traced] = {}              # the configs traced in full, by first call (siblings)
        # The keys of the quarantined configs: a compile that sets one is never answered.
        self.unanswered = {key for _, config, settings in req.items if config in req.unanswered for key in settings}
        self.audited = {index for index, config, _ in req.items if config in set(req.audit)}   # the audit's sample
        self.audits: dict[int, list[Call]] = {}                # index -> its answered form, while traced in full
        self.pruned: list[int] = []                            # the items reported pruned or pooled (prune_audit's)
        self.why: dict[int, str] = {}                          # index -> why its later calls were made in full

    # ---- the loop ------------------------------------------------------------------------------------------

    def run(self) -> None:
        """Each item of the request, in order: prune, pool, or trace (then the pools)."""
        prunable, together, pooled, named = set(self.req.prune), set(self.req.together), [], []
        for n, (index, config, settings) in enumerate(self.req.items):
            if self.baseline is not None and config in together:
                named.append((index, config, settings))
                continue
            if self.baseline is not None and config in prunable:
                if not self._read(settings):
                    self._report(index, config, {**self.baseline, **_INFERRED, "reason": NOT_READ})
                else:
                    pooled.append((index, config, settings))
                continue
            record = config == BASELINE and n == 0
            fields, rule = self.trace(index, settings, record=record)
            if rule is not None:
                self.rules[index] = rule
            self._report(index, config, fields, self.windows if record else None)
        pools = self._by_keys(pooled) if self.req.pool else [[item] for item in pooled]
        for pool in [p for p in (*pools, *self._by_keys(named)) if p]:
            trace_pooled(pool, self.baseline, self._compile, self._report)
        self._audit_pruned()

    def _audit_pruned(self) -> None:
        """The pruning audit's part drawn here: the first `prune_audit_n` items reported pruned or pooled, in the
        audit's order, traced and reported again (events.Result.prune_audit)."""
        rank = {config: n for n, config in enumerate(self.req.prune_audit)}
        items = {index: (config, settings) for index, config, settings in self.req.items}
        for index in sorted(self.pruned, key=lambda i: rank[items[i][0]])[:self.req.prune_audit_n]:
            config, settings = items[index]
            fields, rule = self.trace(index, settings)
            if rule is not None:
                self.rules[index] = rule
            self._report(index, config, fields, prune_audit=True)

    def _read(self, settings: dict) -> bool:
        """Whether the baseline read any of these keys, in any window."""
        union = set().union(*self.windows.values())
        return any(key in union for key in settings)

    def _by_keys(self, pool: list[tuple[int, str, dict]]) -> list[list[tuple[int, str, dict]]]:
        """A pool split by the screen's keys (`_keys_rule`): the configs it could answer, then those it traces in
        full; one pool where nothing is screened."""
        if not self._screens():
            return [pool]
        full = [item for item in pool if self._keys_rule(item[2]) is None]
        return [[item for item in pool if item not in full], full]

    def _compile(self, indices: list[int], settings: dict) -> dict[str, Any]:
        """One compile standing for the configs at `indices` (several: a pool, its events under index -1). Answering
        off (`screen`), a pool the screen would have answered marks each of its configs with the rule it computed
        from all their keys (had it been answered, its later calls were the baseline's and it stood for them all),
        unless a larger pool already did."""
        pooled = len(indices) > 1
        fields, rule = self.trace(-1 if pooled else indices[0], settings, pooled=pooled)
        self.why.pop(-1, None)   # a pool's compile is no item
        if rule is not None and (self.req.screen or not pooled):
            for index in indices:
                self.rules.setdefault(index, rule)
        return fields

    def _report(self, index: int, config: str, fields: dict[str, Any],
                windows: dict[str, dict[str, Any]] | None = None, prune_audit: bool = False) -> None:
        reads_all = reads.union(windows) if windows is not None else None
        outcome = Outcome(model=self.req.model, config=config, **fields)
        if outcome.reason in REASONS and config in self.req.prune_audit:
            self.pruned.append(index)
        answered = self.audits.pop(index, None)
        found = None if answered is None else disagreement(dataclasses.replace(outcome, calls=answered), outcome)
        if answered is not None and found is None:   # it agreed: kept as answered, as it is without the audit
            outcome = dataclasses.replace(outcome, calls=answered, reason=ANSWERED)
        self.send(events.Result(index, outcome, config_reads=reads_all, window_reads=windows,
                                answered_by=self.rules.pop(index, None), audited=answered is not None,
                                disagreement=found, prune_audit=prune_audit, traced_why=self.why.pop(index, None)))

    # ---- one config ----------------------------------------------------------------------------------------

    def trace(self, index: int, settings: dict, *, record: bool = False,
              pooled: bool = False) -> tuple[dict[str, Any], str | None]:
        """Compile under `settings` (index -1: a pool) and make the calls: (the fields, the rule that answered its
        later calls, or would have); `record`: the baseline's item, which records the read sets per window and
        becomes what later items are answered from; `pooled`: a pool, whose later calls are not made where its
        first call already differs from the baseline's."""
        self.send(events.Start(index))
        if self.req.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        measure.reset_peak()
        recorder = scenarios.Recorder() if self.judging else None
        with reads.windows(FIRST) if record or self._shares() else contextlib.nullcontext() as windows:
            torch.manual_seed(SEED)   # as every eager reference run: a model that draws numbers draws the same
            done = backend.compile_and_run(self.built.module, scenarios.clone(self.built.inputs),
                                   settings={**self.req.base_settings, **settings}, backend=self.req.backend,
                                   mode=self.req.sweep_mode, device=self.req.device)
            if self.req.backend == "inductor":
                self.send(measure.cache_counts(index))
            ended = measure.ended(done.error, self.req.device)
            first = FirstCall(ended["status"], tuple(done.codes), done.guards)
            calls, rule = self._calls(index, done, recorder, settings, first, windows, pooled,
                                      lambda one: pooled and not self._first_as_baseline(done, ended, one))
        answered = rule is not None and self.req.answer and index not in self.audits
        fields = {**self.common, **done.counts, "peak_mem_mb": measure.peak_mb(self.req.device),
                  "build_s": self.common["build_s"] if record else 0.0, **ended,
                  "calls": calls, **({"reason": ANSWERED} if answered else {})}
        if record:
            self.baseline, self.baseline_first, self.windows = fields, first, windows.sets
        return fields, rule

    def _first_as_baseline(self, done: Compiled, ended: dict[str, Any], one: Call) -> bool:
        """Whether a compile's graph fields and first call are the baseline's (`same_as_baseline` on what the first
        call alone shows): where not, a pool is split whatever its later calls are."""
        fields = {**done.counts, **ended, "calls": [one]}
        return same_as_baseline(fields, {**self.baseline, "calls": self.baseline["calls"][:1]})

    @property
    def judging(self) -> bool:
        """The checks are on and eager's references were made."""
        return isinstance(self.refs, scenarios.References)

    def _calls(self, index: int, done: Compiled, recorder: scenarios.Recorder | None, settings: dict,
               first: FirstCall, windows: reads.Windows | None, pooled: bool,
               split: Callable[[Call], bool]) -> tuple[list[Call], str | None]:
        """The item's calls, and the rule that answered its later ones from the baseline or a sibling (None: made in
        full); `split(first call)`: a pool that will be split, whose later calls are useless (not made)."""
        if self.refs is None:
            return [], None
        if isinstance(self.refs, ModeReference) and done.error is None:
            return [self._mode_call(done)], None
        if done.error is not None or not self.judging:
            return self._first_only(done), None
        try:
            one = scenarios.first_call(done.output, done.stats.graphs, self.refs, recorder)
            done.output = None   # not held past its verdict
            rule, why = self._screen(settings, first)
            answer = rule is not None and self.req.answer
            found = None if pooled or answer else self._sibling(settings, first)
            if answer or found is not None:
                return self._answered(index, done, recorder, windows, one, rule if found is None else found)
            if split(one):   # answered, it would not have stood for its configs either: no rule
                return [one], None
            later = self._later(done, recorder, windows)
            self.why[index] = why
            if self._shares() and first.comparable:
                self.traced.setdefault(first, Traced(settings, windows.sets, tuple(later)))
            return [one] + later, rule if self.req.screen else None
        except Exception as exc:   # the oracle's own failure costs the calls' verdicts, never the item
            self.audits.pop(index, None)   # nor is it an audit's finding
            return [Call(FIRST, done.stats.graphs, detail=f"the oracle failed: {type(exc).__name__}: "
                                                           f"{str(exc)[:200]}")], None

    def _answered(self, index: int, done: Compiled, recorder: scenarios.Recorder | None,
                  windows: reads.Windows | None, one: Call, by: str | Traced) -> tuple[list[Call], str]:
        """An answered item's calls and rule: its first call, then the baseline's later calls (`by` the screen's rule)
        or its sibling's (`by` that Traced); an item of the audit's sample makes them in full too, its answered form
        kept for `_report` to compare with them."""
        calls = answered_calls(one, self.baseline["calls"]) if isinstance(by, str) else [one, *by.later]
        rule = by if isinstance(by, str) else RULE_SIBLING
        if index not in self.audited:
            return calls, rule
        self.audits[index], self.why[index] = calls, answering.AUDITED
        return [one] + self._later(done, recorder, windows), rule

    def _mode_call(self, done: Compiled) -> Call:
        """The first call of a train or half-precision mode, judged by its own oracle (harness.engine.step_oracle):
        the only call such an item makes."""
        try:
            verdict = self.refs.judge(done.output, done.grads)
        except Exception as exc:   # the oracle's own failure costs the call's verdict, never the item
            verdict = Verdict("not_judged", detail=f"the oracle failed: {type(exc).__name__}: {str(exc)[:200]}")
        done.output = done.grads = None   # not held past the verdict
        return Call(FIRST, done.stats.graphs, 0, [], verdict.accuracy, verdict.detail, verdict.output,
                    list(verdict.metadata))

    def _screen(self, settings: dict, first: FirstCall) -> tuple[str | None, str]:
        """The screen (harness.engine.flags.answering.why_traced), where `_screens` and the config is not quarantined:
        (the rule that answers the item, None where none does; why its later calls are made in full, if they are:
        events.Result.traced_why, the screen's reason or the group's: no screen, a quarantine, answering off)."""
        if not self._screens():
            return None, answering.NO_BASELINE if self.req.answer else answering.ANSWERING_OFF
        if self.unanswered & set(settings):
            return None, answering.QUARANTINED
        why = answering.why_traced(settings.keys(), first, self.baseline_first, self.windows, self.req.backend)
        return (None, why) if why else (answering.rule_of(self.req.backend), answering.ANSWERING_OFF)

    def _sibling(self, settings: dict, first: FirstCall) -> Traced | None:
        """The sibling that answers the item's later calls (answering.sibling), where `_shares` and the config is not
        quarantined."""
        if not self._shares() or self.unanswered & set(settings):
            return None
        return sibling(settings, first, self.traced, self.windows, self.req.backend)

    def _keys_rule(self, settings: dict) -> str | None:
        """The screen's half that the keys decide (answering.keys_rule), a quarantined config's keys never passing."""
        if self.unanswered & set(settings):
            return None
        return keys_rule(settings.keys(), self.windows, self.req.backend)

    def _screens(self) -> bool:
        """The screen is asked (answering on, or the request asks what it would answer: `screen`), the checks are on
        and there is a baseline with later calls to answer from."""
        asked = self.req.answer or self.req.screen
        return asked and self.judging and self.baseline_first is not None and len(self.baseline["calls"]) > 1

    def _shares(self) -> bool:
        """Later calls are shared between siblings: answering on (a screen asked with answering off is the
        baseline's alone) and `_screens`."""
        return self.req.answer and self._screens()

    def _later(self, done: Compiled, recorder: scenarios.Recorder, windows: reads.Windows | None) -> list[Call]:
        """Every call after the first, on the same compiled object, each in its own read window."""
        out = []
        with done.again():
            for step in self.refs.steps:
                if windows is not None:
                    windows.enter(step.scenario)
                out.append(scenarios.later_call(step, done.compiled, lambda: done.stats.graphs, self.built.module,
                                                self.refs, recorder, measure.error_fields))
        return out

    def _first_only(self, done: Compiled) -> list[Call]:
        """The calls of an item whose later calls were not made: its first call, not judged (it raised, or there is
        no eager reference)."""
        found = measure.error_fields(done.error) if done.error is not None else {"error_type": None,
                                                                                       "signature": None}
        why = "the first call raised" if done.error is not None or not isinstance(self.refs, str) else self.refs
        return [Call(FIRST, done.counts["graphs"], 0, [], "not_judged", why, error_type=found["error_type"],
                     signature=found["signature"])]


# What an item stored as another's result did not spend itself.
_INFERRED = {"build_s": 0.0, "compile_s": 0.0}

# What a pooled compile must match in the baseline's result to stand for each of its configs: the graph effects'
# fields, and its calls (correctness and recompiles) as far as the effects read them.
SAME_AS_BASELINE = ("status", "signature", "graphs", "ops_per_graph", "graph_breaks", "break_reasons", "recompiles")
CALL_FIELDS = ("scenario", "graphs", "recompiles", "recompile_reasons", "accuracy", "output", "error_type", "signature")


def same_as_baseline(fields: dict[str, Any], baseline: dict[str, Any]) -> bool:
    """A pooled compile stands for its configs: the same graph fields and the same calls as the baseline's."""
    def calls(found: dict[str, Any]) -> list[tuple]:
        return [tuple(getattr(c, k) for k in CALL_FIELDS) for c in found.get("calls", [])]
    return all(fields.get(k) == baseline.get(k) for k in SAME_AS_BASELINE) and calls(fields) == calls(baseline)


def trace_pooled(pool: list[tuple[int, str, dict]], baseline: dict[str, Any],
                 trace: Callable[[list[int], dict], dict[str, Any]], report: Callable[..., None]) -> None:
    """Compile the pool's configs together (`trace(indices, settings)`); as the baseline: each is reported so
    (pooled); else halves, down to single configs, which are their own trace. Configs that set one key two ways are
    never pooled."""
    if len(pool) == 1:
        index, config, settings = pool[0]
        report(index, config, trace([index], settings))
        return
    together: dict[str, Any] = {}
    clash = False
    for _, _, settings in pool:
        clash = clash or any(k in together and together[k] != v for k, v in settings.items())
        together.update(settings)
    fields = None if clash else trace([index for index, _, _ in pool], together)
    if fields is not None and same_as_baseline(fields, baseline):
        for index, config, _ in pool:
            report(index, config, {**baseline, **_INFERRED, "reason": POOLED})
        return
    half = len(pool) // 2
    trace_pooled(pool[:half], baseline, trace, report)
    trace_pooled(pool[half:], baseline, trace, report)
