"""Build one tiny model and its inputs: plan (config dict, recipe) -> module + inputs."""
from __future__ import annotations

import re
from pathlib import Path

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from harness.zoo import enumerate as enum_mod
from harness.zoo import registry
from harness.zoo.fingerprint import digest, zoo_code_version
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


MEDIA_TOKEN_KEYS = ("image_token_id", "image_token_index", "video_token_id", "video_token_index", "audio_token_id",
                    "audio_token_index", "vision_start_token_id", "vision_end_token_id", "boi_token_id", "eoi_token_id",
                    "boa_token_id", "eoa_token_id", "image_start_token_id", "image_end_token_id")


def name_image_token(cfg: dict) -> dict:
    """Placeholder media tokens where the default leaves them None (checkpoints add them): the last text ids."""
    text = next((cfg[k] for k in ("text_config", "language_config", "llm_config") if isinstance(cfg.get(k), dict)), cfg)
    if not isinstance(text.get("vocab_size"), int):
        return cfg
    out, next_id = dict(cfg), text["vocab_size"] - 1
    groups = (("image_token_index", "image_token_id"), ("audio_token_id", "audio_token_index"))
    if not any(k in cfg for k in groups[0]):
        groups = (("video_token_index", "video_token_id"),) + groups[1:]
    for keys in groups:
        for key in keys:
            if key in out and out[key] is None:
                out[key], next_id = next_id, next_id - 1
                break
    return out


def fit_vocab(cfg: dict) -> dict:
    """Grow text vocabularies so that media token ids are real embeddings (defaults often sit one past vocab_size)."""
    need = max((v for k, v in cfg.items() if k in MEDIA_TOKEN_KEYS and isinstance(v, int) and not isinstance(v, bool)), default=-1)
    for key in ("text_config", "language_config", "llm_config", "lm_config"):
        sub = cfg.get(key)
        if isinstance(sub, dict) and isinstance(sub.get("vocab_size"), int) and need >= sub["vocab_size"]:
            cfg = {**cfg, key: {**sub, "vocab_size": need + 1}}
    if isinstance(cfg.get("vocab_size"), int) and need >= cfg["vocab_size"]:
        cfg = {**cfg, "vocab_size": need + 1}
    return cfg


_MROPE_DEFAULT = re.compile(r"""mrope_section["']\s*,\s*\[([\d,\s]+)\]""")


def _head_dim(c: Any) -> int | None:
    get = c.get if isinstance(c, dict) else (lambda k, d=None: getattr(c, k, d))
    if isinstance(get("head_dim"), int):
        return get("head_dim")
    width, heads = get("hidden_size"), get("num_attention_heads")
    return width // heads if isinstance(width, int) and isinstance(heads, int) and heads else None


