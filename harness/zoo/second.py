"""A model's second input spec (trace on A, run on B): the one its lock entry seals, or the rule's candidates.

`zoo lock` seals the first candidate of harness.zoo.sizes.second_specs that runs in eager as the entry's
`second_spec`; an entry locked before that has none, and the worker tries the rule's candidates in eager itself.
A sealed one is checked here, where it is used, not with the entry: a bad one costs its own call, never the build.
A lock read whole (`zoo diff`, `zoo lock --check`) lists a bad one with the corrupt entries (`corrupt_entries`), and
a bad modes record (harness.zoo.mode_record) with them: both are sealed outside build_hash.
"""
from __future__ import annotations

from typing import Callable

from harness.zoo import lock as lock_mod
from harness.zoo import mode_record, registry
from harness.zoo.errors import CorruptEntry
from harness.zoo.sizes import second_specs

FIELD = "second_spec"
WHY_FIELD = "second_spec_why"   # sealed instead when no second spec runs in eager: why
NO_OTHER_SIZE = "the second-size rule finds no other size for these inputs"


def first_that_runs(candidates: list[dict], run: Callable[[dict], object]) -> tuple[dict | None, str]:
    """The first candidate `run` takes without raising, or None and why none did (the last failure)."""
    why = NO_OTHER_SIZE
    for spec in candidates:
        try:
            run(spec)
        except Exception as exc:   # a size this model does not take: the next candidate
            why = f"no second size runs in eager: {type(exc).__name__}: {str(exc)[:200]}"
            continue
        return spec, ""
    return None, why


def candidates(model: str, spec: dict) -> list[dict]:
    """The second specs to try for a model built from `spec`, best first: the sealed one alone, or the rule's;
    CorruptEntry naming the model when its sealed one is malformed."""
    sealed = _sealed(model)
    if sealed is None:
        return second_specs(spec)
    return [check(model, sealed, spec)]


def _sealed(model: str) -> object | None:
    """The second spec a lock entry (or a registered test model) carries, as stored; None when it has none."""
    if model in registry.EXTRA:
        return registry.SECOND.get(model)
    return lock_mod.current().entry(model).get(FIELD)


def check(model: str, second: object, spec: dict) -> dict:
    """`second` if it is a spec of the same inputs as `spec`, each with its kind and plain sizes; else CorruptEntry."""
    if not isinstance(second, dict):
        raise CorruptEntry(model, FIELD, f"expected an input spec (object), got {type(second).__name__}")
    if set(second) != set(spec):
        raise CorruptEntry(model, FIELD, f"names inputs {sorted(second)}, the entry's spec {sorted(spec)}")
    for name, item in second.items():
        if not isinstance(item, dict) or not isinstance(item.get("kind"), str):
            raise CorruptEntry(model, f"{FIELD}.{name}", "not an input spec with a kind")
        shape = item.get("shape", [1])
        # a size may be 0 (a time-series model's past_time_features has no features: [B, S, 0] in the spec too)
        if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise CorruptEntry(model, f"{FIELD}.{name}", f"shape {shape!r} is not a list of sizes (0 or more)")
    return second


def check_sealed(model: str, entry: dict) -> None:
    """CorruptEntry naming the model and field when an entry's sealed second spec, or why it has none, is malformed
    (an entry that passed lock.check_entry: its spec is there)."""
    if FIELD in entry:
        check(model, entry[FIELD], entry["spec"])
        if WHY_FIELD in entry:
            raise CorruptEntry(model, WHY_FIELD, "sealed beside a second spec (an entry has one or the other)")
    why = entry.get(WHY_FIELD, "-")
    if not isinstance(why, str) or not why.strip():
        raise CorruptEntry(model, WHY_FIELD, f"expected why no second spec runs (text), got {why!r}")


def corrupt_entries(entries: dict, version: str) -> list[dict]:
    """The entries of a lock that fail a sweep's checks, the sealed second spec's and modes record's included (model,
    field, why), by model: what `zoo diff` and `zoo lock --check` list (both are left out of build_hash, so a
    malformed one in a re-sealed entry would otherwise read as unchanged)."""
    bad = lock_mod.corrupt_entries(entries, version)
    flagged = {b["model"] for b in bad}
    for model in sorted(set(entries) - flagged):
        try:
            check_sealed(model, entries[model])
            if entries[model].get(mode_record.FIELD) is not None:
                mode_record.check(model, entries[model][mode_record.FIELD])
        except CorruptEntry as exc:
            bad.append({"model": model, "field": exc.field, "why": exc.why})
    return sorted(bad, key=lambda b: b["model"])
