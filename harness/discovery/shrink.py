"""Shrink a config dict generically: fewer layers, narrow width, few heads and experts.

Works on `config.to_dict()` (nested dicts for sub-configs) so that the result
is plain data: it is fingerprinted and embedded verbatim in reproducers.
Every width becomes WIDTH, so projections between sub-models (vision output
into text width, encoder into decoder) stay consistent without per-family code.
"""
from __future__ import annotations

import math
from typing import Any

from harness.zoo.sizes import (EXPERT_KEYS, FFN_KEYS, HEAD_KEYS, KV_KEYS, LAYER_KEYS, PER_TOKEN_KEYS, WIDTH_KEYS,
                               WIDTH_LIST_KEYS)

WIDTH = 64
HEADS = 4
HEAD_DIM = WIDTH // HEADS
FFN = 128
LAYERS = 2
MAX_IMAGE = 448
MAX_AUDIO_POSITIONS = 64
VQ_BASE = 32  # GroupNorm in VQ-GAN convs takes 32 groups

SMALL_KEYS = {  # key -> cap
    **dict.fromkeys(EXPERT_KEYS, 4),
    "num_experts_per_tok": 2, "top_k": 2, "moe_k": 2, "num_experts_per_token": 2, "moe_topk": 2,
    "n_shared_experts": 1, "num_shared_experts": 1, "n_group": 1, "topk_group": 1, "num_expert_group": 1,
    "kv_lora_rank": 16, "q_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
    "first_k_dense_replace": 1, "num_dense_layers": 1,
    "num_frames": 4,  # video models: 4 frames (a multiple of the usual tubelet of 2)
    "mamba_d_state": 16, "ssm_state_size": 16, "state_size": 16, "time_step_rank": 8,
}


def _cap(value: Any, cap: int) -> Any:
    return min(value, cap) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else value


