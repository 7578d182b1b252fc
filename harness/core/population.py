"""Which models a sweep draws from (pure): every model, or only those that graph-break under the baseline.

The manual study this bot automates sampled from the models that graph-break
under the baseline, because a flag like these can only matter where there is a
break. Counting a model as breaking needs its baseline to have compiled.
"""
from __future__ import annotations

from typing import Iterable

from harness.core.outcome import Outcome

ALL = "all"
GRAPH_BREAKING = "graph-breaking"
POPULATIONS = (ALL, GRAPH_BREAKING)


def graph_breaking(baseline: Iterable[Outcome]) -> list[str]:
    """Sorted names of the models whose baseline compiled into more than one graph."""
    return sorted({o.model for o in baseline if o.config == "baseline" and o.status == "ok" and (o.graphs or 0) > 1})