def code_default_mrope(cls: type, base: Any, cfg: dict) -> dict:
    """M-RoPE sections that live only as a default in the modeling code ([16, 24, 24] for a 128 head):
    write them into the config, scaled to the shrunk head, so they still sum to its rotary half."""
    import inspect

    try:
        source = Path(inspect.getsourcefile(cls) or "").read_text()
    except (OSError, TypeError):
        return cfg
    m = _MROPE_DEFAULT.search(source)
    if not m:
        return cfg
    default = [int(x) for x in m.group(1).split(",") if x.strip()]
    key = "text_config" if isinstance(cfg.get("text_config"), dict) else None
    text = cfg[key] if key else cfg
    base_text = getattr(base, "text_config", None) if key else base
    rope = text.get("rope_parameters")
    old, new = _head_dim(base_text), _head_dim(text)
    if not isinstance(rope, dict) or not rope or "mrope_section" in rope or not old or not new \
            or any(isinstance(v, dict) for v in rope.values()):  # per-layer-type rope tables are left alone
        return cfg
    from harness.zoo.shrink import _scale_sections

    half = max(len(default), sum(default) * new // old)
    base_rope = {} if rope.get("rope_type") else {"rope_type": "default", "rope_theta": 10000.0}
    text = {**text, "rope_parameters": {**base_rope, **rope, "mrope_section": _scale_sections(default, half)}}
    return {**cfg, key: text} if key else text


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
    cfg = apply_config(code_default_mrope(cls, base, fit_vocab(name_image_token(shrink_dict(cfg)))), recipe)
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


def _capture_feature_tokens(module: Any) -> tuple[dict, list]:
    """Wrap every get_placeholder_mask so a probe forward records how many feature tokens each medium produced."""
    import inspect

    seen: dict[str, int] = {}
    undo = []
    for sub in [module, *module.modules()]:
        fn = getattr(sub, "get_placeholder_mask", None)
        if fn is None or "get_placeholder_mask" in vars(sub):
            continue
        names = list(inspect.signature(fn).parameters)

        def wrapper(*args: Any, _fn: Any = fn, _names: list = names, **kwargs: Any) -> Any:
            bound = {**dict(zip(_names, args)), **kwargs}
            embeds = bound.get("inputs_embeds")
            for key, feats in bound.items():
                if key.endswith("_features") and embeds is not None and hasattr(feats, "numel"):
                    seen.setdefault(key.split("_")[0], int(feats.numel()) // int(embeds.shape[-1]))
            return _fn(*args, **kwargs)

        sub.get_placeholder_mask = wrapper
        undo.append(sub)
    return seen, undo


_MISMATCH = re.compile(r"(image|audio|video)\w* features and \w+ tokens do not match.*?features:?\s*(\d+)", re.I | re.S)


def _probe_counts(module: Any, spec: dict, media: dict[int, str], device: str) -> dict:
    """Fill in unknown media-token counts by one eager forward: the model says how many features it made."""
    import torch

    from harness.zoo.inputs import make_inputs
    from harness.zoo.specs import BATCH

    ids = spec.get("input_ids", {})
    prefix = ids.get("prefix") or []
    if not any(count == 0 for _, count in prefix):
        return spec
    seen, undo = _capture_feature_tokens(module)
    # probe with two adjacent placeholders per medium: some models take a lone placeholder
    # for the legacy "expand me" form and then never say how many features they made
    trial = _grow(spec, {tid: 2 for tid, count in prefix if count == 0})
    try:
        with torch.no_grad():
            module(**make_inputs(trial, SEED, device))
    except Exception as exc:
        m = _MISMATCH.search(str(exc))
        if m:  # models that merge media by hand say the count in their error
            seen.setdefault(m.group(1).lower(), int(m.group(2)))
    finally:
        for sub in undo:
            del sub.get_placeholder_mask
    counts = {tid: seen[media[tid]] // BATCH for tid, count in prefix if count == 0 and media.get(tid) in seen}
    if not counts:
        return spec
    return _grow(spec, counts)


def _grow(spec: dict, counts: dict[int, int]) -> dict:
    """spec with the zero-count placeholders of `counts` set to their counts, every per-token input grown to match."""
    ids = spec["input_ids"]
    grow = sum(counts.values())
    spec = dict(spec)
    for key in ("input_ids", "attention_mask", "mm_token_type_ids", "token_type_ids"):
        if key in spec:
            item = dict(spec[key])
            item["shape"] = [item["shape"][0], item["shape"][1] + grow]
            spec[key] = item
    spec["input_ids"]["prefix"] = [[tid, counts.get(tid, count) if count == 0 else count] for tid, count in ids["prefix"]]
    if "prefix" in spec.get("mm_token_type_ids", {}):
        spec["mm_token_type_ids"]["prefix"] = [[v, n] for (v, _), (_, n) in zip(spec["mm_token_type_ids"]["prefix"], spec["input_ids"]["prefix"])]
    return spec


def _add_image_axis(spec: dict) -> dict | None:
    """(B, C, H, W) -> (B, 1, C, H, W): models that take several images per sample."""
    pix = spec.get("pixel_values")
    if not pix or len(pix["shape"]) != 4:
        return None
    b, c, h, w = pix["shape"]
    return {**spec, "pixel_values": {**pix, "shape": [b, 1, c, h, w]}}


def _add_image_sizes(spec: dict) -> dict | None:
    """Give (height, width) per image: any-resolution models need it though the argument is optional."""
    pix = spec.get("pixel_values")
    if not pix or "image_sizes" in spec:
        return None
    h, w = pix["shape"][-2:]
    return {**spec, "image_sizes": {"kind": "tensor", "value": [[h, w]] * pix["shape"][0]}}


def _features_last(spec: dict) -> dict | None:
    """(B, mel, frames) -> (B, frames, mel): speech encoders that project each frame's features."""
    feats = spec.get("input_features")
    if not feats or len(feats["shape"]) != 3:
        return None
    b, mel, frames = feats["shape"]
    return {**spec, "input_features": {**feats, "shape": [b, frames, mel]}}


def _mono_channel(spec: dict) -> dict | None:
    """(B, T) -> (B, 1, T): audio codecs convolve over a channel axis."""
    vals = spec.get("input_values")
    if not vals or len(vals["shape"]) != 2:
        return None
    return {**spec, "input_values": {**vals, "shape": [vals["shape"][0], 1, vals["shape"][1]]}}


_SPLIT = re.compile(r"split_sizes to sum exactly to \d+ \(input tensor's size at dimension 0\), but got split_sizes=\[(\d+)")


def _patches_per_image(spec: dict, error: str) -> dict | None:
    """(B, C, H, W) -> (B, n, C, H, W): any-resolution models (LLaVA-NeXT) cut each image into n tiles."""
    pix, m = spec.get("pixel_values"), _SPLIT.search(error)
    if not pix or not m or len(pix["shape"]) != 4:
        return None
    b, c, h, w = pix["shape"]
    return {**spec, "pixel_values": {**pix, "shape": [b, int(m.group(1)), c, h, w]}}


def _patches_as_images(spec: dict) -> dict | None:
    """Flattened patches (N, C*p*p) -> (N, C, p, p): grid-style towers that convolve each patch."""
    key = next((k for k in ("pixel_values", "hidden_states") if k in spec and len(spec[k]["shape"]) == 2), None)
    if key is None:
        return None
    n, d = spec[key]["shape"]
    p = int(round((d / 3) ** 0.5))
    if 3 * p * p != d:
        return None
    return {**spec, key: {**spec[key], "shape": [n, 3, p, p]}}


_MATMUL = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x\d+\)")


def _patch_width(spec: dict, error: str) -> dict | None:
    """Flattened patches of the width the patch embedding wants (a temporal axis of 1 or 2 is not in every config)."""
    m = _MATMUL.search(error)
    key = next((k for k in ("pixel_values", "hidden_states") if k in spec and len(spec[k]["shape"]) == 2), None)
    if not m or key is None:
        return None
    rows, width, want = (int(g) for g in m.groups())
    n, d = spec[key]["shape"]
    if (rows, width) != (n, d) or want == d or (n * d) % want:
        return None
    return {**spec, key: {**spec[key], "shape": [n, want]}}


# (what the model's own error says, how the inputs change): tried once each, in order.
INPUT_REPAIRS = (
    (re.compile(r"expected 5, got 4"), _add_image_axis),
    (re.compile(r"'NoneType' object is not (iterable|subscriptable)|has no len|image_sizes"), _add_image_sizes),
    (re.compile(r"mat1 and mat2 shapes cannot be multiplied|normalized_shape|Expected \d+D|to have \d+ channels"), _features_last),
    (re.compile(r"to have 1 channels|expected 3, got 2|Expected 3D"), _mono_channel),
    (_SPLIT, _patches_per_image),
    (_MATMUL, _patch_width),
    (re.compile(r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d"), _patches_as_images),
)


def _repair_inputs(module: Any, spec: dict, device: str) -> dict:
    """One eager forward; if it fails with an error an input repair knows, apply it and try again."""
    if not any(k in spec for k in ("pixel_values", "input_features", "input_values")):
        return spec  # the repairs are about images and audio features; text models skip the extra forward
    import torch

    from harness.zoo.inputs import make_inputs

    used = set()
    for _ in range(len(INPUT_REPAIRS)):
        try:
            with torch.no_grad():
                module(**make_inputs(spec, SEED, device))
            return spec
        except Exception as exc:
            new = None
            for pattern, fix in INPUT_REPAIRS:
                if fix in used or not pattern.search(str(exc)):
                    continue
                new = fix(spec, str(exc)) if fix.__code__.co_argcount == 2 else fix(spec)
                if new is not None:
                    used.add(fix)
                    break
            if new is None:
                return spec
            spec = new
    return spec


def media_tokens(config: Any) -> dict[int, str]:
    """Token id -> medium ("image", "audio", "video") for the placeholder tokens a config names."""
    out = {}
    for medium in ("image", "audio", "video"):
        for key in (f"{medium}_token_id", f"{medium}_token_index"):
            tid = getattr(config, key, None)
            if isinstance(tid, int) and not isinstance(tid, bool):
                out.setdefault(tid, medium)
    return out


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
    for attempt in range(2):
        config = make_config(Plan(p.model, p.config_class, cfg_dict, p.recipe, p.stratum))
        torch.manual_seed(SEED)
        try:
            module = cls(config).float().eval().to(device)
        except Exception as exc:
            raise BuildError("create_error", f"{type(exc).__name__}: {str(exc)[:200]}") from None
        fixed = _fit_mrope(module, cfg_dict)
        if fixed is None:
            break
        cfg_dict = fixed  # built once more with sections that fit (deterministic: same seed)
    try:
        spec, text_only = make_spec(cls, config, cfg_dict, p.stratum, p.recipe.get("inputs"))
        spec = _repair_inputs(module, spec, device)
        spec = _probe_counts(module, spec, media_tokens(config), device)
        inputs = make_inputs(spec, SEED, device)
    except BuildError:
        raise
    except Exception as exc:
        raise BuildError("input_error", f"{type(exc).__name__}: {str(exc)[:200]}") from None
    return Built(module, inputs, text_only, fingerprint(model), p.stratum, spec, cfg_dict)


def _fit_mrope(module: Any, cfg: dict) -> dict | None:
    """If a rotary module's M-RoPE sections do not sum to its frequency count, a config dict whose sections do."""
    from harness.zoo.shrink import _scale_sections

    for sub in module.modules():
        sections, inv_freq = getattr(sub, "mrope_section", None), getattr(sub, "inv_freq", None)
        if isinstance(sections, list) and inv_freq is not None and sum(sections) != inv_freq.shape[-1]:
            new = _scale_sections(sections, int(inv_freq.shape[-1]))
            key = "text_config" if isinstance(cfg.get("text_config"), dict) else None
            text = cfg[key] if key else cfg
            rope = dict(text.get("rope_parameters") or {})
            if any(isinstance(v, dict) for v in rope.values()):
                return None
            if not rope.get("rope_type"):
                rope = {"rope_type": "default", "rope_theta": 10000.0, **rope}
            rope["mrope_section"] = new
            text = {**text, "rope_parameters": rope}
            return {**cfg, key: text} if key else text
    return None
