"""Config fix-ups after the generic shrink: media token ids, vocabulary size, M-RoPE sections.

Each one restores a relation that the shrink or the default config broke, by a
rule (never per family): ids that sit past the vocabulary, rotary sections that
live only as a code default, sections that must sum to the built rotary's size.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

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



def fit_mrope(module: Any, cfg: dict) -> dict | None:
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


def clip_feature_layers(cfg: dict) -> dict:
    """Vision feature layer indices (LLaVA family, -2 or [-2, -5, -8, -11, 6]) clipped to the shrunk tower's depth."""
    vision = cfg.get("vision_config")
    n = vision.get("num_hidden_layers") if isinstance(vision, dict) else None
    if not isinstance(n, int) or n <= 0:
        return cfg

    def clip(x: Any) -> Any:
        if not isinstance(x, int) or isinstance(x, bool):
            return x
        return max(x, -(n + 1)) if x < 0 else min(x, n)

    out = dict(cfg)
    for key in ("vision_feature_layer", "vision_feature_layers"):
        value = cfg.get(key)
        if isinstance(value, list):
            out[key] = [clip(x) for x in value]
        elif isinstance(value, int):
            out[key] = clip(value)
    return out


def fit_pixel_shuffle(cfg: dict) -> dict:
    """A pixel shuffle folds scale_factor x scale_factor patches: make the patch grid's side divisible by it."""
    sf = next((cfg[k] for k in ("scale_factor", "pixel_shuffle_factor") if isinstance(cfg.get(k), int)), None)
    vision = cfg.get("vision_config")
    if isinstance(sf, int) and "image_size" in cfg and "patch_size" in cfg and not isinstance(vision, dict):
        return fit_pixel_shuffle({"scale_factor": sf, "vision_config": cfg})["vision_config"]  # a tower on its own
    if isinstance(vision, dict) and sf is None and isinstance(vision.get("scale_factor"), int):
        sf = vision["scale_factor"]  # the shuffle's factor kept in the tower's config (Granite Docling)
    if not isinstance(sf, int) or sf < 2 or not isinstance(vision, dict):
        return cfg
    size, patch = vision.get("image_size"), vision.get("patch_size")
    if not isinstance(size, int) or not isinstance(patch, int) or (size // patch) % sf == 0:
        return cfg
    side = -(-(size // patch) // sf) * sf
    return {**cfg, "vision_config": {**vision, "image_size": side * patch}}


_CODE_TOKEN = re.compile(r"self\.config\.(\w+_token_id)\b(?!\s*=[^=])")


def code_token_ids(cls: type, cfg: dict) -> dict:
    """Token ids the modeling code reads straight off the config but the config class never defines
    (checkpoints add them, e.g. a thinker's vision_start_token_id): unused ids from the top of the vocabulary."""
    import inspect

    try:
        source = Path(inspect.getsourcefile(cls) or "").read_text()
    except (OSError, TypeError):
        return cfg
    missing = sorted({k for k in _CODE_TOKEN.findall(source) if k not in cfg} - {k for v in cfg.values() if isinstance(v, dict) for k in v})
    text = next((cfg[k] for k in ("text_config", "language_config", "llm_config") if isinstance(cfg.get(k), dict)), cfg)
    if not missing or not isinstance(text.get("vocab_size"), int):
        return cfg
    from harness.zoo.specs import special_ids

    used, out, tid = special_ids(cfg), dict(cfg), text["vocab_size"] - 1
    for key in missing:
        while tid in used:
            tid -= 1
        out[key], tid = tid, tid - 1
    return out


def rope_per_layer_type(cls: type, cfg: dict) -> dict:
    """Rotary tables keyed by layer type that the default leaves empty ({}) while the modeling code
    looks each layer type up (checkpoints fill them): a default rotary for every layer type."""
    import inspect

    try:
        source = Path(inspect.getsourcefile(cls) or "").read_text()
    except (OSError, TypeError):
        return cfg
    if "rope_parameters[layer_type]" not in source:
        return cfg

    def fill(c: dict) -> dict:
        if c.get("rope_parameters") == {} and isinstance(c.get("layer_types"), list):
            default = {"rope_type": "default", "rope_theta": 10000.0}
            return {**c, "rope_parameters": {t: dict(default) for t in dict.fromkeys(c["layer_types"])}}
        return c

    out = fill(cfg)
    return {k: fill(v) if isinstance(v, dict) else v for k, v in out.items()}


MEDIA_TOWERS = ("vision_config",)  # audio towers stay as the default has them (Gemma 4 audio wants 128 mel bins its config never names)


def default_towers(config_cls: type, cfg: dict) -> dict:
    """Media towers a default config leaves None (Gemma 4: checkpoints bring them): the tower config
    class's own default, so a multimodal model is built with the towers its forward takes media for."""
    subs = getattr(config_cls, "sub_configs", None) or {}
    specs = getattr(config_cls, "sub_configs_defaults", None) or {}
    out = dict(cfg)
    for key in MEDIA_TOWERS:
        tower = subs.get(key)
        named = getattr(specs.get(key), "model_type", None)
        if named and not getattr(tower, "model_type", ""):  # an AutoConfig slot that names its tower's model_type
            from transformers import CONFIG_MAPPING

            tower = CONFIG_MAPPING[named] if named in CONFIG_MAPPING else None
        if key in cfg and cfg[key] is None and tower is not None and getattr(tower, "model_type", "") not in ("", None):
            try:
                out[key] = {k: v for k, v in tower().to_dict().items() if k not in ("transformers_version", "architectures", "_name_or_path")}
            except Exception:
                continue  # a tower that has no usable default stays off
    return out
