"""The locked corpus: one JSON file per transformers version, read and written without torch.

An entry holds everything a sweep needs to build a model: the config class and
the final config as built, the input spec as probed, the stratum and kind, what
discovery applied, the status (ok, or why it could not be locked), and its own
hash. Sweeps read entries here; only `flagsweep zoo lock` writes them.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.core.files import write_atomic
from harness.zoo.errors import CorruptEntry, LockError

LOCK_DIR = Path(__file__).with_name("lock")
FORMAT = 1
DOC_KEYS = ("format", "transformers", "entries", "excluded")   # the top-level keys of a lock file
LOCK_STATUSES = ("ok", "create_error", "input_error", "eager_error", "timeout", "killed")
# field -> the JSON types it may hold
FIELDS: dict[str, tuple[type, ...]] = {
    "model": (str,), "config_class": (str,), "stratum": (str,), "kind": (str,), "status": (str,),
    "cause": (str, type(None)), "config": (dict,), "spec": (dict,), "text_only": (bool,),
    "applied": (dict,), "transformers": (str,), "hash": (str,),
}
# Fields a lock made by an older flagsweep may lack: "modeling" is a hash of the class's modeling source file (its
# AST, comments aside), so a transformers bump tells models whose code changed from those whose did not.
# "uncapped" names the caps of harness.discovery.caps an entry gave up (it did not build or run in eager with them)
# and why: left out of build_hash(), as the config and spec already say what is built, and the words of the why
# (an error message) may change with a release while the build does not.
UNCAPPED_FIELD = "uncapped"
OPTIONAL_FIELDS: dict[str, tuple[type, ...]] = {"modeling": (str,), UNCAPPED_FIELD: (str,)}
# Optional fields checked where they are used (harness.zoo.second, harness.zoo.mode_record), so a bad one costs only
# what uses it: the second input spec (`zoo lock` seals the first of harness.zoo.sizes.second_specs that runs in
# eager), or why none does; the modes the model runs in eager (`modes`: axis -> value -> null or why not).
DEFERRED_FIELDS = ("second_spec", "second_spec_why", "modes")
# Fields that name the release an entry was locked for, not what is built: left out of build_hash(). The second
# input spec is left out too: it is what a later call is given, not what is built, and sealing the spec the worker
# would derive anyway (an entry locked before it was sealed) must not make a night's results incomparable; so is
# the modes record (what a mode can run, not what is built: sealing it changes no fingerprint).
RELEASE_FIELDS = ("transformers", "hash", *DEFERRED_FIELDS, UNCAPPED_FIELD)
APPLIED_KEYS = ("recipes", "fixups", "repairs")
HOLLOW_IF_EMPTY = ("config_class", "config")   # an ok entry without these has nothing to build from


def installed_transformers() -> str:
    """The installed transformers version, from package metadata (no import of transformers or torch)."""
    from importlib.metadata import version

    return version("transformers")


def lock_path(version: str, lock_dir: Path | None = None) -> Path:
    """The lock file for a transformers version."""
    return Path(lock_dir or LOCK_DIR) / f"transformers-{version}.json"


def entry_hash(entry: dict) -> str:
    """The hash of an entry's content (every field but the hash itself), over canonical JSON."""
    body = {k: v for k, v in entry.items() if k != "hash"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def build_hash(entry: dict) -> str:
    """The hash of what an entry builds (config, inputs, recipes, modeling source...) whatever release locked it: two
    releases' entries with the same build_hash build the same model, so their results stay comparable."""
    body = {k: v for k, v in entry.items() if k not in RELEASE_FIELDS}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def seal(entry: dict) -> dict:
    """The entry with its hash field set."""
    out = {k: v for k, v in entry.items() if k != "hash"}
    out["hash"] = entry_hash(out)
    return out


def check_entry(model: str, entry: Any, version: str) -> dict:
    """The entry if every field is present, typed and consistent; CorruptEntry naming model and field if not."""
    if not isinstance(entry, dict):
        raise CorruptEntry(model, "*", "not a JSON object")
    for name, types in FIELDS.items():
        if name not in entry:
            raise CorruptEntry(model, name, "missing")
        if not isinstance(entry[name], types):
            raise CorruptEntry(model, name, f"expected {'/'.join(t.__name__ for t in types)}, got {type(entry[name]).__name__}")
    for name, types in OPTIONAL_FIELDS.items():
        if name in entry and not isinstance(entry[name], types):
            raise CorruptEntry(model, name, f"expected {'/'.join(t.__name__ for t in types)}, got {type(entry[name]).__name__}")
    extra = sorted(set(entry) - set(FIELDS) - set(OPTIONAL_FIELDS) - set(DEFERRED_FIELDS))
    if extra:
        raise CorruptEntry(model, extra[0], "not a lock field")
    if entry["model"] != model:
        raise CorruptEntry(model, "model", f"names {entry['model']!r}")
    if entry["status"] not in LOCK_STATUSES:
        raise CorruptEntry(model, "status", f"{entry['status']!r} is not one of {', '.join(LOCK_STATUSES)}")
    if entry["status"] == "ok":
        for name in HOLLOW_IF_EMPTY:
            if not entry[name]:
                raise CorruptEntry(model, name, "empty in an entry with status ok")
    if entry["transformers"] != version:
        raise CorruptEntry(model, "transformers", f"{entry['transformers']} in the lock for {version}")
    for key in APPLIED_KEYS:
        if not isinstance(entry["applied"].get(key), list):
            raise CorruptEntry(model, f"applied.{key}", "missing or not a list")
    if entry_hash(entry) != entry["hash"]:
        raise CorruptEntry(model, "hash", f"is {entry['hash']}, content hashes to {entry_hash(entry)} (edited by hand?)")
    return entry


def corrupt_entries(entries: dict[str, Any], version: str) -> list[dict]:
    """The entries that fail the checks a sweep applies (hand edits, hollow entries): model, field and why, by model."""
    bad = []
    for model in sorted(entries):
        try:
            check_entry(model, entries[model], version)
        except CorruptEntry as exc:
            bad.append({"model": model, "field": exc.field, "why": exc.why})
    return bad


@dataclass(frozen=True)
class Lock:
    """The entries of one lock file, checked on access."""

    version: str
    path: Path
    entries: dict
    excluded: dict     # class name -> why it is not a candidate (as the lock's scan saw it)

    def names(self) -> list[str]:
        """Every locked class name, sorted."""
        return sorted(self.entries)

    def entry(self, model: str) -> dict:
        """The checked entry of a model; LockError when there is none, CorruptEntry when it is bad."""
        if model not in self.entries:
            raise LockError(f"{model!r} has no entry in the lock for transformers {self.version}; "
                            f"run `flagsweep zoo lock --models {model}`")
        return check_entry(model, self.entries[model], self.version)


def read(path: Path) -> dict:
    """The raw lock document at path; LockError if it is unreadable."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise LockError(f"cannot read the lock {Path(path).name}: {exc}") from None
    name = Path(path).name
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), dict):
        raise LockError(f"{name} is not a lock file (no entries)")
    if doc.get("format") != FORMAT:
        raise LockError(f"{name} is lock format {doc.get('format')!r}; this flagsweep reads format {FORMAT}")
    if not isinstance(doc.get("transformers"), str) or not doc["transformers"]:
        raise LockError(f"{name}: 'transformers' must be the release's version (a string), "
                        f"got {doc.get('transformers')!r}")
    extra = sorted(set(doc) - set(DOC_KEYS))
    if extra:
        raise LockError(f"{name}: {extra[0]!r} is not a lock key (a lock holds {', '.join(DOC_KEYS)})")
    excluded = doc.get("excluded", {})
    if not isinstance(excluded, dict) or not all(isinstance(v, str) for v in excluded.values()):
        raise LockError(f"{name}: 'excluded' must map class names to reasons, got {type(excluded).__name__}")
    return doc


@lru_cache(maxsize=8)
def load(version: str | None = None, lock_dir: str | None = None) -> Lock:
    """The lock for a transformers version (default: the installed one); LockError naming both versions if absent."""
    version = version or installed_transformers()
    path = lock_path(version, Path(lock_dir) if lock_dir else None)
    if not path.exists():
        others = sorted(p.name[len("transformers-"):-len(".json")] for p in path.parent.glob("transformers-*.json"))
        have = f"; the lock is for transformers {', '.join(others)}" if others else ""
        raise LockError(f"no zoo lock for transformers {version}{have}: run `flagsweep zoo lock`")
    doc = read(path)
    if doc.get("transformers") != version:
        raise LockError(f"{path.name} was locked for transformers {doc.get('transformers')}, not {version}")
    return Lock(version, path, doc["entries"], doc.get("excluded") or {})


def current() -> Lock:
    """The lock of the installed transformers in the package's lock directory (LOCK_DIR): what sweeps build from."""
    return load()


def _scalar(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def pretty(value: Any, depth: int = 0) -> str:
    """JSON a reviewer reads as a diff: sorted keys, one key per line, short scalar lists on one line."""
    pad, inner = " " * depth, " " * (depth + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{inner}{json.dumps(str(k))}: {pretty(value[k], depth + 1)}" for k in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        if all(_scalar(v) for v in value):
            return json.dumps(value, ensure_ascii=True)
        return "[\n" + ",\n".join(inner + pretty(v, depth + 1) for v in value) + "\n" + pad + "]"
    return json.dumps(value, ensure_ascii=True)


def write(path: Path, version: str, entries: dict[str, dict], excluded: dict[str, str] | None = None) -> None:
    """Write a lock deterministically (sorted keys, one entry per model in name order) and atomically."""
    doc = {"format": FORMAT, "transformers": version, "entries": {m: seal(entries[m]) for m in sorted(entries)},
           "excluded": dict(sorted((excluded or {}).items()))}
    write_atomic(path, pretty(doc) + "\n")
    load.cache_clear()
