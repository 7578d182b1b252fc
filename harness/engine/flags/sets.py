"""Named flag sets: `all-dynamo`, `all-functorch`, `all-inductor` expand, in the torch under test, to one config per
boolean flag of that module flipped from its default, minus the reviewed exclusion table (exclusions.toml)."""
from __future__ import annotations

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
    return found


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


def expand_named(names: list[str], *, backend: str, python: str | None) -> dict[str, dict]:
    """The configs of the named sets among `names`, expanded in the torch under test (`python`, run once):
    {} when none is named."""
    from harness.engine.flags import space as configspace

    named = [n for n in names if n in NAMED]
    if not named:
        return {}
    refuse(named, backend)
    exclusions = load_exclusions()
    _, space = configspace.discover(backend, python)
    flips: dict[str, dict] = {}
    for name in named:
        flips.update(expand(name, space, exclusions))
    return flips
