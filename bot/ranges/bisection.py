"""Regression-range search (pure): the last build like the previous run and the first like this one.

Both ends are known from the stored runs; only the nightlies strictly between
them are probed, through an injected `probe(label) -> (Build, outcomes)`. The
probe may refuse a build (`SkipNightly`: it cannot be installed, bisect steps
around it) or stop the search (`OutOfInstalls`: the night's install budget is
spent; the range found so far is kept as "bounded").

A target groups the models of one (config, signature, kind). A build is "new"
for it when any of its models tested there is in the new state (crashes, for a
new crash; compiles, for a fix) and "old" when all of them are in the old one;
models that could not be built there do not count, and a build where none could
is skipped for that target. Failing is what `harness.core.diff` calls failing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from bot.ranges.bisect import SkipNightly, outcome_key
from harness.core.outcome import BUILD_STATUSES, Outcome
from state.ranges import Build

Outcomes = Mapping[tuple[str, str], Outcome]


class OutOfInstalls(Exception):
    """The night's install budget is spent: the search stops where it is."""


@dataclass(frozen=True)
class Target:
    """The models of one (config, signature) that made one transition (new_crash or fixed)."""

    config: str
    signature: str
    kind: str                    # new_crash | fixed
    models: tuple[str, ...]

    @property
    def items(self) -> list[tuple[str, str]]:
        """The (model, config) items a probe of a build must run for this target."""
        return [(m, self.config) for m in self.models]


@dataclass
class Found:
    """One target's range: the ends, every probe it used, and why it stopped early if it did."""

    target: Target
    status: str                  # found | bounded
    good: Build
    bad: Build
    probes: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    remaining: int = 0           # nightlies still between good and bad (bounded only)


def state(target: Target, outcomes: Outcomes) -> str | None:
    """`old`, `new`, or None when none of the target's models could be tested on the build."""
    tested = [o for o in (outcomes.get(item) for item in target.items) if o is not None
              and o.status not in BUILD_STATUSES]
    if not tested:
        return None
    old_failed = target.kind == "fixed"
    return "new" if any((o.status != "ok") != old_failed for o in tested) else "old"


def _probe_row(build: Build, target: Target, outcomes: Outcomes, verdict: str | None) -> dict[str, Any]:
    keys = {m: outcome_key(outcomes[(m, target.config)]) for m in target.models if (m, target.config) in outcomes}
    return {"date": build.date, "version": build.version, "git": build.git, "state": verdict or "untested",
            "outcomes": keys}


def search(target: Target, candidates: list[str], good: Build, bad: Build,
           probe: Callable[[str], tuple[Build, Outcomes]]) -> Found:
    """Binary search over `candidates` (nightly labels strictly between good and bad, oldest first)."""
    cands = list(candidates)
    found = Found(target=target, status="found", good=good, bad=bad)
    lo, hi = -1, len(cands)              # -1: the good end; len: the bad end (both known, never probed)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            build, outcomes = probe(cands[mid])
        except SkipNightly:
            verdict, build = None, None
        except OutOfInstalls:
            found.status, found.remaining = "bounded", hi - lo - 1
            break
        else:
            verdict = state(target, outcomes)
            found.probes.append(_probe_row(build, target, outcomes, verdict))
        if verdict is None:
            found.skipped.append(cands.pop(mid))
            hi -= 1
        elif verdict == "old":
            lo, found.good = mid, build
        else:
            hi, found.bad = mid, build
    return found
