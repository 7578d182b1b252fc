"""Inputs adapted by one eager forward: media-token counts the model reports, and input repairs.

The model itself says what it wants: how many image/audio features it made
(captured at its placeholder check, or read from its mismatch error), or an
error a repair knows (an image axis, tiles per image, features last, a channel
axis, flattened patch width). Repairs are data: (pattern, function) pairs.
"""
from __future__ import annotations

import re
from typing import Any

SEED = 0  # the same seed as build.SEED: probes see the inputs the build will make

def _capture_feature_tokens(module: Any, media: dict[int, str] | None = None) -> tuple[dict, list]:
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
            feats, tid = bound.get("features"), bound.get("token_id")  # one mask helper for every medium
            if embeds is not None and hasattr(feats, "numel") and (media or {}).get(tid):
                seen.setdefault(media[tid], int(feats.numel()) // int(embeds.shape[-1]))
            return _fn(*args, **kwargs)

        sub.get_placeholder_mask = wrapper
        undo.append(sub)
    return seen, undo


_MISMATCH = re.compile(r"(image|audio|video)\w* features and \w+ tokens do not match.*?features:?\s*(\d+)", re.I | re.S)


def probe_counts(module: Any, spec: dict, media: dict[int, str], device: str) -> dict:
    """Fill in unknown media-token counts by one eager forward: the model says how many features it made."""
    import torch

    from harness.zoo.inputs import make_inputs
    from harness.zoo.specs import BATCH

    ids = spec.get("input_ids", {})
    prefix = ids.get("prefix") or []
    if not any(count == 0 for _, count in prefix):
        return spec
    seen, undo = _capture_feature_tokens(module, media)
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


_PAIR = re.compile(r"5D tensor of shape \(batch_size, (\d+), num_channels")


def _image_group(spec: dict, error: str) -> dict | None:
    """(B, C, H, W) -> (B, n, C, H, W): matchers that take n images at once (EfficientLoFTR: pairs)."""
    pix, m = spec.get("pixel_values"), _PAIR.search(error)
    if not pix or not m or len(pix["shape"]) != 4:
        return None
    b, c, h, w = pix["shape"]
    return {**spec, "pixel_values": {**pix, "shape": [b, int(m.group(1)), c, h, w]}}


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


def _image_as_patches(spec: dict, error: str) -> dict | None:
    """(B, C, H, W) -> (B, patches, C*p*p): models whose patch embedding is a linear layer over flattened patches (Fuyu)."""
    m, pix = _MATMUL.search(error), spec.get("pixel_values")
    if not m or not pix or len(pix["shape"]) != 4:
        return None
    b, c, h, w = pix["shape"]
    want = int(m.group(3))
    p = int(round((want / c) ** 0.5))
    if c * p * p != want or int(m.group(2)) != w:
        return None
    return {**spec, "pixel_values": {**pix, "shape": [b, -(-h // p) * -(-w // p), want]}}


_MULTIPLE = re.compile(r"multiple of [^(\n]*\((\d+)\)")


def _frames_multiple(spec: dict, error: str) -> dict | None:
    """Feature frames rounded up to the window the encoder chunks by (Qwen3-ASR: a multiple of 100)."""
    feats, m = spec.get("input_features"), _MULTIPLE.search(error)
    if not feats or not m or len(feats["shape"]) != 3:
        return None
    n, frames = int(m.group(1)), feats["shape"][-1]
    if frames % n == 0:
        return None
    new = -(-frames // n) * n
    out = {**spec, "input_features": {**feats, "shape": [*feats["shape"][:-1], new]}}
    for key, item in spec.items():
        if key != "input_features" and "mask" in key and item.get("shape", [None])[-1] == frames:
            out[key] = {**item, "shape": [*item["shape"][:-1], new]}
    return out


_SIZES = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")


def _features_last_by_size(spec: dict, error: str) -> dict | None:
    """Features last when the model's error pits the mel-bin count against the frame count."""
    feats, m = spec.get("input_features"), _SIZES.search(error)
    if not feats or not m or len(feats["shape"]) != 3 or {int(m.group(1)), int(m.group(2))} != set(feats["shape"][1:]):
        return None
    return _features_last(spec)


_SAMPLES_MULTIPLE = re.compile(r"input_values` length \d+ is not a multiple of (\d+)")


def _samples_multiple(spec: dict, error: str) -> dict | None:
    """Waveform samples rounded up to the hop the codec frames by (Muse Spark audio: a multiple of 96)."""
    vals, m = spec.get("input_values"), _SAMPLES_MULTIPLE.search(error)
    if not vals or not m:
        return None
    n = int(m.group(1))
    new = -(-vals["shape"][-1] // n) * n
    out = {**spec, "input_values": {**vals, "shape": [*vals["shape"][:-1], new]}}
    for key, item in spec.items():
        if key != "input_values" and "mask" in key and item.get("shape", [None])[-1] == vals["shape"][-1]:
            out[key] = {**item, "shape": [*item["shape"][:-1], new]}
    return out


_TOKENS_FEATURES = re.compile(r"features and image tokens do not match: tokens: (\d+), features (\d+)")


def _image_token_count(spec: dict, error: str) -> dict | None:
    """A grid model that makes more features per image than the grid's merged patches (extra row/boundary
    features, HunYuan-VL): as many image tokens per sample as its error says it made features."""
    ids, m = spec.get("input_ids", {}), _TOKENS_FEATURES.search(error)
    prefix = ids.get("prefix") or []
    tokens, feats = (int(g) for g in m.groups()) if m else (0, 0)
    batch = ids.get("shape", [1])[0]
    hit = [i for i, (_, n) in enumerate(prefix) if n * batch == tokens]
    if not m or len(hit) != 1 or feats % batch or feats <= tokens:
        return None
    i, want = hit[0], feats // batch
    tid = prefix[i][0]
    spec = {**spec, "input_ids": {**ids, "prefix": [*prefix[:i], [tid, 0], *prefix[i + 1:]]}}
    shrink = prefix[i][1]
    for key in ("input_ids", "attention_mask", "mm_token_type_ids", "token_type_ids"):
        if key in spec:
            spec[key] = {**spec[key], "shape": [spec[key]["shape"][0], spec[key]["shape"][1] - shrink]}
    if "prefix" in spec.get("mm_token_type_ids", {}):
        types = spec["mm_token_type_ids"]["prefix"]
        spec["mm_token_type_ids"] = {**spec["mm_token_type_ids"], "prefix": [[v, 0 if j == i else n] for j, (v, n) in enumerate(types)]}
    return _grow(spec, {tid: want})


_TOO_SMALL = re.compile(r"Image size \d+x\d+ is too small to be scaled with \w+=\[([\d.,\s]+)\] when patch_size=(\d+)")


def _image_scaled_to_patch(spec: dict, error: str) -> dict | None:
    """Images large enough that their smallest rescaled copy still holds one patch (DepthPro: 4 x 112 px)."""
    pix, m = spec.get("pixel_values"), _TOO_SMALL.search(error)
    if not pix or not m:
        return None
    ratio = min(float(x) for x in m.group(1).split(",") if x.strip())
    side = int(-(-int(m.group(2)) // ratio))
    out = {**spec, "pixel_values": {**pix, "shape": [*pix["shape"][:-2], side, side]}}
    if "pixel_mask" in spec:
        out["pixel_mask"] = {**spec["pixel_mask"], "shape": [*spec["pixel_mask"]["shape"][:-2], side, side]}
    return out


# (what the model's own error says, how the inputs change): tried once each, in order.
INPUT_REPAIRS = (
    (re.compile(r"expected 5, got 4"), _add_image_axis),
    (_PAIR, _image_group),
    (re.compile(r"expected 5, got 3"), _patches_as_images),  # the tower adds the sequence axis itself (PaddleOCR-VL)
    (re.compile(r"'NoneType' object is not (iterable|subscriptable)|has no len|image_sizes"), _add_image_sizes),
    (re.compile(r"mat1 and mat2 shapes cannot be multiplied|normalized_shape|Expected \d+D|to have \d+ channels"), _features_last),
    (re.compile(r"to have 1 channels|expected 3, got 2|Expected 3D|must be mono"), _mono_channel),
    (_SPLIT, _patches_per_image),
    (_MATMUL, _patch_width),
    (_MATMUL, _image_as_patches),
    (_MULTIPLE, _frames_multiple),
    (_SIZES, _features_last_by_size),
    (_SAMPLES_MULTIPLE, _samples_multiple),
    (_TOKENS_FEATURES, _image_token_count),
    (re.compile(r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d"), _patches_as_images),
    (_TOO_SMALL, _image_scaled_to_patch),
)


def repair_inputs(module: Any, spec: dict, device: str) -> dict:
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
