"""Discovery: today's shrink, fix-ups, recipes and probing, run only by `flagsweep zoo lock`.

Sweeps never come here: they build from the lock entry (harness/zoo/build.py).
discover() returns the plain data a lock entry holds: the final config as
built, the input spec as probed, and the names of what was applied.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from harness.discovery import caps as caps_mod, enumerate as enum_mod
from harness.zoo.build import SEED, config_class_of, quiet_transformers
from harness.zoo.errors import BuildError
from harness.discovery.fixups import (clip_feature_layers, code_default_mrope, code_token_ids, default_towers, fit_mrope,
                                fit_pinpoints, fit_pixel_shuffle, fit_vocab, known_kwargs, missing_kv_heads,
                                name_image_token, rederive, respect_validator, rope_per_layer_type, vocabulary_map)
from harness.discovery.probe import media_tokens, probe_counts, repair_inputs
from harness.discovery.recipes import apply_config, recipe_for
from harness.discovery.shrink import shrink_dict
from harness.discovery.strata import stratum_of

# Keys of to_dict() that are bookkeeping, not configuration.
DROP_KEYS = ("transformers_version", "architectures", "_name_or_path", "output_hidden_states", "torchscript")


@dataclass
class Plan:
    """Everything that determines a build before probing, as plain data."""

    model: str
    config_class: str
    config: dict
    recipe: dict
    stratum: str
    fixups: list[str] = field(default_factory=list)


@dataclass
class Discovered:
    """What discovery found for one class: the data of its lock entry (status ok) or why it failed."""

    model: str
    config_class: str
    stratum: str
    config: dict
    spec: dict
    text_only: bool
    recipes: list[str]
    fixups: list[str]
    repairs: list[str]


def _clean(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _clean(v) for k, v in d.items() if k not in DROP_KEYS}
    return d


def _fixup_chain(cls: type, base: Any) -> list[tuple[str, Callable[[dict], dict]]]:
    """The config fix-ups in the order they apply, by name (a name is recorded when it changes the config)."""
    return [
        ("name_image_token", name_image_token), ("fit_vocab", fit_vocab),
        ("clip_feature_layers", clip_feature_layers), ("fit_pixel_shuffle", fit_pixel_shuffle),
        ("code_default_mrope", lambda c: code_default_mrope(cls, base, c)),
        ("code_token_ids", lambda c: code_token_ids(cls, c)),
        ("rope_per_layer_type", lambda c: rope_per_layer_type(cls, c)),
    ]


@lru_cache(maxsize=None)
def plan(model: str, caps: tuple[str, ...] = caps_mod.CAPS) -> Plan:
    """The build plan for a candidate: shrunk config dict (with the named caps) plus recipe; no weights."""
    quiet_transformers()
    try:
        cls = enum_mod.model_class(model)
    except KeyError:
        raise BuildError("create_error", f"unknown model class {model}") from None
    config_cls = config_class_of(cls)
    try:
        base = config_cls()
        cfg = _clean(base.to_dict())
    except Exception as exc:
        raise BuildError("create_error", f"default config: {type(exc).__name__}: {str(exc)[:200]}") from None
    recipe = recipe_for(model, cfg.get("model_type"))
    applied: list[str] = []
    towers = default_towers(config_cls, cfg)
    applied += ["default_towers"] if towers != cfg else []
    shrunk = rederive(config_cls, cfg, shrink_dict(towers))
    valid = respect_validator(config_cls, towers, shrunk)
    applied += ["respect_validator"] if valid != shrunk else []
    shrunk = valid
    for name, fix in _fixup_chain(cls, base):
        fixed = fix(shrunk)
        applied += [name] if fixed != shrunk else []
        shrunk = fixed
    cfg = caps_mod.apply(apply_config(shrunk, recipe), caps, config_cls)
    for name, fix in (("vocabulary_map", lambda c: vocabulary_map(cls, c)), ("fit_pinpoints", fit_pinpoints),
                      ("known_kwargs", lambda c: known_kwargs(config_cls, c))):
        fixed = fix(cfg)
        applied += [name] if fixed != cfg else []
        cfg = fixed
    from harness.discovery.specs import forward_params

    return Plan(model, config_cls.__name__, cfg, recipe, stratum_of(base, forward_params(cls)), applied)


def recipe_names(model: str, model_type: str | None) -> list[str]:
    """The recipes.toml sections that apply to a class (its model_type's, then its own)."""
    from harness.discovery.recipes import load_recipes

    recipes = load_recipes()
    return [key for key in dict.fromkeys((model_type, model)) if key and key in recipes]


def _module(cls: type, p: Plan, fixups: list[str]) -> tuple[Any, Any, dict]:
    """The module built from the plan, re-built with config repairs the build itself asks for."""
    import torch

    cfg_dict = p.config
    for _ in range(3):
        try:
            config = config_class_of(cls).from_dict(cfg_dict)
        except Exception as exc:
            raise BuildError("create_error", f"shrunk config: {type(exc).__name__}: {str(exc)[:200]}") from None
        torch.manual_seed(SEED)
        try:
            module = cls(config).float().eval()
        except Exception as exc:
            fixed = missing_kv_heads(cfg_dict, str(exc))
            if fixed is None:
                raise BuildError("create_error", f"{type(exc).__name__}: {str(exc)[:200]}") from None
            cfg_dict = fixed
            fixups.append("missing_kv_heads")
            continue
        fixed = fit_mrope(module, cfg_dict)
        if fixed is None:
            return module, config, cfg_dict
        cfg_dict = fixed  # built once more with sections that fit
        fixups.append("fit_mrope")
    return module, config, cfg_dict


def _probe(module: Any, config: Any, spec: dict, repairs: list[str], evidence: list[dict] | None) -> dict:
    """The spec after input repairs and media-token counting, by eager forwards on CPU."""
    spec = repair_inputs(module, spec, "cpu", repairs, evidence)
    counted = probe_counts(module, spec, media_tokens(config), "cpu")
    if counted != spec:
        repairs.append("probe_counts")
        # once one medium's tokens are counted the forward gets further: repair and count what follows
        # (Gemma 4: its audio features are repaired only after its image tokens are in place)
        counted = probe_counts(module, repair_inputs(module, counted, "cpu", repairs, evidence), media_tokens(config), "cpu")
    return counted


def discover(model: str, evidence: list[dict] | None = None, caps: tuple[str, ...] = caps_mod.CAPS) -> Discovered:
    """Run discovery for one class on CPU (with the named caps): the data of its lock entry; BuildError on failure.

    evidence: where each input repair made records the error text it handled (see probe.repair_inputs).
    """
    from harness.discovery.specs import make_spec

    p = plan(model, caps)
    cls = enum_mod.model_class(model)
    fixups = list(p.fixups)
    try:
        config = config_class_of(cls).from_dict(p.config)
    except Exception as exc:
        raise BuildError("create_error", f"shrunk config: {type(exc).__name__}: {str(exc)[:200]}") from None
    module, config, cfg_dict = _module(cls, p, fixups)
    repairs: list[str] = []
    try:
        spec, text_only = make_spec(cls, config, cfg_dict, p.stratum, p.recipe.get("inputs"))
        spec = _probe(module, config, spec, repairs, evidence)
    except BuildError:
        raise
    except Exception as exc:
        raise BuildError("input_error", f"{type(exc).__name__}: {str(exc)[:200]}") from None
    return Discovered(model, p.config_class, p.stratum, cfg_dict, spec, bool(text_only),
                      recipe_names(model, p.config.get("model_type")), fixups, repairs)
