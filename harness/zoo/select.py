"""Choose models from the lock: all candidates, by name or glob, or a stratified random sample (no torch import)."""
from __future__ import annotations

import difflib
import fnmatch
import random
from collections import defaultdict
from dataclasses import dataclass

from harness.zoo import lock, registry
from harness.zoo.errors import UnknownModel

__all__ = ["Candidate", "UnknownModel", "candidates", "resolve", "sample"]


@dataclass(frozen=True)
class Candidate:
    """One model class the zoo can build: its name, stratum and kind."""

    model: str
    stratum: str
    kind: str  # base | causal_lm | conditional_generation


def candidates() -> list[Candidate]:
    """Every locked model class of the installed transformers (failed ones included), sorted by name."""
    current = lock.current()
    out = []
    for name in current.names():
        raw = current.entries[name]
        if not isinstance(raw, dict):
            raise lock.CorruptEntry(name, "*", "not a JSON object")
        out.append(Candidate(name, str(raw.get("stratum")), str(raw.get("kind"))))
    return out


def _extras() -> list[Candidate]:
    return [Candidate(n, s, "extra") for n, (s, _) in registry.EXTRA.items()]


def _unknown(pattern: str, names: list[str]) -> UnknownModel:
    close = difflib.get_close_matches(pattern, names, n=5, cutoff=0.6)
    hint = f"; close matches: {', '.join(close)}" if close else ""
    glob = any(ch in pattern for ch in "*?[")
    lock_hint = "" if glob else f" (a class new to transformers needs `flagsweep zoo lock --models {pattern}`)"
    return UnknownModel(f"unknown model {pattern!r}: not in the zoo lock{lock_hint}{hint}")


def resolve(patterns: list[str]) -> list[Candidate]:
    """Candidates matching exact names or shell globs, in order, without duplicates; UnknownModel if one matches nothing.

    Each resolved entry is checked, so a hand-edited entry is refused here, by model and field.
    """
    extras = _extras()
    pool = extras + ([] if all(p in registry.EXTRA for p in patterns) else candidates())
    by_name = {c.model: c for c in pool}
    out: dict[str, Candidate] = {}
    for pattern in patterns:
        if pattern in by_name:
            out.setdefault(pattern, by_name[pattern])
            continue
        hits = [c for c in pool if fnmatch.fnmatchcase(c.model, pattern)]
        if not hits:
            raise _unknown(pattern, list(by_name))
        for c in hits:
            out.setdefault(c.model, c)
    current = None
    for c in out.values():
        if c.model not in registry.EXTRA:
            current = current or lock.current()
            current.entry(c.model)  # CorruptEntry names the model and field
    return list(out.values())


def sample(cands: list[Candidate], n: int, seed: int) -> list[Candidate]:
    """A stratified random sample of n candidates, deterministic for a seed (proportional, at least one per stratum)."""
    if n >= len(cands):
        return list(cands)
    groups: dict[str, list[Candidate]] = defaultdict(list)
    for c in sorted(cands, key=lambda c: c.model):
        groups[c.stratum].append(c)
    rng = random.Random(seed)
    strata = sorted(groups)
    total = len(cands)
    quota = {s: max(1, n * len(groups[s]) // total) for s in strata}
    # hand out what rounding left, largest remainders first, then trim overshoot from the largest strata
    order = sorted(strata, key=lambda s: (-(n * len(groups[s]) % total), s))
    i = 0
    while sum(quota.values()) < n:
        s = order[i % len(order)]
        if quota[s] < len(groups[s]):
            quota[s] += 1
        i += 1
    while sum(quota.values()) > n:
        s = max(strata, key=lambda s: (quota[s], s))
        quota[s] -= 1
    picked = []
    for s in strata:
        picked.extend(rng.sample(groups[s], min(quota[s], len(groups[s]))))
    return sorted(picked, key=lambda c: c.model)
