"""Choose models: all candidates, by name or glob, or a stratified random sample."""
from __future__ import annotations

import difflib
import fnmatch
import random
from collections import defaultdict

from harness.zoo import registry
from harness.zoo.enumerate import Candidate, is_candidate_fast, kind_of, scan


class UnknownModel(ValueError):
    """A model name or pattern matched nothing; the message lists close matches."""


def candidates() -> list[Candidate]:
    """Every candidate model class in the installed transformers (plus registered extras), sorted by name."""
    from harness.zoo.build import plan, BuildError

    out = []
    for name in scan()[0]:
        try:
            stratum = plan(name).stratum
        except BuildError:
            stratum = _stratum_fallback(name)
        out.append(Candidate(name, stratum, kind_of(name)))
    return out


def _stratum_fallback(name: str) -> str:
    """A stratum when the default config cannot even be made: decide on the class name."""
    return "vl_multimodal" if "ForConditionalGeneration" in name else "decoder_llm"


def _extras() -> list[Candidate]:
    return [Candidate(n, s, "extra") for n, (s, _) in registry.EXTRA.items()]


def resolve(patterns: list[str]) -> list[Candidate]:
    """Candidates matching exact names or shell globs, in order, without duplicates; UnknownModel if one matches nothing."""
    extras = _extras()
    names = {e.model for e in extras}
    if all(p in names or (not any(ch in p for ch in "*?[") and is_candidate_fast(p)) for p in patterns):
        # exact names only: no need to import every modeling module (that scan takes ~10 s)
        from harness.zoo.build import BuildError, plan

        out = []
        for p in dict.fromkeys(patterns):
            if p in names:
                out.append(next(e for e in extras if e.model == p))
                continue
            try:
                stratum = plan(p).stratum
            except BuildError:
                stratum = _stratum_fallback(p)
            out.append(Candidate(p, stratum, kind_of(p)))
        return out
    pool = extras + candidates()
    by_name = {c.model: c for c in pool}
    out: dict[str, Candidate] = {}
    for pattern in patterns:
        if pattern in by_name:
            out.setdefault(pattern, by_name[pattern])
            continue
        hits = [c for c in pool if fnmatch.fnmatchcase(c.model, pattern)]
        if not hits:
            close = difflib.get_close_matches(pattern, list(by_name), n=5, cutoff=0.6)
            hint = f"; close matches: {', '.join(close)}" if close else ""
            raise UnknownModel(f"unknown model {pattern!r}{hint}")
        for c in hits:
            out.setdefault(c.model, c)
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
