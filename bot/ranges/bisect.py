"""Bisection over builds: the last build that behaves like the good end and the first that does not.

One binary search serves both callers: the `bisect` comment command (one item; its ends are
probed) and the nightly's regression-range search (`bot.ranges.finder`: a target's models; its
ends are known from the stored runs). The search itself is pure: an injected `probe(label) -> Probe`
installs the build and runs it for real, and tests drive it with a fake series. A build that
cannot be installed (the probe raises `SkipNightly`) or where nothing could be tested (a probe
without a key) is stepped around, like `git bisect skip`; a probe that raises `OutOfInstalls`
stops the search, whose range found so far is then `bounded`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import date as date_cls
from datetime import timedelta
from typing import Any, Callable

from harness.core.outcome import Outcome


class BisectError(ValueError):
    """The bisect cannot run (no nightlies in range, no change); the message is for the user."""


class SkipNightly(Exception):
    """Raised by a probe when a build cannot be tested (install failed): the search steps around it."""


class OutOfInstalls(Exception):
    """Raised by a probe when the install budget is spent: the search stops where it is."""


@dataclass
class Probe:
    """One build's result: what the search compares (`key`; None when nothing could be tested there)."""

    date: str                    # the build's label: a nightly's date, or the version of another build
    version: str | None
    git: str | None
    key: str | None              # the command: ok: <graphs> | <status>: <signature>; the range search: old | new
    detail: str = ""             # the command: the error message of the outcome
    outcomes: dict[str, str] = field(default_factory=dict)   # the range search: outcome key by model

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass
class Bisection:
    """The last build like `good` and the first not like it, every probe made, and why it stopped early if it did."""

    good: Probe
    bad: Probe
    status: str = "found"        # found | bounded (a probe ran out of installs)
    steps: list[Probe] = field(default_factory=list)    # every probe made, in order
    skipped: list[str] = field(default_factory=list)    # the builds stepped around
    candidates: int = 0          # the builds the search was given
    remaining: int = 0           # builds still between good and bad (bounded only)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"good": self.good.to_dict(), "bad": self.bad.to_dict(), "status": self.status,
                "steps": [p.to_dict() for p in self.steps], "skipped": self.skipped, "candidates": self.candidates,
                "remaining": self.remaining}


def search(candidates: list[str], probe: Callable[[str], Probe], *, good: Probe | None = None,
           bad: Probe | None = None) -> Bisection:
    """Binary search over `candidates` (build labels, oldest first) for the first build whose key differs from good's.

    good, bad: ends already known (the range search: from the stored runs), outside `candidates`.
    An end not given is probed among the candidates, moving inwards past builds that cannot be tested
    (the bisect command). BisectError when fewer than two ends can be tested or both behave alike.
    """
    steps: list[Probe] = []
    skipped: list[str] = []

    def run(label: str) -> Probe | None:
        """The probe of `label`, or None when it is stepped around."""
        try:
            p = probe(label)
        except SkipNightly:
            skipped.append(label)
            return None
        steps.append(p)
        if p.key is None:
            skipped.append(label)
            return None
        return p

    between = list(candidates)
    while good is None and between:
        good = run(between.pop(0))
    while bad is None and between:
        bad = run(between.pop())
    if good is None or bad is None:
        raise BisectError("fewer than two nightlies in the range could be installed")
    if good.key == bad.key:
        raise BisectError(f"no change between {good.date} and {bad.date}: both give {good.key}")
    found = Bisection(good=good, bad=bad, steps=steps, skipped=skipped, candidates=len(candidates))
    lo, hi = -1, len(between)            # -1: the good end; len: the bad end
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            p = run(between[mid])
        except OutOfInstalls:
            found.status, found.remaining = "bounded", hi - lo - 1
            break
        if p is None:
            between.pop(mid)
            hi -= 1
        elif p.key == found.good.key:
            lo, found.good = mid, p
        else:
            hi, found.bad = mid, p
    return found


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
