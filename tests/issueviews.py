"""Run views made by hand for the pure planner tests (bot.issues.plan): what bot.view.run_view.load reads, typed."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Iterable

from bot.issues.timeline import Timeline
from bot.view.run_view import RunView
from harness.core.diff import DiffResult, Side, Transition
from harness.core.effects import effects_for
from harness.core.graph_breaks import flag_breaks, leverage
from harness.core.outcome import Effect, Outcome
from state.links import Link
from state.ranges import Range
from state.runs import Run
from state.verdicts import RunVerdict
from tests.fakegithub import scenario as sc
from harness.core.options import RunOptions
from harness.core.run_environment import RunEnvironment


def view(outcomes: Iterable[Outcome], *, effects: Iterable[Effect] | None = None, run_id: int = 7,
         date: str = "2026-11-20", configs: dict[str, dict[str, Any]] | None = None,
         environment: dict[str, Any] | None = None, options: dict[str, Any] | None = None,
         models: Iterable[str] | None = None, links: Iterable[Link] = (), transitions: Iterable[Transition] = (),
         ranges: Iterable[Range] = (), verdicts: Iterable[RunVerdict] = (), breaks: bool = False) -> RunView:
    """One nightly of `date` with these outcomes (effects classified from them unless given)."""
    outs = sorted(outcomes, key=lambda o: (o.model, o.config))
    effs = sorted(effects_for(outs) if effects is None else effects, key=lambda e: (e.config, e.model))
    configs = configs if configs is not None else {c: {} for c in sorted({o.config for o in outs})}
    names = sorted(models if models is not None else {o.model for o in outs} | {e.model for e in effs})
    run = Run(id=run_id, kind="nightly", status="finished", started_at=f"{date}T03:00:00+00:00", finished_at=None,
              models=names, configs=configs, base_settings={}, options=RunOptions.from_dict(options or {}), environment=RunEnvironment.from_dict(environment or {}),
              nightly=date)
    transitions = list(transitions)
    diff = DiffResult(transitions=transitions, configs=sorted(configs)) if transitions else None
    return RunView(run=run, group=(run_id,), models=frozenset(names), outcomes=tuple(outs), effects=tuple(effs),
                   previous=None, diff=diff, signatures=(), links=MappingProxyType({l.key: l for l in links}),
                   breaks=MappingProxyType(flag_breaks(outs, configs) if breaks else {}),
                   leverage=MappingProxyType(leverage(outs) if breaks else {}),
                   ranges=MappingProxyType({r.key: r for r in ranges}),
                   verdicts=MappingProxyType({(v.config, v.signature): v for v in verdicts}))


def transition(model: str, config: str, kind: str, before: str | None, after: str | None, *,
               effect: str | None = None, flaky_rate: float | None = None) -> Transition:
    """A transition of one item whose signature went from `before` to `after` (None: it compiled)."""
    def side(sig: str | None, eff: str | None) -> Side:
        return Side(status="error" if sig else "ok", effect=eff, graphs=None if sig else 3, signature=sig)
    return Transition(model=model, config=config, transition=kind, before=side(before, None),
                      after=side(after, effect), flaky_rate=flaky_rate)


NONE = Timeline()   # no nightlies seen before


def inputs(results: dict, *, links: dict[str, Link] | None = None, transitions: list | None = None,
           ranges: list[Range] | None = None, verdicts: list[RunVerdict] | None = None) -> RunView:
    """The run view of the scenario's `results` (model -> config -> graphs or signature), as the planner reads it."""
    outs = [sc.outcome(m, c, spec.get(c, spec.get("baseline", 3)), "decoder_llm")
            for m, spec in sorted(results.items()) for c in sc.CONFIGS]
    return view(outs, configs=sc.CONFIGS, environment=sc.ENV, options={"backend": "count"}, models=sorted(results),
                   links=(links or {}).values(), transitions=transitions or [], ranges=ranges or [],
                   verdicts=verdicts or [])
