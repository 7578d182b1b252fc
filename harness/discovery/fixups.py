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
    # a config with a text_vocab_size keeps its media ids there; its vocab_size counts codebook entries (CSM)
    key = "text_vocab_size" if isinstance(cfg.get("text_vocab_size"), int) else "vocab_size"
    if isinstance(cfg.get(key), int) and need >= cfg[key]:
        cfg = {**cfg, key: need + 1}
    return cfg


_MROPE_DEFAULT = re.compile(r"""mrope_section["']\s*,\s*\[([\d,\s]+)\]""")
_MROPE_READ = re.compile(r"""\[["']mrope_section["']\]""")
MROPE_SPLIT = [16, 24, 24]   # time, height, width of a 128 head's rotary half: the split Qwen2-VL's checkpoints bring


def _head_dim(c: Any) -> int | None:
    get = c.get if isinstance(c, dict) else (lambda k, d=None: getattr(c, k, d))
    if isinstance(get("head_dim"), int):
        return get("head_dim")
    width, heads = get("hidden_size"), get("num_attention_heads")
    return width // heads if isinstance(width, int) and isinstance(heads, int) and heads else None


def code_default_mrope(cls: type, base: Any, cfg: dict) -> dict:
    """M-RoPE sections that live only as a default in the modeling code ([16, 24, 24] for a 128 head), or that
    the code reads from the config while neither the config nor the code has them (Qwen2.5-Omni on 5.10:
    checkpoints bring them; then Qwen2-VL's split): write them into the config, scaled to the shrunk head, so
    they still sum to its rotary half."""
    import inspect

    try:
        source = Path(inspect.getsourcefile(cls) or "").read_text()
    except (OSError, TypeError):
        return cfg
    m = _MROPE_DEFAULT.search(source)
    if not m and not _MROPE_READ.search(source):
        return cfg
    default = [int(x) for x in m.group(1).split(",") if x.strip()] if m else MROPE_SPLIT
    key = "text_config" if isinstance(cfg.get("text_config"), dict) else None
    text = cfg[key] if key else cfg
    base_text = getattr(base, "text_config", None) if key else base
    rope = text.get("rope_parameters")
    old, new = _head_dim(base_text), _head_dim(text)
    if not isinstance(rope, dict) or not rope or "mrope_section" in rope or not old or not new \
            or any(isinstance(v, dict) for v in rope.values()):  # per-layer-type rope tables are left alone
        return cfg
    from harness.discovery.shrink import _scale_sections

    half = max(len(default), sum(default) * new // old)
    base_rope = {} if rope.get("rope_type") else {"rope_type": "default", "rope_theta": 10000.0}
    text = {**text, "rope_parameters": {**base_rope, **rope, "mrope_section": _scale_sections(default, half)}}
    return {**cfg, key: text} if key else text



def fit_mrope(module: Any, cfg: dict) -> dict | None:
    """If a rotary module's M-RoPE sections do not sum to its frequency count, a config dict whose sections do."""
    from harness.discovery.shrink import _scale_sections

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

    def clip_layer(x: Any) -> Any:  # an index into the layers themselves (validated as -n <= x < n)
        return x if not isinstance(x, int) or isinstance(x, bool) else max(-n, min(clip(x), n - 1))

    def clip_in(d: dict, fn: Any) -> dict:
        out = dict(d)
        for key in ("vision_feature_layer", "vision_feature_layers"):
            value = d.get(key)
            if isinstance(value, list):
                out[key] = [fn(x) for x in value]
            elif isinstance(value, int):
                out[key] = fn(value)
        return out

    out = clip_in(cfg, clip)
    # the indices may sit in a sibling adapter's config (Molmo 2), which indexes the tower's layers
    return {k: clip_in(v, clip_layer) if isinstance(v, dict) and k != "vision_config" else v for k, v in out.items()}


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
    from harness.discovery.specs import special_ids

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


def rederive(config_cls: type, orig: dict, cfg: dict) -> dict:
    """Attributes a config derives in its post-init but also serialises (Zamba2's mamba_headdim from the width):
    from_dict would set the stale copy back over the derivation, so where the shrink left one unchanged
    it takes the value the config derives from the shrunk dict."""
    import dataclasses

    if not dataclasses.is_dataclass(config_cls):
        return cfg
    fields = {f.name for f in dataclasses.fields(config_cls)}
    stale = [k for k, v in cfg.items() if k not in fields and isinstance(v, int) and not isinstance(v, bool) and orig.get(k) == v]
    if not stale:
        return cfg
    try:
        derived = config_cls.from_dict({k: v for k, v in cfg.items() if k not in stale})
    except Exception:
        return cfg

    def fresh(k: str, v: Any) -> Any:
        """The derived value of a stale attribute, else the value as it is."""
        new = getattr(derived, k, None)
        # a derivation that comes out 0 on the shrunk depth (Switch's sparse step: no sparse layer) is not taken
        return new if k in stale and isinstance(new, int) and not isinstance(new, bool) and new > 0 else v

    return {k: fresh(k, v) for k, v in cfg.items()}


_VOCAB_GET = re.compile(r"""vocab_map\.get\(["']([^"']+)["']\)""")
_VOCAB_PREFIX = re.compile(r"""vocab_map\.items\(\)[^\n]*startswith\(["']([^"']+)["']\)""")
CODEBOOK = 512  # codes of a VQ image tokenizer: each one needs its own named token in the map


def vocabulary_map(cls: type, cfg: dict) -> dict:
    """A tokenizer vocabulary map where the default leaves it None (checkpoints take it from their tokenizer):
    the names the modeling code looks up (<image>, end of line) and one image token per VQ code, at the top
    of the text vocabulary, named with the prefix the code filters on."""
    import inspect

    if "vocabulary_map" not in cfg or cfg["vocabulary_map"] is not None:
        return cfg
    try:
        source = Path(inspect.getsourcefile(cls) or "").read_text()
    except (OSError, TypeError):
        return cfg
    prefix = _VOCAB_PREFIX.search(source)
    vq_key = next((k for k, v in cfg.items() if isinstance(v, dict) and any(isinstance(v.get(c), int) for c in ("num_embeddings", "codebook_size"))), None)
    text = next((cfg[k] for k in ("text_config", "language_config") if isinstance(cfg.get(k), dict)), cfg)
    if not prefix or vq_key is None or not isinstance(text.get("vocab_size"), int):
        return cfg
    vq = dict(cfg[vq_key])
    size_key = "num_embeddings" if isinstance(vq.get("num_embeddings"), int) else "codebook_size"
    vq[size_key] = n = min(vq[size_key], CODEBOOK)
    tid = text["vocab_size"] - 1
    vocab: dict[str, int] = {}
    for name in dict.fromkeys(_VOCAB_GET.findall(source)):
        vocab[name] = cfg.get("image_token_id") if name == "<image>" and isinstance(cfg.get("image_token_id"), int) else tid
        tid = min(tid, vocab[name]) - 1
    # code i is named prefix + "%06d" + " >": one name both decoders read back (Chameleon ints name[len(prefix):-1],
    # whitespace allowed; Emu3 ints name[-8:-2])
    for i in range(n):
        vocab[f"{prefix.group(1)}{i:06d} >"] = tid - n + 1 + i
    return {**cfg, vq_key: vq, "vocabulary_map": vocab}


def fit_pinpoints(cfg: dict) -> dict:
    """Any-resolution grids (LLaVA-NeXT family) are whole tiles of the vision tower's image size: pinpoints
    written for another tile (336 while the tower is 224 or 256) are rescaled to whole tiles of the tower."""
    import math

    points, vision = cfg.get("image_grid_pinpoints"), cfg.get("vision_config")
    tile = vision.get("image_size") if isinstance(vision, dict) else None
    if not isinstance(points, list) or not points or not isinstance(tile, int) \
            or not all(isinstance(p, list) and all(isinstance(x, int) and x > 0 for x in p) for p in points):
        return cfg
    unit = math.gcd(*(x for p in points for x in p))
    if unit == tile or unit % tile == 0:
        return cfg
    return {**cfg, "image_grid_pinpoints": [[x // unit * tile for x in p] for p in points]}


_NO_ATTR = re.compile(r"object has no attribute '(num_key_value_heads)'")


def missing_kv_heads(cfg: dict, error: str) -> dict | None:
    """Key-value heads where the modeling code reads them off a config class that never defines them
    (checkpoints carry the key; MoonshineStreaming's decoder): as many as the query heads."""
    m = _NO_ATTR.search(error)
    if not m or m.group(1) in cfg or not isinstance(cfg.get("num_attention_heads"), int):
        return None
    return {**cfg, m.group(1): cfg["num_attention_heads"]}


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


def _accepts(config_cls: type, cfg: dict) -> bool:
    """True when the config class builds from cfg (its own validators, post-init checks included)."""
    try:
        config_cls.from_dict(cfg)
    except Exception:
        return False
    return True


_UNKNOWN_KWARGS = re.compile(r"Found unknown kwargs=\{([^}]*)\}")


def known_kwargs(config_cls: type, cfg: dict) -> dict:
    """Keys a sub-config's to_dict writes but its own from_dict refuses (Dbrx's attn_config on transformers 5.18:
    "Found unknown kwargs={'output_attentions': False}"): dropped from the sub-config dicts, the top level left
    as it is; cfg unchanged when the config builds, or fails for another reason."""
    for _ in range(3):
        try:
            config_cls.from_dict(cfg)
            return cfg
        except Exception as exc:
            m = _UNKNOWN_KWARGS.search(str(exc))
            keys = set(re.findall(r"'(\w+)':", m.group(1))) if m else set()
            fixed = {k: {kk: vv for kk, vv in v.items() if kk not in keys} if isinstance(v, dict) else v
                     for k, v in cfg.items()}
            if fixed == cfg:
                return cfg
            cfg = fixed
    return cfg


def respect_validator(config_cls: type, orig: dict, cfg: dict) -> dict:
    """The shrunk cfg if the config class accepts it; else cfg with the fewest shrunk values (one, then two; a
    value inside a sub-config counts alone) moved back toward their defaults so that it is valid again (Dory:
    the layer count that three other counts must sum to, with its layer_types). Of the mends that work, the
    smallest model: a single width or count grows by doublings before it is set back to its default, and the
    mend that restores the least wins. A shrink never trades a config's validator for size; cfg unchanged
    when no such back-off mends it (the build then names the validator)."""
    import itertools

    if _accepts(config_cls, cfg):
        return cfg
    changed = list(_changed_leaves(orig, cfg))
    for size in (1, 2):
        mends = []
        for paths in itertools.combinations(changed, size):
            ladders = [_ladder(_at(cfg, p), _at(orig, p)) if size == 1 else [_at(orig, p)] for p in paths]
            for values in itertools.product(*ladders):
                trial = _with(cfg, dict(zip(paths, values)))
                if _accepts(config_cls, trial):
                    mends.append((_weight(values), len(mends), trial))
                    break
        if mends:
            return min(mends)[2]
    return cfg


def _changed_leaves(orig: Any, cfg: Any, path: tuple = ()) -> Any:
    """The paths (key tuples) where cfg differs from orig, descending into sub-config dicts both have."""
    for k, v in cfg.items():
        if k not in orig or v == orig[k]:
            continue
        if isinstance(v, dict) and isinstance(orig[k], dict):
            yield from _changed_leaves(orig[k], v, (*path, k))
        else:
            yield (*path, k)


def _at(d: dict, path: tuple) -> Any:
    for k in path:
        d = d[k]
    return d


def _with(d: dict, values: dict[tuple, Any]) -> dict:
    """A copy of d with the value at each path replaced (the dicts along a path copied, the rest shared)."""
    out = dict(d)
    for path, value in values.items():
        node = out
        for k in path[:-1]:
            node[k] = dict(node[k])
            node = node[k]
        node[path[-1]] = value
    return out


def _ladder(shrunk: Any, default: Any) -> list:
    """The values to try for one shrunk count, smallest first: doublings of the shrunk value, then the default."""
    if not (isinstance(shrunk, int) and isinstance(default, int) and not isinstance(shrunk, bool)
            and 0 < shrunk < default):
        return [default]
    steps = []
    while (shrunk := shrunk * 2) < default:
        steps.append(shrunk)
    return [*steps, default]


def _weight(values: tuple) -> int:
    """How much a mend restores: its counts, a list's counts or length, 1 for anything else."""
    def one(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, list)):
            return 1
        if isinstance(v, list):
            return sum(x if isinstance(x, int) and not isinstance(x, bool) else 1 for x in v)
        return abs(v)
    return sum(one(v) for v in values)
