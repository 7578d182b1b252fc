"""Named flag configurations: the built-in catalog, TOML files, and validation against torch.

A config is a flat dict {"torch._dynamo.config.capture_scalar_outputs": True}.
Validation looks each key up in the real torch config modules of the
interpreter that will run the workers, so a typo or a wrongly typed value is a
ConfigError before any model runs. `python -m harness.configs` is that check
run inside another interpreter (--python).
"""
from __future__ import annotations

import difflib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

# The torch modules whose keys a config may set (DESIGN "Words").
CONFIG_MODULES = (
    "torch._dynamo.config",
    "torch._inductor.config",
    "torch.fx.experimental._config",
    "torch.compiler.config",
)

BUILTIN: dict[str, dict[str, Any]] = {
    "baseline": {},
    "capture_scalar_outputs": {"torch._dynamo.config.capture_scalar_outputs": True},
    "capture_dynamic_output_shape_ops": {"torch._dynamo.config.capture_dynamic_output_shape_ops": True},
}


class ConfigError(ValueError):
    """A config name, key or value is wrong; the message says which and suggests close matches."""


def split_key(key: str) -> tuple[str, str]:
    """'torch._inductor.config.triton.cudagraphs' -> ('torch._inductor.config', 'triton.cudagraphs')."""
    for module in sorted(CONFIG_MODULES, key=len, reverse=True):
        if key.startswith(module + ".") and len(key) > len(module) + 1:
            return module, key[len(module) + 1:]
    raise ConfigError(f"{key!r}: not under one of {', '.join(CONFIG_MODULES)}")


def parse_value(text: str) -> Any:
    """A command-line value: true/false, numbers, JSON, None, else the string itself."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_setting(text: str) -> tuple[str, Any]:
    """'KEY=VALUE' -> (key, value)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"{text!r}: expected KEY=VALUE, e.g. torch._dynamo.config.capture_scalar_outputs=true")
    return key.strip(), parse_value(value)


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML may spell a key quoted ("torch._dynamo.config.x" = true) or dotted (nested tables)."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, full + "."))
        else:
            flat[full] = value
    return flat


def load_catalog(config_file: str | None) -> dict[str, dict]:
    """The built-in configs plus those of a TOML file ([configs.NAME] tables, or top-level [NAME] tables)."""
    catalog = {name: dict(settings) for name, settings in BUILTIN.items()}
    if not config_file:
        return catalog
    import tomllib  # 3.11+; only the parent reads config files

    path = Path(config_file)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a config file") from None
    except OSError as exc:          # no permission, an unreadable device
        raise ConfigError(f"{path}: cannot read the config file ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (a TOML config file is UTF-8 text)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    tables = data.get("configs", data)
    if not isinstance(tables, dict):
        raise ConfigError(f"{path}: [configs] must hold one table per config")
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: config {name!r} must be a table of settings, got {type(table).__name__}")
        if name == "baseline" and table:
            raise ConfigError(f"{path}: 'baseline' is the empty config and cannot be redefined")
        catalog[name] = _flatten(table)
    return catalog


def select(catalog: dict[str, dict], names: list[str]) -> dict[str, dict]:
    """The named configs, baseline first (always); unknown names are a ConfigError with close matches."""
    chosen = {"baseline": catalog.get("baseline", {})}
    for name in names:
        name = name.strip()
        if not name:
            continue
        if name not in catalog:
            close = difflib.get_close_matches(name, list(catalog), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"unknown config {name!r}{hint} (known: {', '.join(sorted(catalog))})")
        chosen[name] = catalog[name]
    return chosen


def _type_ok(value: Any, default: Any, value_type: Any) -> bool:
    """Is `value` acceptable where torch declares `default` of `value_type`?"""
    # value_type is type(default) unless the config declares one; aliases have a
    # sentinel default, so trust value_type first.
    expected = value_type if isinstance(value_type, type) else type(default)
    if value is None or expected in (type(None), object):
        return True  # Optional settings take anything; torch itself does not check
    if expected is bool:
        return isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is str:
        return isinstance(value, str)
    if expected in (list, tuple, set):
        return isinstance(value, (list, tuple))
    if expected is dict:
        return isinstance(value, dict)
    return True  # callables, enums, ...: let torch decide


def _type_name(default: Any, value_type: Any) -> str:
    return value_type.__name__ if isinstance(value_type, type) else type(default).__name__


def check_here(settings: dict[str, Any]) -> list[str]:
    """Problems with `settings` against this interpreter's torch (empty list: all good)."""
    import importlib

    problems = []
    modules: dict[str, dict[str, Any]] = {}
    for key, value in settings.items():
        try:
            module_name, attr = split_key(key)
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        if module_name not in modules:
            try:
                modules[module_name] = importlib.import_module(module_name)._config  # name -> _ConfigEntry
            except (ImportError, AttributeError) as exc:
                problems.append(f"{key!r}: cannot read {module_name} in this torch ({exc})")
                continue
        entries = modules[module_name]
        entry = entries.get(attr)
        if entry is None:
            names = [f"{m}.{a}" for m, es in modules.items() for a in es] + [
                f"{module_name}.{a}" for a in entries]
            close = difflib.get_close_matches(key, names, n=3, cutoff=0.75)
            hint = f"; did you mean {', '.join(dict.fromkeys(close))}?" if close else ""
            problems.append(f"unknown setting {key!r}{hint}")
            continue
        default, value_type = getattr(entry, "default", None), getattr(entry, "value_type", None)
        if not _type_ok(value, default, value_type):
            problems.append(f"{key!r}: expected {_type_name(default, value_type)}, got {type(value).__name__} {value!r}")
    return problems


def validate(settings: dict[str, Any], python: str | None = None) -> None:
    """Raise ConfigError unless every key exists in torch's config modules with a value of the right type."""
    if settings:
        validate_all({"settings": settings}, {}, python, label=False)


def validate_all(configs: dict[str, dict], base_settings: dict[str, Any], python: str | None = None,
                 label: bool = True) -> None:
    """Validate every config and the base settings, each on its own, in one interpreter start for --python."""
    named = [("--base-setting", base_settings), *configs.items()]
    named = [(name, settings) for name, settings in named if settings]
    if not named:
        return
    batches = [settings for _, settings in named]
    results = [check_here(b) for b in batches] if python is None else _check_in(python, batches)
    for (name, _), problems in zip(named, results):
        if problems:
            raise ConfigError(f"{name}: {'; '.join(problems)}" if label else "; ".join(problems))


def _check_in(python: str, batches: list[dict[str, Any]]) -> list[list[str]]:
    """Run check_here inside another interpreter (one with the torch under test)."""
    from harness.pool import worker_env  # the same PYTHONPATH the workers get

    proc = subprocess.run([python, "-m", "harness.configs"], input=json.dumps(batches), capture_output=True,
                          text=True, env=worker_env(), timeout=300)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ConfigError(f"{python}: could not check settings there: {' '.join(tail)}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps([check_here(batch) for batch in json.loads(sys.stdin.read())]))
