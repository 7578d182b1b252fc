"""Inputs adapted by one eager forward: media-token counts the model reports, and input repairs.

The model itself says what it wants: how many image/audio features it made
(captured at its placeholder check, or read from its mismatch error), or an
error a repair knows (an image axis, tiles per image, features last, a channel
axis, flattened patch width). Repairs are data: (pattern, function) pairs.
"""
from __future__ import annotations

import math
import re
from typing import Any

from harness.zoo.build import SEED  # the build's seed: probes see the inputs the build will make


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
        undo.append((sub, "get_placeholder_mask"))
    return seen, undo


def _capture_media_features(module: Any) -> tuple[dict, list]:
    """Wrap every get_<medium>_features so a probe forward records how many text-width feature rows each
    medium made: models that masked_scatter by hand (VibeVoice ASR) neither check nor say the count."""
    emb = module.get_input_embeddings() if hasattr(module, "get_input_embeddings") else None
    width = getattr(emb, "embedding_dim", None)
    seen: dict[str, int] = {}
    undo = []
    for sub in [module, *module.modules()]:
        for medium in ("image", "audio", "video"):
            name = f"get_{medium}_features"
            fn = getattr(sub, name, None)
            if fn is None or name in vars(sub) or not width:
                continue

            def wrapper(*args: Any, _fn: Any = fn, _medium: str = medium, **kwargs: Any) -> Any:
                out = _fn(*args, **kwargs)
                feats = getattr(out, "pooler_output", out)
                if hasattr(feats, "numel") and feats.dim() >= 2 and feats.shape[-1] == width:
                    seen.setdefault(_medium, int(feats.numel()) // width)
                return out

            setattr(sub, name, wrapper)
            undo.append((sub, name))
    return seen, undo


_MISMATCH = re.compile(r"(image|audio|video)\w* features and \w+ tokens do not match.*?features:?\s*(\d+)", re.I | re.S)
# models that count rows rather than features: "Got 98 image patches for 4 image placeholder tokens"
_ROWS_FOR_TOKENS = re.compile(r"Got (\d+) (image|audio|video) \w+ for \d+ \w+ placeholder tokens")


_SCATTER = re.compile(r"value tensor of shape \[(\d+), \d+\] cannot be broadcast to indexing result of shape \[\d+, \d+\]")


def probe_counts(module: Any, spec: dict, media: dict[int, str], device: str) -> dict:
    """Fill in unknown media-token counts by one eager forward: the model says how many features it made."""
    import torch

    from harness.zoo.inputs import make_inputs
    from harness.discovery.specs import BATCH

    ids = spec.get("input_ids", {})
    prefix = ids.get("prefix") or []
    if not any(count == 0 for _, count in prefix):
        return spec
    seen, undo = _capture_feature_tokens(module, media)
    made, undo_made = _capture_media_features(module)
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
        zero = [media.get(tid) for tid, count in prefix if count == 0]
        m = _SCATTER.search(str(exc))
        if m and len(zero) == 1 and zero[0]:  # an indexed assignment of one medium's rows: the rows it made
            seen.setdefault(zero[0], int(m.group(1)))
        m = _ROWS_FOR_TOKENS.search(str(exc))
        if m:
            seen.setdefault(m.group(2), int(m.group(1)))
    finally:
        for sub, name in undo + undo_made:
            delattr(sub, name)
    seen = {**made, **seen}  # the placeholder check's count first; the features made where nothing checks
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


def _images_per_sample(spec: dict, n: int) -> dict | None:
    """(B, C, H, W) -> (B, n, C, H, W); None when there are no such images."""
    pix = spec.get("pixel_values")
    if not pix or len(pix["shape"]) != 4:
        return None
    b, c, h, w = pix["shape"]
    return {**spec, "pixel_values": {**pix, "shape": [b, n, c, h, w]}}


def _add_image_axis(spec: dict) -> dict | None:
    """(B, C, H, W) -> (B, 1, C, H, W): models that take several images per sample."""
    return _images_per_sample(spec, 1)


_PAIR = re.compile(r"5D tensor of shape \(batch_size, (\d+), num_channels")


def _image_group(spec: dict, error: str) -> dict | None:
    """(B, C, H, W) -> (B, n, C, H, W): matchers that take n images at once (EfficientLoFTR: pairs)."""
    m = _PAIR.search(error)
    return _images_per_sample(spec, int(m.group(1))) if m else None


def _add_image_sizes(spec: dict) -> dict | None:
    """Give (height, width) per image: any-resolution models need it though the argument is optional."""
    pix = spec.get("pixel_values")
    if not pix or "image_sizes" in spec:
        return None
    h, w = pix["shape"][-2:]
    return {**spec, "image_sizes": {"kind": "tensor", "value": [[h, w]] * pix["shape"][0]}}


def _tile_mask(spec: dict) -> dict | None:
    """(B, C, H, W) -> (B, 1, C, H, W) with a (B, tiles) mask of real tiles: tiled towers that count tiles
    off the mask they require though the argument is optional (Granite Docling)."""
    pix = spec.get("pixel_values")
    if not pix or "pixel_attention_mask" in spec or len(pix["shape"]) not in (4, 5):
        return None
    shape = pix["shape"] if len(pix["shape"]) == 5 else [pix["shape"][0], 1, *pix["shape"][1:]]
    return {**spec, "pixel_values": {**pix, "shape": shape},
            "pixel_attention_mask": {"kind": "ones", "shape": shape[:2], "dtype": "bool"}}


def _features_last(spec: dict) -> dict | None:
    """(B, mel, frames) -> (B, frames, mel): speech encoders that project each frame's features."""
    feats = spec.get("input_features")
    if not feats or len(feats["shape"]) != 3:
        return None
    b, mel, frames = feats["shape"]
    return {**spec, "input_features": {**feats, "shape": [b, frames, mel]}}


def _spectrogram_image(spec: dict) -> dict | None:
    """(B, mel, frames) -> (B, 1, frames, mel): spectrograms read as one-channel images, time by frequency (CLAP)."""
    feats = spec.get("input_features")
    if not feats or len(feats["shape"]) != 3:
        return None
    b, mel, frames = feats["shape"]
    return {**spec, "input_features": {**feats, "shape": [b, 1, frames, mel]}}


def _mono_channel(spec: dict) -> dict | None:
    """(B, T) -> (B, 1, T): audio codecs convolve over a channel axis."""
    vals = spec.get("input_values")
    if not vals or len(vals["shape"]) != 2:
        return None
    return {**spec, "input_values": {**vals, "shape": [vals["shape"][0], 1, vals["shape"][1]]}}


def _samples_padding_mask(spec: dict) -> dict | None:
    """A padding mask over the waveform's samples, all real: models that count the samples it keeps (VibeVoice)."""
    vals = spec.get("input_values")
    if not vals or "padding_mask" in spec:
        return None
    return {**spec, "padding_mask": {"kind": "ones", "shape": [vals["shape"][0], vals["shape"][-1]], "dtype": "bool"}}


_SPLIT = re.compile(r"split_sizes to sum exactly to \d+ \(input tensor's size at dimension 0\), but got split_sizes=\[(\d+)")


def _patches_per_image(spec: dict, error: str) -> dict | None:
    """(B, C, H, W) -> (B, n, C, H, W): any-resolution models (LLaVA-NeXT) cut each image into n tiles."""
    m = _SPLIT.search(error)
    return _images_per_sample(spec, int(m.group(1))) if m else None


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


def _patch_count(shape: list, width: int) -> int | None:
    """How many square patches of `width` flattened values (C*p*p) cover one (B, C, H, W) image; None if no p fits."""
    _, c, h, w = shape
    p = math.isqrt(width // c)
    return -(-h // p) * -(-w // p) if p and c * p * p == width else None


def _image_as_patches(spec: dict, error: str) -> dict | None:
    """(B, C, H, W) -> (B, patches, C*p*p): models whose patch embedding is a linear layer over flattened patches (Fuyu)."""
    m, pix = _MATMUL.search(error), spec.get("pixel_values")
    if not m or not pix or len(pix["shape"]) != 4 or int(m.group(2)) != pix["shape"][3]:
        return None
    want = int(m.group(3))
    patches = _patch_count(pix["shape"], want)
    return {**spec, "pixel_values": {**pix, "shape": [pix["shape"][0], patches, want]}} if patches else None


_RESHAPE_LAST = re.compile(r"shape '\[-1, ([\d, ]+)\]' is invalid for input of size (\d+)")


def _patch_squares(spec: dict, error: str) -> dict | None:
    """Flattened rows (N, C*p*p) -> (N, s, s, 3): towers that read each row as a channels-last square of pixels
    and cut it themselves (Inkling 2: reshape(-1, merge, patch, merge, patch, channels), channels = the last axis)."""
    m, pix = _RESHAPE_LAST.search(error), spec.get("pixel_values")
    if not m or not pix or len(pix["shape"]) != 2:
        return None
    dims = [int(x) for x in m.group(1).split(",")]
    n, d = pix["shape"]
    inner = math.prod(dims[:-1])
    side = math.isqrt(inner)
    if dims[-1] != d or int(m.group(2)) != n * d or side * side != inner or d % 3:
        return None
    return {**spec, "pixel_values": {**pix, "shape": [n, side, side, 3]}}


_PATCH_WIDTH = re.compile(r"patch width \d+ but the model expects (\d+)")


def _image_as_patch_rows(spec: dict, error: str) -> dict | None:
    """(B, C, H, W) -> (B * patches, C*p*p): models that embed every patch of the batch as one row (NeoMME)."""
    m, pix = _PATCH_WIDTH.search(error), spec.get("pixel_values")
    if not m or not pix or len(pix["shape"]) != 4:
        return None
    want = int(m.group(1))
    patches = _patch_count(pix["shape"], want)
    return {**spec, "pixel_values": {**pix, "shape": [pix["shape"][0] * patches, want]}} if patches else None


_NORM_WIDTH = re.compile(r"normalized_shape=\[(\d+)\], expected input with shape \[\*, \d+\], but got input of size\s*\[(\d+), (\d+), (\d+)\]")


def _patch_row_width(spec: dict, error: str) -> dict | None:
    """Patch rows (B, n, C*p*p) as wide as the layer norm over them wants: towers that embed merged
    patches of (patch x pooling kernel) pixels (Gemma 4 unified: 48 x 48 x 3)."""
    m, pix = _NORM_WIDTH.search(error), spec.get("pixel_values")
    if not m or not pix or len(pix["shape"]) != 3:
        return None
    want, got = int(m.group(1)), [int(g) for g in m.groups()[1:]]
    if got != pix["shape"] or want % 3 or want == got[-1]:
        return None
    return {**spec, "pixel_values": {**pix, "shape": [*got[:2], want]}}


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
    return _masks_follow({**spec, "input_features": {**feats, "shape": [*feats["shape"][:-1], new]}}, "input_features", frames, new)


def _masks_follow(spec: dict, media: str, old: int, new: int) -> dict:
    """spec with every mask whose last axis ran along the media input's old length (old) resized to new."""
    return {key: {**item, "shape": [*item["shape"][:-1], new]}
            if key != media and "mask" in key and item.get("shape", [None])[-1] == old else item
            for key, item in spec.items()}


_SIZES = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")


def _features_last_by_size(spec: dict, error: str) -> dict | None:
    """Features last when the model's error pits the mel-bin count against the frame count."""
    feats, m = spec.get("input_features"), _SIZES.search(error)
    if not feats or not m or len(feats["shape"]) != 3 or {int(m.group(1)), int(m.group(2))} != set(feats["shape"][1:]):
        return None
    return _features_last(spec)


def _stacked_features(spec: dict, error: str) -> dict | None:
    """(B, mel, frames) -> (B, frames, k x mel) when the model's error pits the frame count against a multiple
    of the mel bins: low-frame-rate encoders read k stacked frames per step (Fun-ASR-Nano: 7 x 80)."""
    feats, m = spec.get("input_features"), _SIZES.search(error)
    if not feats or not m or len(feats["shape"]) != 3:
        return None
    b, mel, frames = feats["shape"]
    a, want = int(m.group(1)), int(m.group(2))
    if a != frames or want == mel or want % mel:
        return None
    return {**spec, "input_features": {**feats, "shape": [b, frames, want]}}


def _text_per_frame(spec: dict, error: str) -> dict | None:
    """As many text tokens as audio frames when the model's error pits the text length against another count:
    streaming speech models add one audio frame's embedding to each token (Voxtral Realtime)."""
    ids, m = spec.get("input_ids"), _SIZES.search(error)
    if not ids or not m or not any(k in spec for k in ("input_features", "input_values")) or ids.get("prefix"):
        return None
    length, want = int(m.group(1)), int(m.group(2))
    if ids["shape"][1] != length or want <= 0:
        return None
    spec = dict(spec)
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        if key in spec and spec[key].get("shape", [None, None])[1:2] == [length]:
            spec[key] = {**spec[key], "shape": [spec[key]["shape"][0], want, *spec[key]["shape"][2:]]}
    return spec


def _codebook_axis(spec: dict, error: str) -> dict | None:
    """Codes as a last axis, (B * codebooks, S) -> (B, S, K), when the model's error pits the length against K:
    models that embed a text stream and every codebook at each step and sum them (Kyutai STT)."""
    from harness.discovery.specs import BATCH

    ids, m = spec.get("input_ids"), _SIZES.search(error)
    if not ids or not m or len(ids["shape"]) != 2 or ids["shape"][0] <= BATCH or ids["shape"][1] != int(m.group(1)):
        return None
    return {**spec, "input_ids": {"kind": "randint", "shape": [BATCH, ids["shape"][1], int(m.group(2))], "high": ids["high"]}}


def _features_of_width(spec: dict, error: str) -> dict | None:
    """Features as wide as the model where they go in as the encoder's embeddings (Pop2Piano: mel bins
    are d_model): the size clash pits the model's width against the features' last axis."""
    feats, m = spec.get("input_features"), _SIZES.search(error)
    if not feats or not m or len(feats["shape"]) != 3:
        return None
    a, b = int(m.group(1)), int(m.group(2))
    last = feats["shape"][-1]
    width = a if b == last else b if a == last else None
    if width is None or width in feats["shape"]:
        return None
    return {**spec, "input_features": {**feats, "shape": [*feats["shape"][:-1], width]}}


_SAMPLES_MULTIPLE = re.compile(r"input_values` length \d+ is not a multiple of (\d+)")


def _samples_multiple(spec: dict, error: str) -> dict | None:
    """Waveform samples rounded up to the hop the codec frames by (Muse Spark audio: a multiple of 96)."""
    vals, m = spec.get("input_values"), _SAMPLES_MULTIPLE.search(error)
    if not vals or not m:
        return None
    n = int(m.group(1))
    new = -(-vals["shape"][-1] // n) * n
    return _masks_follow({**spec, "input_values": {**vals, "shape": [*vals["shape"][:-1], new]}}, "input_values", vals["shape"][-1], new)


# HunYuan-VL's "image tokens do not match: tokens: N, features M", HY-V4-VL's "image tokens do not match,
# tokens: N, features: M" and Inkling 2's "placeholder tokens do not match, tokens: N, features: M" count tokens.
# LLaVA on transformers 5.18 says HY-V4-VL's words with its features counted in elements (the text width times
# the tokens): in those words (and only those) _image_token_count takes a count up to twice the placeholders it has.
_TOKENS_FEATURES = re.compile(r"features and (image tokens do not match,|image tokens do not match:|placeholder tokens do not match,) tokens: (\d+), features:? (\d+)")


def _image_token_count(spec: dict, error: str) -> dict | None:
    """A grid model that makes more features per image than the grid's merged patches (extra row/boundary
    features, HunYuan-VL; a placeholder it has none of yet, Dots 3, T5Gemma 2): as many image tokens per sample
    as its error says it made features. In the words LLaVA shares ("image tokens do not match, tokens:"), only
    up to twice the tokens it has: more, or any for none, is LLaVA's element count, not this repair's."""
    ids, m = spec.get("input_ids", {}), _TOKENS_FEATURES.search(error)
    prefix = ids.get("prefix") or []
    words, tokens, feats = (m.group(1), int(m.group(2)), int(m.group(3))) if m else ("", 0, 0)
    batch = ids.get("shape", [1])[0]
    hit = [i for i, (_, n) in enumerate(prefix) if n * batch == tokens]
    most = 2 * tokens if words == "image tokens do not match," else feats   # LLaVA's words may count elements
    if not m or len(hit) != 1 or feats % batch or not tokens < feats <= most:
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


_CAT = re.compile(r"Sizes of tensors must match except in dimension \d+\. Expected size (\d+) but got size (\d+)")


def _frames_per_waveform(spec: dict, error: str) -> dict | None:
    """Feature frames cut to the waveform's frame count: codecs that concatenate a semantic branch (over
    features) with an acoustic one (over samples) want one feature frame per hop of samples (X-Codec 2)."""
    feats, m = spec.get("input_features"), _CAT.search(error)
    if not feats or "input_values" not in spec or not m or len(feats["shape"]) != 3:
        return None
    frames, want = int(m.group(1)), int(m.group(2))
    axes = [i for i, n in enumerate(feats["shape"]) if i and n == frames]
    if len(axes) != 1:
        return None
    shape = list(feats["shape"])
    shape[axes[0]] = want
    return _masks_follow({**spec, "input_features": {**feats, "shape": shape}}, "input_features", frames, want)


_CHANNELS = re.compile(r"expected input\[\d+, 1, \d+\] to have (\d+) channels, but got 1 channels")


def _waveform_as_latents(spec: dict, error: str) -> dict | None:
    """(B, 1, samples) -> (B, width, frames): a codec's decoder stage takes latents of the width its first
    conv says, under the same waveform name as its encoder (VibeVoice's tokenizer decoder)."""
    m = _CHANNELS.search(error)
    key = next((k for k in ("input_values", "hidden_states") if len(spec.get(k, {}).get("shape", ())) == 3), None)
    if not m or key is None or int(m.group(1)) < 8:  # a few channels are stereo audio, not latents
        return None
    from harness.discovery.specs import SEQ

    return {**spec, key: {**spec[key], "shape": [spec[key]["shape"][0], int(m.group(1)), SEQ]}}


_NORM = re.compile(r"normalized_shape=\[(\d+)\], expected input with shape \[\*, \d+\], but got input of size\[(\d+), (\d+)\]")


def _values_as_hidden_states(spec: dict, error: str) -> dict | None:
    """(B, samples) -> (B, SEQ, width): a model built without its pre-nets (SpeechT5Model) takes hidden
    states under the waveform's name; its decoder values get the same width."""
    vals, m = spec.get("input_values"), _NORM.search(error)
    if not vals or not m or vals["shape"] != [int(m.group(2)), int(m.group(3))]:
        return None
    from harness.discovery.specs import SEQ

    width, (b, samples) = int(m.group(1)), vals["shape"]
    out = {**spec, "input_values": {**vals, "shape": [b, SEQ, width]}}
    for key, item in spec.items():
        if "mask" in key and item.get("shape") == [b, samples]:
            out[key] = {**item, "shape": [b, SEQ]}
    dec = spec.get("decoder_input_values")
    if dec and len(dec["shape"]) == 3:
        out["decoder_input_values"] = {**dec, "shape": [*dec["shape"][:2], width]}
    return out


_EITHER = re.compile(r"cannot specify both input_ids and inputs_embeds|size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")


def _audio_instead_of_text(spec: dict, error: str) -> dict | None:
    """The audio alone where an encoder-decoder's encoder reads text or audio, not both (Pop2Piano takes
    features as the encoder's embeddings, SeamlessM4T masks the speech by the text's mask): no ids, no token mask."""
    m, ids = _EITHER.search(error), spec.get("input_ids")
    if not m or not ids or "decoder_input_ids" not in spec or not any(k in spec for k in ("input_features", "input_values")):
        return None
    if m.group(1) and ids["shape"][1] not in (int(m.group(1)), int(m.group(2))):
        return None  # a size clash that is not the token sequence's
    return {k: v for k, v in spec.items() if k != "input_ids" and not (k == "attention_mask" and v.get("kind") == "ones")}


def _drop_ones_mask(spec: dict) -> dict | None:
    """No attention_mask where the model hands it as-is to attention (an audio tower that says it does not
    support masking, MOSS): an all-ones mask over frames means no masking anyway."""
    if spec.get("attention_mask", {}).get("kind") != "ones":
        return None
    return {k: v for k, v in spec.items() if k != "attention_mask"}


def _mel_bins_by_projection(spec: dict, error: str) -> dict | None:
    """Mel bins scaled so a conv subsampler's output fits the projection after it: the projection's width is
    (bins / stride) x channels, with bins fixed by the checkpoint, not the config (Gemma 4 audio: 128)."""
    feats, m = spec.get("input_features"), _MATMUL.search(error)
    if not feats or not m or len(feats["shape"]) != 3:
        return None
    rows, got, want = (int(g) for g in m.groups())
    b, frames, mel = feats["shape"]
    # rows are the subsampled frames (b x frames / stride) only when the features are already last;
    # a plain per-frame projection (got is mel or frames) wants the features' orientation changed, not their count
    if got in (mel, frames) or rows in (b * mel, b * frames) or (b * frames) % rows or (mel * want) % got:
        return None
    return {**spec, "input_features": {**feats, "shape": [b, frames, mel * want // got]}}


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
    (re.compile(r"expected 4, got 3"), _add_image_axis),  # the tower gets (B * images, C, H, W) off a 4-D input (IDEFICS)
    (_PAIR, _image_group),
    (re.compile(r"expected 5, got 3"), _patches_as_images),  # the tower adds the sequence axis itself (PaddleOCR-VL)
    (re.compile(r"'NoneType' object is not (iterable|subscriptable)|has no len|image_sizes"), _add_image_sizes),
    (re.compile(r"'NoneType' object has no attribute 'sum'"), _tile_mask),
    (_MATMUL, _mel_bins_by_projection),  # before the features-last swap, which would undo an earlier one
    (_NORM_WIDTH, _patch_row_width),
    (re.compile(r"mat1 and mat2 shapes cannot be multiplied|normalized_shape|Expected \d+D|to have \d+ channels"), _features_last),
    (re.compile(r"to have 1 channels|expected 3, got 2|Expected 3D|must be mono|too many indices for tensor of dimension 2"), _mono_channel),
    (re.compile(r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 3\)"), _spectrogram_image),
    (re.compile(r"'NoneType' object has no attribute 'sum'"), _samples_padding_mask),
    (_SPLIT, _patches_per_image),
    (_MATMUL, _patch_width),
    (_MATMUL, _image_as_patches),
    (_RESHAPE_LAST, _patch_squares),
    (_PATCH_WIDTH, _image_as_patch_rows),
    (_MULTIPLE, _frames_multiple),
    (_SIZES, _features_last_by_size),
    (_SIZES, _stacked_features),
    (_SIZES, _text_per_frame),
    (_SIZES, _codebook_axis),
    (_SIZES, _features_of_width),
    (_SAMPLES_MULTIPLE, _samples_multiple),
    (_TOKENS_FEATURES, _image_token_count),
    (re.compile(r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d"), _patches_as_images),
    (_CAT, _frames_per_waveform),
    (_NORM, _values_as_hidden_states),
    (_EITHER, _audio_instead_of_text),
    (_CHANNELS, _waveform_as_latents),
    (re.compile(r"Expected attn_mask dtype to be bool or float"), _drop_ones_mask),
    (_TOO_SMALL, _image_scaled_to_patch),
)


def repair_inputs(module: Any, spec: dict, device: str, applied: list[str] | None = None,
                  evidence: list[dict] | None = None) -> dict:
    """One eager forward; if it fails with an error an input repair knows, apply it and try again.

    applied: the names of the repairs made are appended to it. evidence: for each, its name, the error text it
    handled and the spec before and after (scripts/zoo_repair_cases.py records them as test data).
    """
    from harness.discovery.specs import BATCH

    codes = spec.get("input_ids", {}).get("shape", [BATCH])[0] > BATCH  # one row per codebook: audio codes
    if not codes and not any(k in spec for k in ("pixel_values", "input_features", "input_values", "hidden_states")):
        return spec  # the repairs are about images, audio features and codes; text models skip the extra forward
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
                    if applied is not None:
                        applied.append(fix.__name__.lstrip("_"))
                    if evidence is not None:
                        evidence.append({"repair": fix.__name__, "error": str(exc)[:2000], "before": spec, "after": new})
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
