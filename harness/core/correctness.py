"""Wrong results and recompiles, judged per item against the baseline on the same item (DESIGN "Words").

Pure functions over the calls an item made (harness.core.calls); no I/O. The seven graph effects stay as they are
(harness.core.effects); these two axes sit beside them:
- correctness: baseline right and the flag wrong is `wrong_result`, the reverse `fixes_wrong_result`, anything else
  judged on both sides `same_correctness`; both wrong is a **baseline finding** (reported once per run, not per
  flag), so the flag's effect is `same_correctness` there too;
- recompiles on the later calls (every call after the first): `fewer_recompiles`, `more_recompiles`,
  `same_recompiles`.
An item that crashed, or whose calls were not all judged, has no correctness effect (None); one with no later calls
has no recompile effect.
"""
from __future__ import annotations

import re
from typing import Sequence

from harness.core.calls import FIRST, Call
from harness.core.scrub import scrub

CORRECTNESS_EFFECTS = ("wrong_result", "fixes_wrong_result", "same_correctness")
RECOMPILE_EFFECTS = ("fewer_recompiles", "more_recompiles", "same_recompiles")
WRONG_RESULT = "wrong_result"


def verdict(calls: Sequence[Call]) -> str | None:
    """"wrong" when any call's outputs were wrong, "right" when every call was judged right, else None."""
    if any(c.wrong for c in calls):
        return "wrong"
    if calls and all(c.right for c in calls):
        return "right"
    return None


def first_wrong(calls: Sequence[Call]) -> Call | None:
    """The first call whose outputs were wrong (the one a wrong result is filed by)."""
    return next((c for c in calls if c.wrong), None)


def wrong_signature(call: Call) -> str:
    """The signature a wrong result is grouped by: the scenario and the first output that differs."""
    return f"{WRONG_RESULT}: {call.scenario}: {call.output or 'output'}"


def wrong_parts(signature: str) -> tuple[str, str]:
    """(scenario, output) of a wrong signature (`wrong_signature`'s form)."""
    _, scenario, output = signature.split(": ", 2)
    return scenario, output


def is_wrong_signature(signature: str) -> bool:
    """Whether a group's signature names a wrong result (`wrong_signature`'s form), not a crash."""
    return signature.startswith(f"{WRONG_RESULT}: ")


def correctness_effect(baseline: Sequence[Call], flagged: Sequence[Call]) -> str | None:
    """One of CORRECTNESS_EFFECTS for a (baseline, flagged) pair of the same model, or None when either side
    was not judged."""
    before, after = verdict(baseline), verdict(flagged)
    if before is None or after is None:
        return None
    if before == "right" and after == "wrong":
        return "wrong_result"
    if before == "wrong" and after == "right":
        return "fixes_wrong_result"
    return "same_correctness"


def baseline_finding(baseline: Sequence[Call]) -> Call | None:
    """The baseline's own wrong call (compiled without any flag, the outputs differ from eager), if any."""
    return first_wrong(baseline)


def later_recompiles(calls: Sequence[Call]) -> int | None:
    """Recompiles over the calls after the first (None when there were none)."""
    later = [c for c in calls if c.scenario != FIRST]
    return sum(c.recompiles for c in later) if later else None


def recompile_effect(baseline: Sequence[Call], flagged: Sequence[Call]) -> str | None:
    """One of RECOMPILE_EFFECTS comparing the later calls' recompiles, or None when either side made none."""
    before, after = later_recompiles(baseline), later_recompiles(flagged)
    if before is None or after is None:
        return None
    if after < before:
        return "fewer_recompiles"
    if after > before:
        return "more_recompiles"
    return "same_recompiles"


# Dynamo names the object a failed guard checked by its id (`___check_obj_id(G['g'].__code__, 140107547673248)`): a
# number of one process, which the next night, another worker or the audit's trace never repeats.
_GUARD_ID = re.compile(r"(___check_\w*id\([^\n]*?,\s*)\d+\)")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")


def recompile_reason(text: str) -> str:
    """A recompile reason as it is kept: Dynamo's text without machine paths, object ids or addresses, so the same
    guard failing in another process reads the same (and no path of this machine reaches an issue)."""
    return _ADDRESS.sub("0xADDR", _GUARD_ID.sub(r"\1ID)", scrub(text) or ""))


def recompile_reasons(calls: Sequence[Call]) -> list[str]:
    """Dynamo's recompile reasons over the later calls, in order, without repeats."""
    seen: dict[str, None] = {}
    for c in calls:
        if c.scenario != FIRST:
            seen.update(dict.fromkeys(c.recompile_reasons))
    return list(seen)
