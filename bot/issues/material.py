"""What of an issue is material, and the body hash stored with its link.

An issue is rewritten only when its material content changed: the hash of that content is stored with the
issue's link (`state.links.Link.body_sha`), and equal hashes mean nothing to write, so a quiet nightly writes
nothing. Volatile parts (environment, last seen, the config-wide tables) are not material: they are refreshed
whenever the issue is rewritten for a material reason.

`BodyHash` is the stored hash, typed; `BodyHash.text` and `BodyHash.parse` are the one place its stored form
(`results[+range].labels`) is written and read. The other functions here say which part of a reproducer
verdict, a component, a regression range, a config's graph breaks and its leverage is material.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable

from harness.core.graph_breaks import FlagBreaks, Leverage
from state.ranges import Range
from state.verdicts import Component, Verdict


def digest(data: Any) -> str:
    """Hash of what matters in an issue (plain data): equal digests mean nothing to write."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:20]


@dataclass(frozen=True)
class BodyHash:
    """The hash stored with an issue's link: what its body showed, and the labels it was given.

    `results`: the digest of the body's material content; `range`: the digest of the regression range it
    shows ("" when none: a range alone rewrites the body, and the planner tells it apart from changed
    results, which alone earn a "what changed" comment); `labels`: the digest of its labels. A part that is
    "" is unknown: a link rebuilt from GitHub knows only its labels, one whose hash was never stored nothing.
    """

    results: str = ""
    range: str = ""
    labels: str = ""

    @classmethod
    def of(cls, results: Any, labels: Iterable[str], regression: Range | None = None) -> "BodyHash":
        """The hash of an issue's material content, the regression range its body shows, and its labels."""
        return cls(digest(results), range_digest(regression), labels_digest(labels))

    @classmethod
    def parse(cls, text: str | None) -> "BodyHash":
        """Read a stored hash (None: never stored, every part unknown)."""
        body, _, labels = (text or "").partition(".")
        results, _, regression = body.partition("+")
        return cls(results, regression, labels)

    def text(self) -> str:
        """The stored form: `results[+range].labels`."""
        return self.results + (f"+{self.range}" if self.range else "") + "." + self.labels

    def same_body(self, other: "BodyHash") -> bool:
        """Whether the two bodies showed the same material content and the same range."""
        return (self.results, self.range) == (other.results, other.range)

    def without_body(self) -> "BodyHash":
        """The same labels, the body unknown (it is refreshed whatever it showed)."""
        return BodyHash(labels=self.labels)


def labels_digest(labels: Iterable[str]) -> str:
    """The digest of a set of labels (their order does not matter)."""
    return digest(sorted(labels))


def range_digest(r: Range | None) -> str:
    """The digest of what of a regression range the body shows ("" when none)."""
    if r is None:
        return ""
    return digest([r.status, r.good.date, r.good.git, r.bad.date, r.bad.git, r.reason])


def repro_material(repro: Verdict | None) -> list[Any]:
    """What of a reproducer verdict makes a tracking issue worth rewriting: status, model and, when it was shrunk,
    the parameters and steps kept (none without a shrink: older bodies keep their hash); "skipped" when not run."""
    if repro is None:
        return ["skipped", None]
    stats = repro.shrink.read() if repro.shrink and repro.shrink.stats else None
    shrunk = [stats.after.parameters if stats.after else None, stats.kept] if stats else []
    m = repro.maintainer   # its script and dynamic ablation (none before it was tried: older bodies keep their hash)
    handwritten = [[m.status, [(r.dynamic, r.result) for r in m.runs]]] if m else []
    return [repro.status, repro.model] + shrunk + handwritten


def component_material(record: Component | None) -> Any:
    """What of a crash's component (bot/verify/isolate.py) makes a tracking issue worth rewriting."""
    if record is None:
        return None
    return [record.component, record.backend, [(s.backend, s.result) for s in record.stages]]


def break_material(b: FlagBreaks | None) -> Any:
    """What of a config's removed/introduced graph breaks makes a summary worth rewriting."""
    if b is None:
        return None
    return [[(r.gb_id, r.count) for r in rows] for rows in (b.removes, b.introduces)] + [
        [(r.gb_id, r.count, flag) for r, flag in b.hinted_kept]]


def leverage_material(lev: Leverage | None) -> Any:
    """The leverage ranking as plain, comparable data."""
    if lev is None:
        return None
    return [[(s, len(ms)) for s, ms in lev.crashes], [(r.gb_id, r.count) for r in lev.breaks]]
