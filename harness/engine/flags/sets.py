"""Named flag sets: `all-dynamo`, `all-functorch`, `all-inductor` expand, in the torch under test, to one config per
boolean flag of that module flipped from its default, minus the reviewed exclusion table (exclusions.toml)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.files import UnreadableFile, read_toml
from harness.engine.configs import BUILTIN, NAMED_SETS, ConfigError

# Each named set and the config module whose flags it flips (the names are reserved in configs.NAMED_SETS).
NAMED = dict(zip(NAMED_SETS, ("torch._dynamo.config", "torch._functorch.config", "torch._inductor.config")))
# Why a flag is not flipped (see exclusions.toml).
REASONS = ("debugging", "changes_measurement", "needs_another_flag", "out_of_scope")
EXCLUSIONS = Path(__file__).with_name("exclusions.toml")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Exclusion:
    key: str
    reason: str
    note: str = ""


def load_exclusions(path: Path = EXCLUSIONS) -> dict[str, Exclusion]:
    """{key: Exclusion}; ConfigError (one line) on an unknown reason or field, a repeated key, a malformed entry."""
    try:
        table = read_toml(path, "exclusion table").get("exclude", [])
    except UnreadableFile as exc:
        raise ConfigError(str(exc)) from None
    found: dict[str, Exclusion] = {}
    for i, row in enumerate(table if isinstance(table, list) else [table]):
        where = f"{path.name}: exclude #{i + 1}"
        if not isinstance(row, dict) or set(row) - {"key", "reason", "note"} or not isinstance(row.get("key"), str):
            raise ConfigError(f"{where}: an entry is key = \"...\", reason = \"...\", note = \"...\" (optional)")
        if row.get("reason") not in REASONS:
            raise ConfigError(f"{where}: {row['key']}: unknown reason {row.get('reason')!r} "
                              f"(one of {', '.join(REASONS)})")
        if row["key"] in found:
            raise ConfigError(f"{where}: {row['key']} is listed twice")
        found[row["key"]] = Exclusion(row["key"], row["reason"], str(row.get("note", "")))
    if not found:      # an emptied or truncated table would flip every debugging flag: never read it as "none"
        raise ConfigError(f"{path}: the exclusion table has no [[exclude]] entries")
    return found


def unmatched(exclusions: dict[str, Exclusion], modules: list[str], space: dict[str, dict[str, Any]]) -> list[str]:
    """The excluded keys of the listed modules that the torch under test does not have: a typo, or a key this build
    removed (either way the entry excludes nothing)."""
    return sorted(k for k in exclusions if k not in space and any(k.startswith(m + ".") for m in modules))


def config_name(key: str) -> str:
    """'torch._dynamo.config.capture_scalar_outputs' -> 'dynamo.capture_scalar_outputs'."""
    module = next(m for m in NAMED.values() if key.startswith(m + "."))
    return f"{module.split('.')[1].lstrip('_')}.{key[len(module) + 1:]}"


def flippable(key: str, entry: dict[str, Any], exclusions: dict[str, Exclusion]) -> bool:
    """A boolean, public, not deprecated and not excluded."""
    return (entry.get("type") == "bool" and isinstance(entry.get("default"), bool) and not entry.get("deprecated")
            and not any(part.startswith("_") for part in key.split(".")[3:]) and key not in exclusions)


def expand(name: str, space: dict[str, dict[str, Any]], exclusions: dict[str, Exclusion]) -> dict[str, dict]:
    """The configs of named set `name` over a config space: {config name: {key: not default}}, sorted.

    A flip a built-in config already names keeps the built-in's name (its history and issues carry over)."""
    module = NAMED[name]
    builtin = {tuple(s.items()): n for n, s in BUILTIN.items() if len(s) == 1}
    configs = {}
    for key in sorted(k for k in space if k.startswith(module + ".")):
        if flippable(key, space[key], exclusions):
            settings = {key: not space[key]["default"]}
            configs[builtin.get(tuple(settings.items()), config_name(key))] = settings
    return configs


def refuse(names: list[str], backend: str, how: str = "--backend inductor") -> None:
    """ConfigError (one line) for a named set the backend cannot run: no other backend reads an Inductor flag.
    `how`: where the caller's backend is chosen (the sweep's flag; the nightly's setting)."""
    if "all-inductor" in names and backend != "inductor":
        raise ConfigError(f"all-inductor needs {how} (no other backend reads an Inductor flag)")


def expand_named(names: list[str], *, backend: str, python: str | None,
                 table: Path = EXCLUSIONS) -> dict[str, dict]:
    """The configs of the named sets among `names`, expanded in the torch under test (`python`, run once):
    {} when none is named. An exclusion the torch has no flag for is one warning line naming the key."""
    from harness.engine.flags import space as configspace

    named = [n for n in names if n in NAMED]
    if not named:
        return {}
    refuse(named, backend)
    exclusions = load_exclusions(table)
    modules, space = configspace.discover(backend, python)
    for key in unmatched(exclusions, modules, space):
        log.warning("%s: %s matches no flag of the torch under test (a typo, or a key this build removed)",
                    table.name, key)
    flips: dict[str, dict] = {}
    for name in named:
        flips.update(expand(name, space, exclusions))
    return flips
