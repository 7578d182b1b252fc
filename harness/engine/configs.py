"""Named flag configurations: the built-in catalog, TOML files, and validation against torch.

A config is a flat dict {"torch._dynamo.config.capture_scalar_outputs": True}.
Keys are dotted identifiers under CONFIG_MODULES and values TOML/JSON scalars
or lists (check_syntax, wherever a config enters). `check` then asks the
interpreter that will run the workers (harness.engine.keycheck.probe_here, called
there through harness.engine.interpreter: the caller never imports torch) about every key: a wrongly typed
value is a ConfigError before any model runs, and a config whose key that torch
lacks is set aside as unavailable.
"""
from __future__ import annotations

import difflib
import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.files import UnreadableFile, read_toml

# The torch modules whose keys a config may set (DESIGN "Words").
CONFIG_MODULES = (
    "torch._dynamo.config",
    "torch._functorch.config",
    "torch._inductor.config",
    "torch.fx.experimental._config",
    "torch.compiler.config",
)

BUILTIN: dict[str, dict[str, Any]] = {
    "baseline": {},
    "capture_scalar_outputs": {"torch._dynamo.config.capture_scalar_outputs": True},
    "capture_dynamic_output_shape_ops": {"torch._dynamo.config.capture_dynamic_output_shape_ops": True},
}
# The named sets' names (harness.engine.flags.sets expands them): reserved, a config file cannot define one, since
# the set would silently replace it.
NAMED_SETS = ("all-dynamo", "all-functorch", "all-inductor")


class ConfigError(ValueError):
    """A config name, key or value is wrong; the message says which and suggests close matches."""


# A key: dotted Python identifiers (no whitespace, no code) under one of CONFIG_MODULES.
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def split_key(key: str) -> tuple[str, str]:
    """'torch._inductor.config.triton.cudagraphs' -> ('torch._inductor.config', 'triton.cudagraphs')."""
    if not isinstance(key, str) or not all(_IDENT.match(p) and not keyword.iskeyword(p) for p in key.split(".")):
        raise ConfigError(f"{key!r}: a key is dotted Python identifiers, e.g. torch._dynamo.config.verbose")
    for module in sorted(CONFIG_MODULES, key=len, reverse=True):
        if key.startswith(module + ".") and len(key) > len(module) + 1:
            return module, key[len(module) + 1:]
    raise ConfigError(f"{key!r}: not under one of {', '.join(CONFIG_MODULES)}")


def check_value(key: str, value: Any) -> None:
    """A value is a TOML/JSON scalar (bool, int, float, str, null) or a list of them; ConfigError otherwise."""
    if isinstance(value, (list, tuple)):
        for item in value:
            check_value(key, item)
    elif value is not None and not isinstance(value, (bool, int, float, str)):
        raise ConfigError(f"{key!r}: value {value!r} is a {type(value).__name__}; "
                          "values are booleans, numbers, strings, null or lists of them")


def check_syntax(settings: dict[str, Any], where: str = "") -> dict[str, Any]:
    """`settings` itself when every key and value is well formed, else ConfigError naming `where`."""
    prefix = f"{where}: " if where else ""
    if not isinstance(settings, dict):
        raise ConfigError(f"{prefix}settings must be a table of KEY = VALUE, got {type(settings).__name__}")
    try:
        for key, value in settings.items():
            split_key(key)
            check_value(key, value)
    except ConfigError as exc:
        raise ConfigError(f"{prefix}{exc}") from None
    return settings


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
    key, parsed = key.strip(), parse_value(value)
    check_syntax({key: parsed})
    return key, parsed


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
    path = Path(config_file)
    try:
        data = read_toml(path, "config file")
    except UnreadableFile as exc:
        raise ConfigError(str(exc)) from None
    tables = data.get("configs", data)
    if not isinstance(tables, dict):
        raise ConfigError(f"{path}: [configs] must hold one table per config")
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: config {name!r} must be a table of settings, got {type(table).__name__}")
        if name == "baseline" and table:
            raise ConfigError(f"{path}: 'baseline' is the empty config and cannot be redefined")
        if name in NAMED_SETS:
            raise ConfigError(f"{path}: config {name!r} is the name of a named set (every flag of its module "
                              f"flipped); name the config otherwise")
        catalog[name] = check_syntax(_flatten(table), f"{path}: config {name!r}")
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


