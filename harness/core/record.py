"""Records we write ourselves, read back strictly: one parser for every dataclass that crosses a package or a process.

asv's rule (STYLE.md, house rule 10): a record has one writer and one reader, and the reader never guesses. A field
the reader does not know is an error (a misspelt field would otherwise vanish), and so is a required field that is
missing, and so is a number the store cannot hold (an integer past SQLite's range, NaN or infinity, at any depth);
the error names the record and the field. Where a record travels between processes it carries a version
(`check_version`); where it is stored, the store's schema version is its version (state/schema.py migrates).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, TypeVar

T = TypeVar("T")

# SQLite's integer: a value past it is an OverflowError where it is stored, so no record holds one.
INT_RANGE = (-2**63, 2**63 - 1)


class RecordError(ValueError):
    """A record does not parse as its type: the message names the record and the field, in one line."""


def parse(cls: type[T], data: Mapping[str, Any], what: str | None = None) -> T:
    """`cls(**data)` when `data` has exactly `cls`'s fields (defaults may be left out) and every number in it can be
    stored; RecordError naming the first unknown or missing field, or the number, otherwise."""
    name = what or cls.__name__
    if not isinstance(data, Mapping):
        raise RecordError(f"{name}: expected an object, got {type(data).__name__}")
    known = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(k for k in data if k not in known)
    if unknown:
        raise RecordError(f"{name}: unknown field {unknown[0]!r}")
    missing = sorted(k for k, f in known.items() if k not in data and f.default is dataclasses.MISSING
                     and f.default_factory is dataclasses.MISSING)
    if missing:
        raise RecordError(f"{name}: missing field {missing[0]!r}")
    for key, value in data.items():
        _check_numbers(value, f"{name}: {key}")
    return cls(**data)


def _check_numbers(value: Any, where: str) -> None:
    """RecordError naming the field (and the place inside it) of an integer past SQLite's range or of a number that
    is not finite (NaN, infinity: JSON has neither, and SQLite's JSON functions call the row malformed), at any depth
    of plain data; records already read are not walked again."""
    if isinstance(value, bool):
        return
    if isinstance(value, int) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
        shown = value if value.bit_length() <= 256 else f"an integer of {value.bit_length()} bits"   # str() has a cap
        raise RecordError(f"{where}: {shown} is past the range of a stored integer")
    if isinstance(value, float) and not math.isfinite(value):
        raise RecordError(f"{where}: {value!r} is not a finite number")
    if isinstance(value, (list, tuple)):
        for n, item in enumerate(value):
            _check_numbers(item, f"{where}[{n}]")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _check_numbers(item, f"{where}.{key}")


def check_version(data: Mapping[str, Any], version: int, what: str) -> dict[str, Any]:
    """`data` without its "v" key, when "v" is `version`; RecordError naming the versions otherwise."""
    if not isinstance(data, Mapping):
        raise RecordError(f"{what}: expected an object, got {type(data).__name__}")
    found = data.get("v")
    if found != version:
        raise RecordError(f"{what}: version {found!r}, this flagsweep reads version {version}")
    return {k: v for k, v in data.items() if k != "v"}


def check_closed(record: Any, what: str) -> None:
    """RecordError naming the record, the field and its set for the first field of `record.CLOSED` (field -> the
    values it may hold; None among them where the field is optional) whose value is outside its set."""
    for name, allowed in record.CLOSED.items():
        value = getattr(record, name)
        if not isinstance(value, (str, type(None))) or value not in allowed:
            shown = ", ".join("null" if a is None else a for a in allowed)
            raise RecordError(f"{what}: {name} {value!r} is not one of {shown}")


def check_counts(record: Any, what: str, names: tuple[str, ...], least: int = 0) -> None:
    """RecordError naming the first of `names` that holds neither None nor an integer >= `least`."""
    for name in names:
        value = getattr(record, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
            raise RecordError(f"{what}: {name} {value!r} is not an integer >= {least}")
