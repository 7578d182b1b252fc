"""Which modes a locked model runs in (harness.core.modes): its entry's `modes` record, read and checked here.

`zoo lock` probes each axis value of PROBED alone in eager (harness.engine.mode_probe.probe) and seals what it found as
the entry's `modes`: axis -> value -> null (built and ran) or why not. The record is left out of build_hash (it says
what a mode can run, not what is built), so sealing it changes no fingerprint. It is checked here, where a sweep
uses it: a mode whose changed axis the record says cannot run is skipped with the record's reason, before the build;
an axis value the record does not name (an entry locked before the record, `dynamic`, which eager never sees) is
run as before: a model that then fails in eager is that mode's create_error.
"""
from __future__ import annotations

from harness.core.modes import ATTENTIONS, DTYPES, DEFAULT, PHASES, Mode
from harness.zoo import lock as lock_mod
from harness.zoo import registry
from harness.zoo.errors import CorruptEntry, LockError

FIELD = "modes"
# The axis values probed, each alone: what a mode beside eval changes that eager itself can fail on.
PROBED: dict[str, tuple[str, ...]] = {
    "attention": tuple(a for a in ATTENTIONS if a != DEFAULT.attention),
    "dtype": tuple(d for d in DTYPES if d != DEFAULT.dtype),
    "phase": tuple(p for p in PHASES if p != DEFAULT.phase),
}


def probes() -> list[Mode]:
    """One mode per probed axis value, every other axis at its default (named `axis-value`)."""
    return [Mode(f"{axis}-{value}", **{axis: value}) for axis, values in PROBED.items() for value in values]


def check(model: str, record: object) -> dict[str, dict[str, str | None]]:
    """`record` if it maps probed axes to probed values to null or a reason (text); else CorruptEntry."""
    if not isinstance(record, dict):
        raise CorruptEntry(model, FIELD, f"expected axis -> value -> null or why (object), got {type(record).__name__}")
    for axis, values in record.items():
        if axis not in PROBED:
            raise CorruptEntry(model, f"{FIELD}.{axis}", f"not a probed axis ({', '.join(PROBED)})")
        if not isinstance(values, dict):
            raise CorruptEntry(model, f"{FIELD}.{axis}", "expected value -> null or why (object)")
        for value, why in values.items():
            if value not in PROBED[axis]:
                raise CorruptEntry(model, f"{FIELD}.{axis}.{value}", f"not a probed value ({', '.join(PROBED[axis])})")
            if why is not None and (not isinstance(why, str) or not why.strip()):
                raise CorruptEntry(model, f"{FIELD}.{axis}.{value}", f"expected null or why (text), got {why!r}")
    return record


def recorded(model: str) -> dict[str, dict[str, str | None]] | None:
    """The checked record of a locked (or registered test) model; None where it has none, or has no entry (its
    build says why); CorruptEntry when the record is malformed."""
    if model in registry.EXTRA:
        record = registry.MODES.get(model)
    else:
        try:
            record = lock_mod.current().entry(model).get(FIELD)
        except LockError:
            return None
    return None if record is None else check(model, record)


def cannot_run(model: str, mode: Mode) -> str | None:
    """Why the record says `model` cannot run in `mode` (its first changed axis recorded as failing), or None: the
    record says it runs, or does not know (then it is run as before)."""
    record = recorded(model) if not mode.is_default else None
    if not record:
        return None
    for axis, value in mode.changed().items():
        why = record.get(axis, {}).get(value)
        if why is not None:
            return f"the lock records that {model} cannot run {axis} {value} in eager: {why}"
    return None
