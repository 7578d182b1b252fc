"""What a run says about Dynamo's graph-break ids (pure): what each flag removes and introduces, and leverage.

Computed once from a run's outcomes (plain data in, plain data out); the run view
carries the results to the planner and the report, and templates hold the words.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from harness.core.outcome import Outcome
from harness.core.signature import graph_break_type

BASELINE = "baseline"


@dataclass(frozen=True)
class BreakCount:
    """One graph-break id and the models it concerns."""

    gb_id: str
    gb_type: str
    models: tuple[str, ...]

    @property
    def count(self) -> int:
        """How many models."""
        return len(self.models)


@dataclass(frozen=True)
class FlagBreaks:
    """The graph-break ids a config removes and introduces against the baseline, model by model.

    `hinted_kept` are breaks whose Dynamo hint names one of the config's flags, still present under it.
    """

    config: str
    removes: tuple[BreakCount, ...]
    introduces: tuple[BreakCount, ...]
    hinted_kept: tuple[tuple[BreakCount, str], ...]   # (the break under the config, the flag its hint names)


@dataclass(frozen=True)
class Leverage:
    """Under one config: crash signatures by models they block, graph-break ids by models they affect."""

    config: str
    crashes: tuple[tuple[str, tuple[str, ...]], ...]  # (signature, models), most models first
    breaks: tuple[BreakCount, ...]


def _ids(o: Outcome) -> dict[str, str]:
    """{gb_id: gb_type} of an outcome's recorded graph breaks that have an id."""
    out: dict[str, str] = {}
    for reason, gb_id in zip(o.break_reasons, o.break_ids):
        if gb_id:
            out.setdefault(gb_id, graph_break_type(reason) or "")
    return out


def _hints(o: Outcome) -> dict[str, str]:
    """{gb_id: its hint lines joined} of an outcome's graph breaks."""
    out: dict[str, str] = {}
    for reason, gb_id in zip(o.break_reasons, o.break_ids):
        if gb_id:
            hints = [line.strip()[len("Hint:"):] for line in reason.splitlines() if line.strip().startswith("Hint:")]
            out[gb_id] = out.get(gb_id, "") + " ".join(hints)
    return out


def _ranked(models: Mapping[str, set[str]], types: Mapping[str, str]) -> tuple[BreakCount, ...]:
    rows = [BreakCount(gb_id, types.get(gb_id, ""), tuple(sorted(ms))) for gb_id, ms in models.items()]
    return tuple(sorted(rows, key=lambda r: (-r.count, r.gb_id)))


def _flag_names(settings: Mapping[str, Any]) -> list[str]:
    """`capture_scalar_outputs` for `torch._dynamo.config.capture_scalar_outputs`."""
    return [key.rsplit(".", 1)[-1] for key in settings]


def flag_breaks(outcomes: Iterable[Outcome], configs: Mapping[str, Mapping[str, Any]]) -> dict[str, FlagBreaks]:
    """{config: FlagBreaks} over the models that compiled (status ok) under both the baseline and the config."""
    by_item = {(o.model, o.config): o for o in outcomes}
    result: dict[str, FlagBreaks] = {}
    for config in sorted({c for _, c in by_item if c != BASELINE}):
        removed: dict[str, set[str]] = defaultdict(set)
        added: dict[str, set[str]] = defaultdict(set)
        kept: dict[tuple[str, str], set[str]] = defaultdict(set)
        types: dict[str, str] = {}
        flags = _flag_names(configs.get(config, {}))
        for (model, c), o in by_item.items():
            base = by_item.get((model, BASELINE))
            if c != config or base is None or o.status != "ok" or base.status != "ok":
                continue
            before, after, hints = _ids(base), _ids(o), _hints(o)
            types.update(before)
            types.update(after)
            for gb_id in before.keys() - after.keys():
                removed[gb_id].add(model)
            for gb_id in after.keys() - before.keys():
                added[gb_id].add(model)
            for gb_id in after:
                for flag in flags:
                    if flag in hints.get(gb_id, ""):
                        kept[(gb_id, flag)].add(model)
        hinted = tuple(sorted(((BreakCount(gb_id, types.get(gb_id, ""), tuple(sorted(ms))), flag)
                               for (gb_id, flag), ms in kept.items()), key=lambda r: (-r[0].count, r[0].gb_id)))
        result[config] = FlagBreaks(config, _ranked(removed, types), _ranked(added, types), hinted)
    return result


def leverage(outcomes: Iterable[Outcome]) -> dict[str, Leverage]:
    """{config: Leverage}: each crash signature by the models it blocks, each graph-break id by the models it affects."""
    crashes: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    breaks: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    types: dict[str, str] = {}
    configs: set[str] = set()
    for o in outcomes:
        if not o.built:
            continue
        configs.add(o.config)
        if o.crashed:
            crashes[o.config][o.crash_signature].add(o.model)
        for gb_id, gb_type in _ids(o).items():
            breaks[o.config][gb_id].add(o.model)
            types.setdefault(gb_id, gb_type)
    out: dict[str, Leverage] = {}
    for config in sorted(configs):
        sigs = sorted(((s, tuple(sorted(ms))) for s, ms in crashes[config].items()), key=lambda r: (-len(r[1]), r[0]))
        out[config] = Leverage(config, tuple(sigs), _ranked(breaks[config], types))
    return out
