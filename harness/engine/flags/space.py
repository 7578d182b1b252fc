"""The config space of the torch under test: every entry of its config modules, with type and default.

`list_here` runs in that torch (called through harness.engine.interpreter, so the bot never imports torch);
`discover` asks it. Aliases (another key's second name) and hidden entries are left out, deprecated ones are marked; the default is the
value a fresh interpreter reads (an environment variable or a JustKnob may move it from the declared one).
"""
from __future__ import annotations

from typing import Any

from harness.engine.configs import ConfigError

# The modules every sweep lists, and the one listed only when the backend runs it.
CORE_MODULES = ("torch._dynamo.config", "torch._functorch.config")
INDUCTOR_MODULE = "torch._inductor.config"


def modules_for(backend: str) -> list[str]:
    """The config modules a sweep under `backend` lists."""
    return [*CORE_MODULES, *([INDUCTOR_MODULE] if backend == "inductor" else [])]


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)[:200]


def _default(entry: Any) -> Any:
    """The value a fresh interpreter reads when nobody set the key: the environment's, else the declared one."""
    from torch.utils._config_module import _UNSET_SENTINEL

    for value in (getattr(entry, "env_value_force", _UNSET_SENTINEL), getattr(entry, "env_value_default", _UNSET_SENTINEL)):
        if value is not _UNSET_SENTINEL:
            return value
    return entry.default


def list_here(modules: list[str]) -> dict[str, dict[str, Any]]:
    """{full key: {"type": name, "default": value}} of each module in this interpreter's torch (a config module
    this torch lacks: none). An interpreter without torch raises ImportError: an empty space would expand a named set
    to no flags at all."""
    import importlib

    import torch  # noqa: F401  -- first and uncaught: no torch is this interpreter's fault, not an empty space

    from harness.engine.keycheck import entry_type

    space: dict[str, dict[str, Any]] = {}
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for key, entry in dict.items(module.__dict__["_config"]):
            if getattr(entry, "alias", None) is not None or getattr(entry, "hide", False):
                continue
            space[f"{name}.{key}"] = {"type": entry_type(entry), "default": _plain(_default(entry)),
                                      "deprecated": bool(getattr(entry, "deprecated", False))}
    return space


def discover(backend: str, python: str | None = None) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """(modules listed, their entries) in `python`'s torch; ConfigError when it cannot be asked."""
    from harness.engine.interpreter import CallFailed, call

    modules = modules_for(backend)
    try:
        return modules, call("harness.engine.flags.space:list_here", modules, python=python, timeout=300)
    except CallFailed as exc:
        raise ConfigError(f"{exc.python}: cannot list its config space: {exc.why}") from None
