"""Bisect over nightlies: the first nightly where one (model, config) item's outcome changed.

Pure search over an injected `probe(date) -> Probe` (which, for real, installs
that nightly through the provider and runs the one item): tests drive it with a
fake series, and a nightly that cannot be installed is skipped, like `git bisect skip`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import date as date_cls
from datetime import timedelta
from typing import Any, Callable

from harness.core.outcome import Outcome


class BisectError(ValueError):
    """The bisect cannot run (no nightlies in range, no change); the message is for the user."""


@dataclass
class Probe:
    """One nightly's result for the item."""

    date: str
    version: str | None
    git: str | None
    key: str                     # what is compared: ok:<graphs> | <status>:<signature>
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass
class BisectResult:
    """The last nightly like `good` and the first like `bad`, with every probe made."""

    good: Probe
    bad: Probe
    steps: list[Probe] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    candidates: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"good": self.good.to_dict(), "bad": self.bad.to_dict(), "steps": [p.to_dict() for p in self.steps],
                "skipped": self.skipped, "candidates": self.candidates}


class SkipNightly(Exception):
    """Raised by a probe when a nightly cannot be tested (install failed): bisect steps around it."""


def outcome_key(outcome: Outcome) -> str:
    """What counts as "the same outcome": graph count when it compiles, status and signature when not."""
    if outcome.status == "ok":
        return f"ok: {outcome.graphs} graphs"
    if outcome.signature:
        return f"{outcome.status}: {outcome.signature}"
    return outcome.status


def is_date(label: str) -> bool:
    """A nightly's label (YYYY-MM-DD), as opposed to a version."""
    return len(label) == 10 and label[4] == "-" and label[7] == "-"


def _position(builds: list[str], wanted: str, last: bool) -> int | None:
    """Where `wanted` (a date, or a version: `2.14.1` also names `2.14.1+cpu`) sits among the builds."""
    from packaging.version import InvalidVersion, Version

    def same(label: str) -> bool:
        if label == wanted or is_date(label) or is_date(wanted):
            return label == wanted
        try:
            return Version(label).public == Version(wanted).public and not Version(wanted).local
        except InvalidVersion:
            return False

    hits = [i for i, label in enumerate(builds) if same(label)]
    return (hits[-1] if last else hits[0]) if hits else None


def window(dates: list[str], good: str | None, bad: str | None, default_days: int = 30) -> list[str]:
    """The builds between good and bad, inclusive, oldest first.

    `dates` are build labels oldest first, as the provider lists them: a nightly's date,
    or the version of any other build (a release, an rc). good and bad name builds either
    way; a date between two nightlies bounds the range. Defaults: the last `default_days`
    of nightlies up to the newest build.
    """
    builds = list(dict.fromkeys(dates))
    if all(is_date(b) for b in builds):
        builds.sort()
    if not builds:
        raise BisectError("the index holds no nightly for this Python and platform")
    bad = bad or builds[-1]
    if good is None:
        good = (date_cls.fromisoformat(bad) - timedelta(days=default_days)).isoformat() if is_date(bad) else builds[0]
    lo, hi = _bound(builds, good, last=False), _bound(builds, bad, last=True)
    inside = builds[lo:hi + 1] if lo is not None and hi is not None else []
    if len(inside) < 2:
        raise BisectError(f"fewer than two nightlies between {good} and {bad} "
                          f"({len(inside)} found; the index has {builds[0]} .. {builds[-1]})")
    return inside


def _bound(builds: list[str], wanted: str, last: bool) -> int | None:
    """The index of a named build; for a date no build has, the nearest nightly inside the range."""
    pos = _position(builds, wanted, last)
    if pos is not None or not is_date(wanted):
        return pos
    dated = [i for i, b in enumerate(builds) if is_date(b) and (b <= wanted if last else b >= wanted)]
    return (dated[-1] if last else dated[0]) if dated else None


def bisect(dates: list[str], probe: Callable[[str], Probe]) -> BisectResult:
    """Binary search for the first date whose probe key differs from the first date's."""
    steps: list[Probe] = []
    skipped: list[str] = []
    cands = list(dates)

    def run(d: str) -> Probe | None:
        try:
            p = probe(d)
        except SkipNightly:
            skipped.append(d)
            return None
        steps.append(p)
        return p

    # The ends must be testable: move inwards past nightlies that cannot be installed.
    good = None
    while cands and good is None:
        good = run(cands[0])
        if good is None:
            cands.pop(0)
    bad = None
    while len(cands) > 1 and bad is None:
        bad = run(cands[-1])
        if bad is None:
            cands.pop()
    if good is None or bad is None:
        raise BisectError("fewer than two nightlies in the range could be installed")
    if good.key == bad.key:
        raise BisectError(f"no change between {good.date} and {bad.date}: both give {good.key}")
    lo, hi = 0, len(cands) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = run(cands[mid])
        if p is None:
            cands.pop(mid)
            hi -= 1
            continue
        if p.key == good.key:
            lo, good = mid, p
        else:
            hi, bad = mid, p
    return BisectResult(good=good, bad=bad, steps=steps, skipped=skipped, candidates=len(dates))
