"""Verified fixes (pure): when a tracking issue may close, from what its models did on the nightlies since.

A fix is positive evidence, never an absence: each model that last crashed with
the signature must compile under the flag, on `needed` consecutive nightlies.
A model that was not tested that night (not swept: gone from the corpus, its
shard missing; or it could not be built, given inputs or run eagerly) is "not
tested", never "fixed", and a night with any such model breaks the streak.
A wrong result (harness.core.correctness) is fixed the same way, by evidence: each model that computed it must
be judged right under the flag (every call compared with eager: exact or close); a model whose calls were not
all judged that night (the checks off, a later call that raised) is not tested.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from harness.core.correctness import first_wrong, is_wrong_signature, verdict as judged, wrong_signature
from harness.core.outcome import UNTESTED_STATUSES, Outcome

COMPILES = "compiles"
STILL_CRASHING = "still crashing"
OTHER_CRASH = "crashes with another signature"
RIGHT = "judged right"                        # a wrong result's model, compared with eager and found right
STILL_WRONG = "still wrong"
OTHER_WRONG = "wrong at another output"
NOT_JUDGED = "not judged"                     # its calls were not all compared with eager that night
PASSING = (COMPILES, RIGHT)
FAILING = (STILL_CRASHING, OTHER_CRASH, STILL_WRONG, OTHER_WRONG)
NOT_SWEPT = "not swept"          # not in the night's run: gone from the corpus, shard missing
FLAKY = "flaky"
MAX_NIGHTS = 10                  # the most nightlies a verification looks back over (and the setting's ceiling)


@dataclass(frozen=True)
class Night:
    """What one nightly says about the crashing models: {model: (baseline, flagged)} for those it swept."""

    date: str
    items: Mapping[str, tuple[Outcome | None, Outcome | None]]


@dataclass(frozen=True)
class Verdict:
    """The close decision for one tracking issue."""

    close: bool
    streak: int                          # consecutive verified nightlies, newest first
    fixed_in: str | None                 # the oldest nightly of that streak
    last_failing: str | None
    untested: dict[str, str] = field(default_factory=dict)   # model -> why, in the newest nightly
    failing: dict[str, str] = field(default_factory=dict)    # model -> still crashing / another signature


def check(signature: str, baseline: Outcome | None, flagged: Outcome | None) -> str:
    """One model on one night: `compiles`, a failure, or why it was not tested (a build status, `not swept`)."""
    if flagged is None:
        return NOT_SWEPT
    for o in (baseline, flagged):
        if o is not None and o.status in UNTESTED_STATUSES:
            return o.status
    if flagged.flaky_rate is not None:
        return FLAKY
    if is_wrong_signature(signature) and flagged.status == "ok":
        return _judged(signature, flagged)
    if flagged.status == "ok":
        return COMPILES
    return STILL_CRASHING if flagged.crash_signature == signature else OTHER_CRASH


def _judged(signature: str, flagged: Outcome) -> str:
    """A wrong result's model that compiled: right, still wrong (the same signature or another), or not judged."""
    found = judged(flagged.calls)
    if found is None:
        return NOT_JUDGED
    if found == "right":
        return RIGHT
    wrong = first_wrong(flagged.calls)
    return STILL_WRONG if wrong is not None and wrong_signature(wrong) == signature else OTHER_WRONG


def tested(result: str) -> bool:
    """Whether a `check` result is evidence either way (a compile or a crash), not a model left untested."""
    return result in (*PASSING, *FAILING)


def verdict(signature: str, models: Sequence[str], nights: Sequence[Night], needed: int,
            last_failing: str | None) -> Verdict:
    """Close only after `needed` consecutive nightlies (newest last in `nights`) where every model compiled (for a
    wrong result: was judged right)."""
    if not models or not nights:
        return Verdict(close=False, streak=0, fixed_in=None, last_failing=last_failing)
    results = [{m: check(signature, *night.items.get(m, (None, None))) for m in models} for night in nights]
    latest = results[-1]
    streak, fixed_in = 0, None
    for night, res in zip(reversed(nights), reversed(results)):
        if any(r not in PASSING for r in res.values()):
            break
        streak, fixed_in = streak + 1, night.date
    return Verdict(close=streak >= needed, streak=streak, fixed_in=fixed_in, last_failing=last_failing,
                   untested={m: r for m, r in sorted(latest.items()) if not tested(r)},
                   failing={m: r for m, r in sorted(latest.items()) if r in FAILING})
