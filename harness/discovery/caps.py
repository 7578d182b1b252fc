"""The caps that need a whole shrunk config: vocabularies with their special ids, media token counts, aliased widths.

The shrink (shrink.py) caps depth, widths and heads one dict at a time. These caps
look across the tree: a special token id named in one sub-config indexes a
vocabulary in another, and an image token count in the text config must match the
vision tower's patch grid. Each cap has a name (CAPS); discovery drops the ones a
class does not build or run in eager with, and the lock entry says why
(lock.UNCAPPED_FIELD).
"""
from __future__ import annotations

import re
from typing import Any, Callable

from harness.discovery.specs import ID_KEYS, ID_LIST_KEYS, MAX_ID
from harness.zoo.sizes import HEAD_KEYS, LAYER_KEYS, WIDTH_KEYS

CAPS = ("widths", "vocab", "media")   # every cap, in the order a class that fails with them gives them up
VOCAB = 1024        # above every id the inputs draw (specs.MAX_ID): the moved special ids sit in between
IMAGE_SIDE = 8      # patches per side of an image a language model reads as tokens: 64 image tokens
WIDTH = 64          # shrink.WIDTH: an aliased width gets the cap its role has
VOCAB_KEY = re.compile(r"^(vocab_size|\w+_vocab_size|vocab_size_per_layer_input)$")
MEDIA_COUNT_KEYS = ("image_seq_length", "num_image_tokens", "mm_tokens_per_image")
IMAGE_ID_KEYS = ("image_token_id", "image_token_index")
# where a tree names its own vocabulary's ids beside the special ids (VQ codes by name): not capped
NAMED_VOCABULARY = "vocabulary_map"


def apply(cfg: dict, caps: tuple[str, ...], config_cls: type | None = None) -> dict:
    """cfg with the named caps applied, in CAPS order."""
    steps: dict[str, Callable[[dict], dict]] = {
        "widths": lambda c: cap_aliased_widths(config_cls, c), "vocab": cap_vocab, "media": cap_media}
    for name in CAPS:
        if name in caps:
            cfg = steps[name](cfg)
    return cfg


def cap_aliased_widths(config_cls: type | None, cfg: dict) -> dict:
    """Widths, layer and head counts stored under a name the config class aliases to a known one (Flaubert's
    emb_dim is its hidden_size): capped by their role; then every int of the same dict that equalled such a
    width before (a width found by value) follows it."""
    aliases = getattr(config_cls, "attribute_map", None) or {}
    out = dict(cfg)
    widths = {}
    for name, key in aliases.items():
        v = cfg.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or key in WIDTH_KEYS:
            continue
        if name in WIDTH_KEYS and v > WIDTH:
            out[key], widths[v] = WIDTH, WIDTH
        elif name in LAYER_KEYS and v > 2 or name in HEAD_KEYS and v > 4:
            out[key] = 2 if name in LAYER_KEYS else 4
    for k, v in cfg.items():
        if out[k] == v and isinstance(v, int) and not isinstance(v, bool) and v in widths and _width_name(k):
            out[k] = widths[v]
    return out


def _width_name(key: str) -> bool:
    """A key that may hold a width (not a count of tokens, positions or a vocabulary)."""
    return any(w in key for w in ("dim", "size", "width", "emb", "hidden", "channels")) and not any(
        w in key for w in ("vocab", "position", "token", "length", "_id"))


def cap_vocab(cfg: dict) -> dict:
    """Every vocabulary (vocab_size and the like, at any depth) capped at VOCAB, and every special token id at or
    above the cap moved between the ids the inputs draw (below MAX_ID) and the cap: one new id per old value, so
    ids that were equal stay equal and distinct ones stay distinct. A tree that names its vocabulary's ids
    (a vocabulary_map) is left as it is."""
    if NAMED_VOCABULARY in cfg or not any(v > VOCAB for v in _walk(cfg, _is_vocab)):
        return cfg
    ids = sorted({v for v in _walk(cfg, _is_id) if v >= VOCAB})
    taken = {v for v in _walk(cfg, _is_id) if MAX_ID <= v < VOCAB}
    cap = VOCAB
    while cap - MAX_ID - len(taken) < len(ids):
        cap += 64
    free = [i for i in range(MAX_ID, cap) if i not in taken]
    moved = dict(zip(ids, free))
    return _rewrite(cfg, lambda k, v: min(v, cap) if _is_vocab(k, v) else moved.get(v, v) if _is_id(k, v) else v)


def cap_media(cfg: dict) -> dict:
    """A language model's image tokens: its vision tower's grid cut to IMAGE_SIDE patches a side, and every media
    token count that was the old grid (or the grid pooled by a whole factor) made the same of the new one; cfg
    unchanged when a count matches no such grid."""
    counts = {k: v for k, v in _items(cfg) if k in MEDIA_COUNT_KEYS and isinstance(v, int) and not isinstance(v, bool)}
    names_image = any(isinstance(cfg.get(k), int) for k in IMAGE_ID_KEYS)
    tower = next((k for k, v in cfg.items() if isinstance(v, dict) and _grid(v)), None)
    if tower is None or not (counts or names_image):
        return cfg
    side, patch = _grid(cfg[tower])
    if side <= IMAGE_SIDE:
        return cfg
    new = {}
    for v in set(counts.values()):
        pool = next((p for p in range(1, side + 1) if side % p == 0 and (side // p) ** 2 == v), None)
        if pool is None or IMAGE_SIDE % pool:
            return cfg
        new[v] = (IMAGE_SIDE // pool) ** 2
    out = _rewrite(cfg, lambda k, v: new.get(v, v) if k in MEDIA_COUNT_KEYS and isinstance(v, int) else v)
    return {**out, tower: {**out[tower], "image_size": IMAGE_SIDE * patch}}


def _grid(tower: dict) -> tuple[int, int] | None:
    """(patches per side, patch size) of a square vision tower, or None."""
    size, patch = tower.get("image_size"), tower.get("patch_size")
    if isinstance(size, int) and isinstance(patch, int) and not isinstance(size, bool) and patch > 0 and size % patch == 0:
        return size // patch, patch
    return None


def _is_vocab(key: str, value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and bool(VOCAB_KEY.match(key))


def _is_id(key: str, value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and key.endswith(ID_KEYS)


def _items(d: Any) -> Any:
    """(key, value) of every leaf at any depth, the ints of id lists as leaves of their key."""
    if isinstance(d, dict):
        for k, v in d.items():
            if isinstance(v, dict):
                yield from _items(v)
            elif isinstance(v, list) and isinstance(k, str) and k.endswith(ID_LIST_KEYS):
                yield from ((k, x) for x in v)
            else:
                yield k, v


def _walk(d: Any, pred: Callable[[str, Any], bool]) -> list[int]:
    return [v for k, v in _items(d) if isinstance(k, str) and pred(k, v)]


def _rewrite(d: Any, fn: Callable[[str, Any], Any]) -> Any:
    """A copy of d with every leaf (and every int of an id list) replaced by fn(key, value)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out[k] = _rewrite(v, fn)
        elif isinstance(v, list) and isinstance(k, str) and k.endswith(ID_LIST_KEYS):
            out[k] = [fn(k, x) if isinstance(x, int) and not isinstance(x, bool) else x for x in v]
        else:
            out[k] = fn(k, v) if isinstance(k, str) else v
    return out
