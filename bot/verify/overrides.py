"""The config fields a stored build sets away from its config class's defaults: what a person would write.

Runs in the torch under test (through harness.engine.interpreter.call, like every
question about transformers), never in the bot: the bot imports neither torch nor
transformers. The answer is plain data, {field: value}, with nested sub-configs as
dicts of their own overrides, checked by a round trip: `ConfigClass(**overrides)`
gives the stored config again (fields that differ after the round trip are added;
when it still differs, the whole stored config is the answer).
"""
from __future__ import annotations

from typing import Any

# Bookkeeping of a config's dict, not a model choice: never written out.
IGNORED = ("model_type", "transformers_version", "dtype", "torch_dtype", "architectures", "_name_or_path",
           "_attn_implementation_autoset", "output_attentions", "return_dict")
ROUNDS = 3


def _diff(target: dict[str, Any], default: dict[str, Any]) -> dict[str, Any]:
    """The fields of `target` that differ from `default` (sub-config dicts compared field by field)."""
    out: dict[str, Any] = {}
    for name, value in target.items():
        if name in IGNORED or (name in default and default[name] == value):
            continue
        base = default.get(name)
        if isinstance(value, dict) and isinstance(base, dict) and "model_type" in value:
            inner = _diff(value, base)
            if inner:
                out[name] = inner
        else:
            out[name] = value
    return out


def _merge(into: dict[str, Any], more: dict[str, Any], target: dict[str, Any]) -> None:
    """Add the fields of `more` to `into`, sub-config by sub-config (`target` tells a sub-config from a dict value)."""
    for name, value in more.items():
        sub = target.get(name)
        if isinstance(value, dict) and isinstance(into.get(name), dict) and isinstance(sub, dict) and "model_type" in sub:
            _merge(into[name], value, sub)
        else:
            into[name] = value


def overrides(config_class: str, config: dict[str, Any]) -> dict[str, Any]:
    """{field: value} to pass to `transformers.<config_class>(...)` so it equals the stored `config`."""
    import transformers

    transformers.logging.set_verbosity_error()
    cls = getattr(transformers, config_class)
    target = cls.from_dict(config).to_dict()
    found = _diff(target, cls().to_dict())
    for _ in range(ROUNDS):
        missing = _diff(target, cls(**found).to_dict())
        if not missing:
            return found
        _merge(found, missing, target)
    return {k: v for k, v in config.items() if k not in IGNORED}


def many(builds: list[list[Any]]) -> list[dict[str, Any]]:
    """overrides() of each [config_class, config] pair, in one interpreter (the line-count check over a corpus)."""
    return [overrides(config_class, config) for config_class, config in builds]