@dataclass
class Checked:
    """Configs checked in one interpreter: those it can run, and those whose keys its torch lacks."""

    configs: dict[str, dict]                                    # runnable, baseline first
    unavailable: dict[str, dict] = field(default_factory=dict)  # name -> {"settings": {...}, "missing": [keys]}
    hints: dict[str, str] = field(default_factory=dict)          # missing key -> "unknown setting ...; did you mean"

    def describe(self) -> list[str]:
        """One line per unavailable config, for logs and stderr."""
        return [f"config {name!r} is unavailable in this torch: " + "; ".join(self.hints[k] for k in u["missing"])
                for name, u in self.unavailable.items()]


def _type_ok(value: Any, expected: str) -> bool:
    """Is `value` acceptable where torch declares a setting of type `expected` (a type name)?"""
    if value is None or expected in ("NoneType", "object", ""):
        return True  # Optional settings take anything; torch itself does not check
    if isinstance(value, (list, tuple)):
        return expected in ("list", "tuple", "set")
    checks = {"bool": lambda v: isinstance(v, bool),
              "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
              "str": lambda v: isinstance(v, str),
              "list": lambda v: False, "tuple": lambda v: False, "set": lambda v: False, "dict": lambda v: False}
    check = checks.get(expected)
    return check(value) if check else True  # callables, enums, ...: let torch decide


def probe(keys: list[str], python: str | None = None) -> dict[str, dict[str, Any]]:
    """probe_here called in `python` (default: this interpreter), so the caller never imports torch."""
    from harness.engine.interpreter import CallFailed, call

    try:
        return call("harness.engine.keycheck:probe_here", sorted(set(keys)), python=python, timeout=300)
    except CallFailed as exc:
        if not exc.started:
            raise ConfigError(f"{exc.python}: cannot run it to check settings ({exc.why})") from None
        raise ConfigError(f"{exc.python}: could not check settings there: {exc.why}") from None


def _problem(key: str, value: Any, report: dict[str, Any]) -> str | None:
    """Why (key, value) cannot run where `report` was probed; None when it can."""
    status = report.get("status")
    if status == "malformed":
        return report.get("reason") or f"{key!r} is malformed"
    if status == "missing":
        close = report.get("close") or []
        return f"unknown setting {key!r}" + (f"; did you mean {', '.join(close)}?" if close else "")
    if not _type_ok(value, report.get("type", "")):
        return f"{key!r}: expected {report.get('type')}, got {type(value).__name__} {value!r}"
    return None


def check_all_syntax(configs: dict[str, dict], base_settings: dict[str, Any]) -> None:
    """check_syntax on the base settings and every config (cheap: no torch)."""
    check_syntax(base_settings, "--base-setting")
    for name, settings in configs.items():
        check_syntax(settings, f"config {name!r}")


def check(configs: dict[str, dict], base_settings: dict[str, Any], python: str | None = None) -> Checked:
    """Check every config and the base settings in `python`'s torch before anything runs.

    A wrong type or malformed key anywhere, or a base setting that torch lacks, is a
    ConfigError; a config whose key that torch lacks is set aside as unavailable.
    """
    check_all_syntax(configs, base_settings)
    keys = [k for s in [base_settings, *configs.values()] for k in s]
    return judge(configs, base_settings, probe(keys, python) if keys else {})


def judge(configs: dict[str, dict], base_settings: dict[str, Any], reports: dict[str, dict[str, Any]]) -> Checked:
    """Pure: the verdict of `check` from the probe's reports (one per key)."""
    for where, settings in [("--base-setting", base_settings), *configs.items()]:
        for key, value in settings.items():
            if reports[key]["status"] == "missing" and where != "--base-setting":
                continue
            problem = _problem(key, value, reports[key])
            if problem:
                raise ConfigError(f"{where}: {problem}")
    result = Checked(configs={})
    for name, settings in configs.items():
        missing = [k for k in settings if reports[k]["status"] == "missing"]
        result.hints.update({k: _problem(k, None, reports[k]) or k for k in missing})
        if missing:
            result.unavailable[name] = {"settings": settings, "missing": missing}
        else:
            result.configs[name] = settings
    return result


def validate_all(configs: dict[str, dict], base_settings: dict[str, Any], python: str | None = None) -> None:
    """Like check, but a config whose key that torch lacks is an error too (for single, explicit requests)."""
    checked = check(configs, base_settings, python)
    if checked.unavailable:
        raise ConfigError(checked.describe()[0])
