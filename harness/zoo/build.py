"""Build one tiny model and its inputs: plan (config dict, recipe) -> module + inputs."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from harness.zoo import enumerate as enum_mod
from harness.zoo import registry
from harness.zoo.fingerprint import digest, zoo_code_version
from harness.zoo.fixups import (clip_feature_layers, code_default_mrope, code_token_ids, default_towers, rope_per_layer_type, fit_mrope, fit_pixel_shuffle, fit_vocab,
                                 missing_kv_heads, name_image_token, rederive, vocabulary_map, fit_pinpoints)
from harness.zoo.probe import probe_counts, repair_inputs, media_tokens
from harness.zoo.recipes import apply_config, recipe_for
from harness.zoo.shrink import shrink_dict
from harness.zoo.strata import stratum_of

SEED = 0
# Keys of to_dict() that are bookkeeping, not configuration.
DROP_KEYS = ("transformers_version", "architectures", "_name_or_path", "output_hidden_states", "torchscript")


class BuildError(Exception):
    """The model or its inputs could not be built; status is create_error or input_error."""

    def __init__(self, status: str, cause: str):
        super().__init__(f"{status}: {cause}")
        self.status = status
        self.cause = cause


@dataclass
class Built:
    """A tiny model ready to run: module (eval, on device), inputs (kwargs), and what it is."""

    module: Any
    inputs: dict
    text_only: bool = False
    fingerprint: str = ""
    stratum: str = ""
    spec: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)   # the config dict it was built from (what a reproducer embeds)


@dataclass
class Plan:
    """Everything that determines a build, as plain data (what the reproducer embeds)."""

    model: str
    config_class: str
    config: dict
    recipe: dict
    stratum: str


def quiet_transformers() -> None:
    """Silence transformers' config warnings (special ids out of the shrunk range are expected)."""
    import transformers

    transformers.logging.set_verbosity_error()


def _clean(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _clean(v) for k, v in d.items() if k not in DROP_KEYS}
    return d


@lru_cache(maxsize=None)
def plan(model: str) -> Plan:
    """The build plan for a candidate: shrunk config dict plus recipe; no weights."""
    quiet_transformers()
    try:
        cls = enum_mod.model_class(model)
    except KeyError:
        raise BuildError("create_error", f"unknown model class {model}") from None
    config_cls = cls.config_class
    try:
        base = config_cls()
        cfg = _clean(base.to_dict())
    except Exception as exc:
        raise BuildError("create_error", f"default config: {type(exc).__name__}: {str(exc)[:200]}") from None
    recipe = recipe_for(model, cfg.get("model_type"))
    shrunk = rederive(config_cls, cfg, shrink_dict(default_towers(config_cls, cfg)))
    cfg = apply_config(rope_per_layer_type(cls, code_token_ids(cls, code_default_mrope(cls, base, fit_pixel_shuffle(clip_feature_layers(fit_vocab(name_image_token(shrunk))))))), recipe)
    cfg = fit_pinpoints(vocabulary_map(cls, cfg))
    from harness.zoo.specs import forward_params

    return Plan(model, config_cls.__name__, cfg, recipe, stratum_of(base, forward_params(cls)))


def fingerprint(model: str) -> str:
    """The recipe fingerprint of a model: config, recipe, transformers version, zoo code."""
    import transformers

    if model in registry.EXTRA:
        return digest({"extra": model, "zoo": zoo_code_version()})
    p = plan(model)
    return digest({"model": model, "config": p.config, "recipe": p.recipe, "transformers": transformers.__version__, "zoo": zoo_code_version()})


def make_config(p: Plan) -> Any:
    """The transformers config object of a plan."""
    cls = enum_mod.model_class(p.model)
    try:
        return cls.config_class.from_dict(p.config)
    except Exception as exc:
        raise BuildError("create_error", f"shrunk config: {type(exc).__name__}: {str(exc)[:200]}") from None

def build(model: str, device: str = "cpu") -> Built:
    """Build the tiny model (eval, on device) and its inputs; BuildError on failure."""
    if model in registry.EXTRA:
        return registry.EXTRA[model][1](device)
    import torch

    from harness.zoo.inputs import make_inputs
    from harness.zoo.specs import make_spec

    p = plan(model)
    cls = enum_mod.model_class(model)
    cfg_dict = p.config
    for attempt in range(3):
        config = make_config(Plan(p.model, p.config_class, cfg_dict, p.recipe, p.stratum))
        torch.manual_seed(SEED)
        try:
            module = cls(config).float().eval().to(device)
        except Exception as exc:
            fixed = missing_kv_heads(cfg_dict, str(exc))
            if fixed is None:
                raise BuildError("create_error", f"{type(exc).__name__}: {str(exc)[:200]}") from None
            cfg_dict = fixed  # a key the code reads but the config class lacks: built once more with it
            continue
        fixed = fit_mrope(module, cfg_dict)
        if fixed is None:
            break
        cfg_dict = fixed  # built once more with sections that fit (deterministic: same seed)
    try:
        spec, text_only = make_spec(cls, config, cfg_dict, p.stratum, p.recipe.get("inputs"))
        spec = repair_inputs(module, spec, device)
        counted = probe_counts(module, spec, media_tokens(config), device)
        if counted != spec:
            # once one medium's tokens are counted the forward gets further: repair and count what follows
            # (Gemma 4: its audio features are repaired only after its image tokens are in place)
            counted = probe_counts(module, repair_inputs(module, counted, device), media_tokens(config), device)
        spec = counted
        inputs = make_inputs(spec, SEED, device)
    except BuildError:
        raise
    except Exception as exc:
        raise BuildError("input_error", f"{type(exc).__name__}: {str(exc)[:200]}") from None
    return Built(module, inputs, text_only, fingerprint(model), p.stratum, spec, cfg_dict)
