"""Which models a sweep or nightly runs: the population (`all` or `graph-breaking`), then a stratified sample.

`graph-breaking` takes the models whose baseline had more than one graph in the
newest stored run on the same torch and base settings, or, when there is none,
in a baseline pass run first (stored as a run of kind `baseline`). The flag run
then reuses those baseline outcomes instead of compiling the baseline again.
"""
from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.core.outcome import Outcome
from harness.core.population import ALL, GRAPH_BREAKING, POPULATIONS, graph_breaking
from state import history


@dataclass(frozen=True)
class Pick:
    """A model to draw from, when its stratum is not known up front (it is then read from its baseline outcome)."""

    model: str
    stratum: str | None = None


@dataclass
class Drawn:
    """The models to sweep, the baseline outcomes already had for them, and how they were drawn (None: all)."""

    models: list[str]
    prior: list[Outcome] = field(default_factory=list)
    meta: dict[str, Any] | None = None


def draw(conn: sqlite3.Connection, cands: list[Any], *, population: str, sample: int | None, seed: int,
         base_settings: dict[str, Any], torch_version: str | None,
         baseline_pass: Callable[[list[str]], int]) -> Drawn:
    """Choose from zoo candidates (`.model`, `.stratum`); `baseline_pass(models) -> run id` runs when nothing is stored."""
    from harness import zoo

    if population not in POPULATIONS:
        raise ValueError(f"population must be one of {', '.join(POPULATIONS)}, got {population!r}")
    prior: list[Outcome] = []
    source = "the corpus"
    pool = list(cands)
    if population == GRAPH_BREAKING:
        names = [c.model for c in cands]
        found = history.latest_baseline(conn, names, base_settings=base_settings, torch_version=torch_version)
        if found is None:
            run_id = baseline_pass(names)
            found = run_id, history.group_items(conn, run_id, names, ["baseline"])
            source = f"baseline pass (run {run_id})"
        else:
            source = f"run {found[0]}"
        breaking = set(graph_breaking(found[1]))
        pool = [c for c in cands if c.model in breaking]
        prior = found[1]
    chosen = zoo.sample(pool, sample, seed) if sample else pool
    models = [c.model for c in chosen]
    keep = set(models)
    if population == ALL and not sample:
        return Drawn(models=models)
    stratum_of = {o.model: o.stratum for o in prior}

    def name(c: Any) -> str:
        return c.stratum or stratum_of.get(c.model) or "unknown"

    drawn, of = Counter(name(c) for c in chosen), Counter(name(c) for c in pool)
    meta = {"population": population, "source": source, "seed": seed if sample else None,
            "candidates": len(cands), "size": len(pool), "sample": len(models),
            "strata": {s: [drawn.get(s, 0), of[s]] for s in sorted(of)}}
    return Drawn(models=models, prior=[o for o in prior if o.model in keep], meta=meta)
