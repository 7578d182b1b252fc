"""What a transformers bump changed in the corpus: two locks compared, or a lock and the installed release's scan.

Plain JSON work, no torch. A side is a lock document (entries) or a scan document
(candidates with their modeling hashes, no entries: what the installed release has
before it is locked). A model is unchanged when lock.build_hash() is the same on both
sides: the rule that also keeps its results comparable across the bump (its build
fingerprint is the same). A side without a modeling hash (a lock made before they
were recorded) makes that model's modeling source "unknown", never "changed".
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.zoo.lock import build_hash
from harness.zoo.second import FIELD as SECOND, WHY_FIELD as SECOND_WHY, corrupt_entries

# Entry fields by what they say about a model, for the diff's "what changed" column.
ASPECTS = {"config_class": "config", "config": "config", "spec": "inputs", "text_only": "inputs",
           "applied": "recipes", "status": "status", "cause": "status", "stratum": "stratum", "kind": "kind"}


@dataclass(frozen=True)
class Side:
    """One side of the diff: its transformers version, its classes, their entries (None: a scan) and modeling hashes."""

    transformers: str
    classes: frozenset[str]
    entries: dict | None
    modeling: dict          # class -> hash of its modeling source, or None when unknown
    corrupt: tuple = ()     # entries failing the lock's checks ({model, field, why}): flagged, never compared


def from_lock(doc: dict) -> Side:
    """A side from a lock document (lock.read)."""
    entries = doc["entries"]
    return Side(doc["transformers"], frozenset(entries), entries,
                {m: e.get("modeling") if isinstance(e, dict) else None for m, e in entries.items()},
                tuple(corrupt_entries(entries, doc["transformers"])))


def from_scan(doc: dict) -> Side:
    """A side from the installed release's scan (locker.scan): classes and modeling hashes, no entries yet."""
    return Side(doc["transformers"], frozenset(c["model"] for c in doc["candidates"]), None,
                {c["model"]: c.get("modeling") for c in doc["candidates"]})


def _aspects(old: dict, new: dict) -> list[str]:
    """What differs between two entries of a model, as aspects (config, inputs, recipes, status, modeling...)."""
    fields = {k for k in set(old) | set(new) if k in ASPECTS and old.get(k) != new.get(k)}
    return sorted({ASPECTS[f] for f in fields})


def _second(entry: dict) -> tuple:
    """An entry's sealed second input spec, or why it has none (left out of build_hash)."""
    return entry.get(SECOND), entry.get(SECOND_WHY)


def _modeling(old: Side, new: Side, model: str) -> str:
    """changed, same, or unknown (a side has no hash for it)."""
    a, b = old.modeling.get(model), new.modeling.get(model)
    if not a or not b:
        return "unknown"
    return "same" if a == b else "changed"


def compare(old: Side, new: Side) -> dict:
    """The diff as plain data: added, removed, entries changed (with aspects), modeling changed/unknown, unchanged."""
    common = sorted(old.classes & new.classes)
    modeling = {m: _modeling(old, new, m) for m in common}
    changed, unchanged, second = [], [], []
    # A corrupt entry (hand-edited, mistyped) says nothing reliable about what changed: flagged, not compared.
    corrupt = [{"side": side, **c} for side, s in (("old", old), ("new", new)) for c in s.corrupt]
    broken = {c["model"] for c in corrupt}
    if old.entries is not None and new.entries is not None:
        for m in (m for m in common if m not in broken):
            a, b = old.entries[m], new.entries[m]
            if build_hash(a) == build_hash(b):
                unchanged.append(m)
                if _second(a) != _second(b):   # the same build; its second_size call measures another size
                    second.append(m)
            elif _aspects(a, b):
                changed.append({"model": m, "changed": _aspects(a, b)})
    doc = {"old": old.transformers, "new": new.transformers, "entries_compared": new.entries is not None
           and old.entries is not None,
           "added": sorted(new.classes - old.classes), "removed": sorted(old.classes - new.classes),
           "entries_changed": changed, "second_spec_changed": second, "modeling_changed": [m for m in common if modeling[m] == "changed"],
           "modeling_unknown": [m for m in common if modeling[m] == "unknown"], "unchanged": unchanged,
           "corrupt": corrupt}
    doc["counts"] = {k: len(v) for k, v in doc.items() if isinstance(v, list)}
    return doc