def _scale_sections(sections: list, half: int) -> list:
    """Rescale rotary sections (mrope) so they sum to half the new head_dim, keeping ratios."""
    total = sum(sections) or 1
    out = [max(1, s * half // total) for s in sections]
    out[-1] += half - sum(out)
    return out


def _caps(d: dict, old_layers: dict) -> None:
    """Depth, width, heads, kv heads, head and FFN widths and the small counts, capped in place."""
    for k, v in old_layers.items():
        d[k] = _cap(v, LAYERS)
    old_heads = next((d[k] for k in HEAD_KEYS if isinstance(d.get(k), int) and d[k] > 0), None)
    for k in WIDTH_KEYS:
        if isinstance(d.get(k), int) and not isinstance(d.get(k), bool) and d[k] > WIDTH:
            d[k] = WIDTH
    for k in WIDTH_LIST_KEYS:  # a neck's channel steps; the last is the width of the tower it feeds
        if isinstance(d.get(k), list) and all(isinstance(x, int) for x in d[k]):
            d[k] = [min(x, WIDTH) for x in d[k]]
    for k in HEAD_KEYS:
        if isinstance(d.get(k), int) and not isinstance(d.get(k), bool) and d[k] > 0:
            d[k] = min(d[k], HEADS)
    for k in KV_KEYS:
        if isinstance(d.get(k), int) and not isinstance(d.get(k), bool) and d[k] > 0 and old_heads:
            ratio = max(1, old_heads // d[k])
            d[k] = max(1, HEADS // ratio)
    if isinstance(d.get("head_dim"), int) and d["head_dim"] > HEAD_DIM:
        d["head_dim"] = HEAD_DIM
    heads_now = next((d[k] for k in HEAD_KEYS if isinstance(d.get(k), int) and d[k] > 0), None)
    if "head_dim" in d and d["head_dim"] is None and heads_now and isinstance(d.get("hidden_size"), int):
        d["head_dim"] = d["hidden_size"] // heads_now  # an explicit None some models do not derive
    for k in KV_KEYS[:1]:
        if k in d and d[k] is None and heads_now:
            d[k] = heads_now
    for k in FFN_KEYS:
        if isinstance(d.get(k), int) and not isinstance(d.get(k), bool) and d[k] > FFN:
            d[k] = FFN
        elif isinstance(d.get(k), list) and d[k] and all(isinstance(x, int) and not isinstance(x, bool) for x in d[k]):
            d[k] = [min(x, FFN) for x in d[k]]  # one width per layer (Gemma 3n)
    for k, cap in SMALL_KEYS.items():
        if k in d:
            d[k] = _cap(d[k], cap)
    _unset_experts(d)
    _unset_routing(d)


def _per_layer_lists(orig: dict, d: dict, lk: str, old: int) -> None:
    """Per-layer lists and strings whose length was the old depth: keep one layer of each kind, in order.

    (a hybrid cut to its first two layers may have no attention layer at all)
    """
    per_layer = [k for k, v in d.items() if k not in LAYER_KEYS and old > d[lk] and len(v if isinstance(v, (list, str)) else ()) == old
                 and (isinstance(v, list) or any(w in k for w in ("pattern", "layer", "block")))]
    if not per_layer:
        return
    # the first layer of every kind in every list (attention kinds and MLP kinds may differ);
    # with KV sharing (Gemma 3n: the last layers reuse the caches of earlier ones of their kind)
    # that is among the producers and among the consumers, so every consumer still has a producer
    shared = orig.get("num_kv_shared_layers") if lk == "num_hidden_layers" else None
    first_consumer = old - shared if isinstance(shared, int) and 0 < shared < old else old
    keep_set: set[int] = set()
    for k in per_layer:
        if not all(isinstance(x, str) for x in d[k]):
            continue
        firsts = {}
        for i, x in enumerate(d[k]):
            firsts.setdefault((json_key(x), i >= first_consumer), i)
        keep_set.update(firsts.values())
    keep = sorted(keep_set)[:4]
    n = max(d[lk], len(keep))
    for i in range(old):
        if len(keep) >= n:
            break
        if i not in keep:
            keep.append(i)
    keep = sorted(keep)
    d[lk] = n
    if first_consumer < old:
        d["num_kv_shared_layers"] = sum(i >= first_consumer for i in keep)
    for k in per_layer:
        v = d[k]
        picked = [v[i] for i in keep]
        d[k] = "".join(picked) if isinstance(v, str) else picked


def _clip_layer_indices(d: dict, old_layers: dict) -> None:
    """Layer index lists: clip to the new depth."""
    depth = max(old_layers.values(), default=0)
    new_depth = max((d[k] for k in old_layers), default=0)
    for k, v in list(d.items()):
        if k != "out_indices" and ("layer" in k or "index" in k or "indexes" in k or "indices" in k) and isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            if depth and new_depth and max(v) >= new_depth and max(v) < depth + 1 and len(v) < depth:
                d[k] = sorted({min(x, new_depth - 1) for x in v})


def _rope_sections(d: dict) -> None:
    """M-RoPE sections scaled to the shrunk rotary head: the rotary part of a latent-attention head
    (qk_rope_head_dim) where the config has one, else the whole head."""
    for k in ("rope_parameters", "rope_scaling"):
        rope = d.get(k)
        if isinstance(rope, dict) and isinstance(rope.get("mrope_section"), list):
            head_dim = d.get("qk_rope_head_dim") or d.get("head_dim") \
                or (d.get("hidden_size", WIDTH) // max(1, d.get("num_attention_heads", HEADS)))
            d[k] = {**rope, "mrope_section": _scale_sections(rope["mrope_section"], head_dim // 2)}


def _per_layer_dicts(d: dict, old_layers: dict) -> None:
    """Dicts keyed by layer index (per_layer_config): keep the layers that still exist, or move the first to the top."""
    for k, v in list(d.items()):
        if isinstance(v, dict) and v and all(str(x).isdigit() for x in v) and old_layers:
            n = max(d[lk] for lk in old_layers)
            kept = {x: y for x, y in v.items() if int(x) < n}
            if not kept:
                first = min(v, key=lambda x: int(x))
                kept = {type(first)(n - 1) if isinstance(first, int) else str(n - 1): v[first]}
            d[k] = {x: shrink_dict(y) if isinstance(y, dict) else y for x, y in kept.items()}


def _timm_to_resnet(d: dict) -> None:
    """Timm backbones (DETR family) become the transformers ResNet with the same stages."""
    if isinstance(d.get("backbone_config"), dict) and d["backbone_config"].get("model_type") in ("timm_backbone", "timm_wrapper"):
        levels = d.get("num_feature_levels", 1)
        stages = ["stage2", "stage3", "stage4"] if isinstance(levels, int) and levels > 1 else ["stage4"]
        d["backbone_config"] = {"model_type": "resnet", "out_features": stages, "depths": [1, 1, 1, 1],
                                "hidden_sizes": [64, 128, 256, 512], "embedding_size": 32}
        d.pop("backbone", None)


def shrink_dict(d: dict) -> dict:
    """A shrunk copy of one config dict, recursing into sub-config dicts."""
    orig = d
    d = dict(d)
    old_layers = {k: d[k] for k in LAYER_KEYS if isinstance(d.get(k), int) and not isinstance(d.get(k), bool)}
    _caps(d, old_layers)
    for lk, old in old_layers.items():
        _per_layer_lists(orig, d, lk, old)
    _clip_layer_indices(d, old_layers)
    _rope_sections(d)
    _keep_identities(orig, d, old_layers)
    _per_layer_dicts(d, old_layers)
    _timm_to_resnet(d)
    for k, v in list(d.items()):  # sub-configs, then the widths derived from theirs
        if isinstance(v, dict) and ("model_type" in v or k.endswith("_config") or k in ("encoder", "decoder")):
            d[k] = shrink_dict(v)
    _merged_widths(orig, d)
    _follow_image(orig, d)
    _fit_queries(d)
    _tile_towers(d)
    if "dtype" in d:
        d["dtype"] = "float32"
    return d



def _unset_routing(d: dict) -> None:
    """MoE routing the default leaves unset (None experts per token: checkpoints set it, Dots1, DeepSeek-V2):
    every unset expert count gets its cap. A None expert count alone means a dense model and is kept."""
    if any(k in d and d[k] is None for k in PER_TOKEN_KEYS):
        for k, cap in SMALL_KEYS.items():
            if "expert" in k and k in d and d[k] is None:
                d[k] = cap


def _unset_experts(d: dict) -> None:
    """Expert counts and sizes left None with no switch to turn the MoE off (set per checkpoint,
    DiffusionGemma builds its router regardless): a small MoE."""
    if "num_experts" not in d or d["num_experts"] is not None or d.get("moe_intermediate_size", 0) is not None \
            or any("moe" in k and isinstance(v, bool) for k, v in d.items()):
        return
    d.update(num_experts=SMALL_KEYS["num_experts"], moe_intermediate_size=FFN)
    for k in ("top_k_experts", "num_experts_per_tok"):
        if k in d and d[k] is None:
            d[k] = SMALL_KEYS["num_experts_per_tok"]


def _merged_widths(orig: dict, d: dict) -> None:
    """A width that was a vision tower's width times its merge area (hidden x merge^2 after a patch merger)
    stays that product of the shrunk tower's width."""
    for sk, sv in orig.items():
        if not isinstance(sv, dict) or not isinstance(d.get(sk), dict) or not isinstance(sv.get("hidden_size"), int):
            continue
        m = next((sv[k] for k in ("spatial_merge_size", "merge_size") if isinstance(sv.get(k), int)), None)
        if not m or m < 2:
            continue
        for k in WIDTH_KEYS:
            if orig.get(k) == sv["hidden_size"] * m * m and isinstance(d[sk].get("hidden_size"), int):
                d[k] = d[sk]["hidden_size"] * m * m
    _summed_widths(orig, d)


def _summed_widths(orig: dict, d: dict) -> None:
    """A dim the shrink left alone that was the sum of two widths, one a sub-model's (codecs concatenate
    semantic and acoustic features: NeuCodec's quantization_dim, X-Codec's codebook_dim) stays their sum."""
    widths = [((k,), orig[k]) for k in WIDTH_KEYS if isinstance(orig.get(k), int) and isinstance(d.get(k), int)]
    widths += [((sk, "hidden_size"), sv["hidden_size"]) for sk, sv in orig.items()  # sub-models, not sub-blocks
               if isinstance(sv, dict) and sv.get("model_type") and isinstance(sv.get("hidden_size"), int) and isinstance(d.get(sk), dict)]

    def now(path: tuple) -> int:
        return d[path[0]] if len(path) == 1 else d[path[0]][path[1]]

    for k, v in orig.items():
        if not _is_dim(k, v) or d.get(k) != v or k in FFN_KEYS or "feedforward" in k or "codebook_size" in k:  # counts, FFNs
            continue
        pair = next(((a, b) for i, (a, x) in enumerate(widths) for b, y in widths[i + 1:]
                     if x + y == v and len(a) + len(b) > 2), None)
        if pair:
            d[k] = now(pair[0]) + now(pair[1])


def _stage_doubled_width(orig: dict, d: dict) -> None:
    """Hierarchical (Swin-style) towers double a stem width per stage: a width that was stem x 2^(stages-1)
    stays that product of the shrunk stem over the stages left (CLAP's audio hidden_size feeds its projection)."""
    if not isinstance(orig.get("depths"), list) or not isinstance(d.get("depths"), list) or not orig["depths"]:
        return
    grow, now = 2 ** (len(orig["depths"]) - 1), 2 ** (len(d["depths"]) - 1)
    stems = [k for k, v in orig.items() if _is_dim(k, v) and isinstance(d.get(k), int)]
    for w in WIDTH_KEYS:
        stem = next((s for s in stems if s != w and orig[s] * grow == orig.get(w)), None)
        if stem and grow > 1 and isinstance(d.get(w), int):
            d[w] = d[stem] * now


def _side(size: Any) -> int | None:
    """The side of a square image size (an int or [h, h])."""
    if isinstance(size, list) and len(set(size)) == 1:
        size = size[0]
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def _follow_image(orig: dict, d: dict) -> None:
    """Feature-map sizes listed beside a backbone whose image shrank (SAM 2's backbone_feature_sizes,
    image / 4, / 8, / 16; SAM 3's grid x 4, x 2, x 1) shrink by the same ratio."""
    subs = [(orig.get(k), d.get(k)) for k in d if isinstance(d.get(k), dict) and isinstance(orig.get(k), dict)]
    pair = next(((_side(o.get("image_size")), _side(n.get("image_size"))) for o, n in [(orig, d), *subs]
                 if _side(o.get("image_size")) and _side(n.get("image_size")) and _side(o.get("image_size")) != _side(n.get("image_size"))), None)
    if pair is None:
        return
    old, new = pair
    for k, v in orig.items():
        flat = [x for e in v for x in (e if isinstance(e, list) else [e])] if isinstance(v, list) and "size" in k and k != "image_size" else []
        if flat and all(isinstance(x, int) and 1 < x < old and x * new % old == 0 for x in flat):
            d[k] = [[x * new // old for x in e] if isinstance(e, list) else e * new // old for e in v]


def _fit_queries(d: dict) -> None:
    """Two-stage detectors pick their queries top-k from the backbone's patch proposals (LW-DETR):
    no more queries than the shrunk ViT backbone has patches."""
    bb = d.get("backbone_config")
    if not isinstance(d.get("num_queries"), int) or not isinstance(bb, dict):
        return
    side, patch = _side(bb.get("image_size")), bb.get("patch_size")
    if side and isinstance(patch, int) and patch > 0:
        d["num_queries"] = min(d["num_queries"], (side // patch) ** 2)


TILE_PATCHES = 8  # patches per side of a tile that a sub-tower sees as its whole image


def _tile_towers(d: dict) -> None:
    """Towers fed image tiles (DepthPro: patch_size 384 = each sub-ViT's image_size, images 4 tiles wide):
    smaller tiles, and hook layer ids clipped to the sub-towers' shrunk depth (one id per hook kept)."""
    tile = d.get("patch_size")
    towers = [v for v in d.values() if isinstance(v, dict) and v.get("image_size") == tile and isinstance(v.get("patch_size"), int)]
    if not isinstance(tile, int) or not towers:
        return
    new = TILE_PATCHES * towers[0]["patch_size"]
    d["patch_size"] = new
    for v in towers:
        v["image_size"] = new
    depth = min((v.get("num_hidden_layers") for v in towers if isinstance(v.get("num_hidden_layers"), int)), default=None)
    for k, v in d.items():
        if depth and "hook" in k and isinstance(v, list) and all(isinstance(x, int) for x in v):
            d[k] = [min(x, depth - 1) for x in v]


def json_key(x: Any) -> str:
    """A hashable key for a per-layer entry (entries may be lists or dicts)."""
    return repr(x)


def _is_dim(key: str, value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 8 and any(
        w in key for w in ("dim", "size", "rank", "width")) and "vocab" not in key and "position" not in key


def _is_stage_list(key: str, value: Any) -> bool:
    """A list of per-stage channel counts the stages are built from (Hiera's embed_dim_per_stage,
    EfficientLoFTR's out_features); other lists of sizes sit behind their own projections."""
    return isinstance(value, list) and len(value) > 1 and all(isinstance(x, int) and not isinstance(x, bool) and x >= 8 for x in value) \
        and ("per_stage" in key or key == "out_features")


def _equal_dims(orig: dict, d: dict) -> None:
    """Dims equal in the default stay equal after the shrink."""
    dims = [k for k, v in orig.items() if _is_dim(k, v) and k in d]
    for i, a in enumerate(dims):
        for b in dims[i + 1:]:
            if orig[a] == orig[b] and d[a] != d[b] and (d[a] != orig[a] or d[b] != orig[b]):
                d[a] = d[b] = min(d[a], d[b])


def _derived_widths(orig: dict, d: dict) -> None:
    """Dims derived from a width (split parts, stage ends, rotary share, conv inputs, position features, groups) follow it."""
    # per-part dims that split a width between them (Reformer's axial position embeddings): split the new width alike
    for k, v in orig.items():
        if _is_dim(k, 8) and isinstance(v, list) and len(v) > 1 and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v):
            w = next((wk for wk in WIDTH_KEYS if orig.get(wk) == sum(v) and isinstance(d.get(wk), int) and d[wk] != sum(v)), None)
            if w:
                d[k] = _scale_sections(v, d[w])
    # a width that is the first or last stage of a per-stage channel list (Hiera's first stage, a CNN's
    # last) feeds or is fed by that stage, and the list is not shrunk: the width keeps its value
    for k in WIDTH_KEYS:
        if isinstance(orig.get(k), int) and d.get(k) != orig[k] and any(
                _is_stage_list(sk, sv) and orig[k] in (sv[0], sv[-1]) and d.get(sk) == sv for sk, sv in orig.items()):
            d[k] = orig[k]
    # a rotary "partial" factor above 1 is a multiple of the head (EfficientLoFTR's 2D rope spans half the
    # width): the rotary keeps its share of the width when the head count changes
    rope, old_heads = d.get("rope_parameters"), next((orig[k] for k in HEAD_KEYS if isinstance(orig.get(k), int) and orig[k] > 0), None)
    factor = rope.get("partial_rotary_factor") if isinstance(rope, dict) else None
    if isinstance(factor, (int, float)) and factor > 1 and old_heads:
        heads = next((d[k] for k in HEAD_KEYS if isinstance(d.get(k), int) and d[k] > 0), old_heads)
        d["rope_parameters"] = {**rope, "partial_rotary_factor": factor * heads / old_heads}
    # a convolution's input channels equal to a width it reads (PP-FormulaNet's post_conv_in_channels) follow it
    for k, v in orig.items():
        if k.endswith("in_channels") and isinstance(v, int) and not isinstance(v, bool) and k in d:
            w = next((wk for wk in WIDTH_KEYS if orig.get(wk) == v and d.get(wk) != v), None)
            if w:
                d[k] = d[w]
    # sinusoidal position features are half a width (SAM's num_pos_feats, sine and cosine side by side)
    for k, v in orig.items():
        if "pos_feat" in k and isinstance(v, int) and k in d:
            w = next((wk for wk in WIDTH_KEYS if orig.get(wk) == 2 * v and d.get(wk) != orig[wk]), None)
            if w:
                d[k] = d[w] // 2
    # grouped convolutions with one group per channel of a width (Mimi's upsampling): follow that width
    for k, v in orig.items():
        if k.endswith("groups") and isinstance(v, int) and not isinstance(v, bool) and v > 1:
            w = next((wk for wk in WIDTH_KEYS if orig.get(wk) == v and d.get(wk) != v), None)
            if w:
                d[k] = d[w]


def _head_identities(orig: dict, d: dict) -> None:
    """VQ-GAN base channels, latent-attention and Mamba heads, rotary dims and per-head widths stay consistent."""
    # VQ-GAN image tokenizers (Chameleon, Emu3): convs of base_channels x multiplier, GroupNorm of 32 groups;
    # an attention width that was base x the deepest multiplier follows it
    if isinstance(orig.get("base_channels"), int) and orig["base_channels"] > VQ_BASE:
        d["base_channels"] = VQ_BASE
        mult = orig.get("channel_multiplier")
        for k in WIDTH_KEYS:
            if isinstance(mult, list) and mult and orig.get(k) == orig["base_channels"] * mult[-1]:
                d[k] = VQ_BASE * mult[-1]
    # multi-head latent attention (DeepSeek family): the q/k head is nope + rope
    if isinstance(d.get("qk_head_dim"), int) and isinstance(d.get("qk_rope_head_dim"), int):
        d["qk_head_dim"] = d["qk_rope_head_dim"] + d.get("qk_nope_head_dim", 0)
    head_dim = d.get("head_dim") if isinstance(d.get("head_dim"), int) else None
    width = next((d[k] for k in WIDTH_KEYS if isinstance(d.get(k), int)), None)
    heads = next((d[k] for k in HEAD_KEYS if isinstance(d.get(k), int) and d[k] > 0), None)
    if head_dim is None and width and heads:
        head_dim = width // heads
    if head_dim and isinstance(d.get("rotary_dim"), int) and d["rotary_dim"] > head_dim:
        d["rotary_dim"] = head_dim
    # Mamba-2 style blocks: heads x head_dim must equal expand x hidden
    for heads, hdim, expand in (("mamba_n_heads", "mamba_d_head", "mamba_expand"), ("num_heads", "head_dim", "expand")):
        if isinstance(d.get(heads), int) and isinstance(d.get(hdim), int) and (heads.startswith("mamba") or "n_groups" in d):
            inner = int(d.get(expand, 2) * d.get("hidden_size", WIDTH))
            d[hdim] = min(d[hdim], HEAD_DIM)
            d[heads] = max(1, inner // d[hdim])
            if isinstance(d.get("mamba_d_ssm"), int):
                d["mamba_d_ssm"] = inner
    # a per-head width stored beside the width and head count (XLNet's d_head; Pix2Struct's d_kv, which its
    # text attention divides the width by to count heads): it stays width / heads
    for hdim, width_key, heads_key in (("d_head", "d_model", "n_head"), ("d_kv", "hidden_size", "num_heads")):
        if isinstance(d.get(hdim), int) and isinstance(d.get(width_key), int) and isinstance(d.get(heads_key), int) \
                and orig.get(hdim) == orig.get(width_key, 0) // max(1, orig.get(heads_key, 1)):
            d[hdim] = d[width_key] // d[heads_key]


def _checkpoint_defaults(d: dict) -> None:
    """Values the default leaves unset because checkpoints set them (horizons, windows, MoE routing)."""
    # forecasters whose horizon is set per checkpoint: 8 steps ahead, from 16 steps of context
    if "prediction_length" in d and d["prediction_length"] is None:
        d["prediction_length"] = 8
        if "context_length" in d and d["context_length"] is None:
            d["context_length"] = 16
    # sliding-window layers with no window in the default (set per checkpoint)
    if "sliding_window" in d and d["sliding_window"] is None and (any("sliding" in str(t) for t in d.get("layer_types") or [])
                                                                  or any("sliding" in k and k != "sliding_window" and d[k] for k in d)):
        d["sliding_window"] = 64
    # MoE layer kinds and routing the default leaves unset (checkpoints set them) while the code indexes/uses them:
    # the usual first-dense-then-sparse layout, two experts per token
    n = next((d[k] for k in LAYER_KEYS if isinstance(d.get(k), int)), None)
    if "mlp_layer_types" in d and d["mlp_layer_types"] is None and n:
        d["mlp_layer_types"] = ["dense"] + ["sparse"] * (n - 1)
    if "num_experts_per_tok" in d and d["num_experts_per_tok"] is None and any(
            isinstance(d.get(k), int) and d[k] > 1 for k in ("n_routed_experts", "num_experts", "num_local_experts")):
        d["num_experts_per_tok"] = SMALL_KEYS["num_experts_per_tok"]


def _input_sizes(orig: dict, d: dict) -> None:
    """Audio positions and image sizes capped so that the forward stays tiny."""
    # Whisper-style encoders want exactly 2 x max_source_positions mel frames: 128 frames, not 3000
    if isinstance(d.get("max_source_positions"), int) and d["max_source_positions"] > MAX_AUDIO_POSITIONS and "num_mel_bins" in d:
        d["max_source_positions"] = MAX_AUDIO_POSITIONS
    # big default images (Pixtral 1540, SigLIP-896) mean thousands of patches: 224 keeps the forward tiny
    if isinstance(d.get("image_size"), int) and isinstance(d.get("patch_size"), int) and d["image_size"] > MAX_IMAGE:
        # windowed towers cut the patch grid into sqrt(num_windows) windows per side (LW-DETR's ViT)
        windows = d.get("num_windows") if isinstance(d.get("num_windows"), int) and d["num_windows"] > 0 else 1
        step = d["patch_size"] * (math.isqrt(windows) if math.isqrt(windows) ** 2 == windows else 1)
        d["image_size"] = max(2 * step, MAX_IMAGE // 2 // step * step)
        # a patch-grid side stored beside them (SAM's image_embedding_size) is kept by to_dict over
        # the one __post_init__ derives: it follows the new grid
        side = orig["image_size"] // orig["patch_size"]
        for k, v in orig.items():
            if k != "image_size" and "size" in k and v == side and k in d and k not in WIDTH_KEYS:
                d[k] = d["image_size"] // d["patch_size"]
    # square images given as [h, w] with a convolutional stem's stride instead of a patch size (SAM 2's Hiera)
    size, stride = d.get("image_size"), d.get("patch_size") or d.get("patch_stride")
    stride = stride[0] if isinstance(stride, list) and stride else stride
    if isinstance(size, list) and len(set(size)) == 1 and isinstance(size[0], int) and isinstance(stride, int) and size[0] > MAX_IMAGE:
        d["image_size"] = [max(2 * stride, MAX_IMAGE // 2 // stride * stride)] * 2


def _backbones(d: dict, old_layers: dict) -> None:
    """Backbones without timm or pretrained weights, two heads per stage, outputs of stages that still exist."""
    # timm is not installed (and must not be needed): use the transformers backbone
    if d.get("use_timm_backbone"):
        d["use_timm_backbone"] = False
    if d.get("use_pretrained_backbone"):
        d["use_pretrained_backbone"] = False
    # hierarchical vision models list heads per stage; 2 heads divide every stage width
    for k in HEAD_KEYS + ("depths",):
        if isinstance(d.get(k), list) and all(isinstance(x, int) for x in d[k]):
            d[k] = [min(x, 2) for x in d[k]]
    # backbones name their outputs by stage; the old last stage no longer exists
    # (only when the depth itself shrank: stage-list backbones like ResNet keep their stages)
    shrunk_depth = any(d[k] != v for k, v in old_layers.items())
    if shrunk_depth and (isinstance(d.get("out_features"), list) or isinstance(d.get("out_indices"), list)):
        n = max(d[k] for k in old_layers)
        d.pop("stage_names", None)
        d["out_features"] = None
        if isinstance(d.get("out_indices"), list):
            d["out_indices"] = sorted({min(i, n) for i in d["out_indices"] if isinstance(i, int)}) or None

def _keep_identities(orig: dict, d: dict, old_layers: dict) -> None:
    """Keep relations the default config had: equal dims stay equal, sums stay sums, rotary fits the head."""
    _equal_dims(orig, d)
    _derived_widths(orig, d)
    _stage_doubled_width(orig, d)
    _head_identities(orig, d)
    _checkpoint_defaults(d)
    _input_sizes(orig, d)
    _backbones(d, old_layers)
