"""Derive an input spec (plain data, see inputs.py) from a model's forward signature and config."""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

BATCH = 2
SEQ = 16
DEC_SEQ = 8
AUDIO_SAMPLES = 8000
MAX_FRAMES = 256
MAX_ID = 1000
REGIONS = 8  # detected regions per image for region-feature models
NAFLEX_SIDE = 8  # patches per side of a native-resolution image (divisible by 2 and 4 for pixel unshuffles)


# feature widths of an audio tower's input frames, and how many frames it gets
TOWER_WIDTHS = ("input_size", "num_mel_bins", "n_mels", "input_feat_per_channel")
TOWER_FRAMES = 64


def forward_params(cls: type) -> dict[str, inspect.Parameter]:
    """The named parameters of cls.forward (no self, *args, **kwargs)."""
    params = inspect.signature(cls.forward).parameters
    return {k: p for k, p in params.items() if k != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


ID_KEYS = ("token_id", "token_index", "token_ids", "_id")   # how the keys of special token ids end
ID_LIST_KEYS = ("token_id", "token_ids")                    # ... and of lists of them


def special_ids(d: Any, out: set[int] | None = None) -> set[int]:
    """Every integer token id named in a config dict, at any depth."""
    out = set() if out is None else out
    if isinstance(d, dict):
        for k, v in d.items():
            if not isinstance(k, str):
                continue
            if k.endswith(ID_KEYS) and isinstance(v, int) and not isinstance(v, bool):
                out.add(v)
            elif k.endswith(ID_LIST_KEYS) and isinstance(v, list):
                out.update(x for x in v if isinstance(x, int))
            elif isinstance(v, dict):
                special_ids(v, out)
    return out


def _get(config: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        v = getattr(config, n, None)
        if v is not None:
            return v
    return default


def _deep_get(config: Any, *names: str) -> Any:
    """The first of names set on a config or, breadth first, on its nested sub-configs (an ASR encoder's mel bins)."""
    queue = [config]
    while queue:
        c = queue.pop(0)
        v = _get(c, *names)
        if v is not None:
            return v
        queue += [x for x in vars(c).values() if hasattr(x, "to_dict") and not isinstance(x, type)]
    return None


def sub(config: Any, *names: str) -> Any:
    """The first sub-config present among names, else None."""
    for n in names:
        v = getattr(config, n, None)
        if v is not None and hasattr(v, "to_dict"):
            return v
    return None


def text_config(config: Any) -> Any:
    """The config that holds the vocabulary."""
    try:
        tc = config.get_text_config(decoder=True)
    except Exception:
        tc = None
    if tc is not None and isinstance(getattr(tc, "vocab_size", None), int):
        return tc
    s = sub(config, "text_config", "language_config", "llm_config", "decoder", "decoder_config", "lm_config")
    return s if s is not None else config


def vision_config(config: Any) -> Any:
    """The config that describes images, or None."""
    s = sub(config, "vision_config", "visual_config", "vision_tower_config", "image_config", "vit_config", "encoder")
    if s is not None and _get(s, "image_size", "patch_size") is not None:
        return s
    if _get(config, "image_size", "patch_size") is not None:
        return config
    # the size lives on the backbone only (LW-DETR's windowed ViT, which takes no other size)
    bb = sub(config, "backbone_config")
    if bb is not None and _get(bb, "image_size") is not None:
        return bb
    return None


def audio_config(config: Any) -> Any:
    """The config that describes audio, or None."""
    s = sub(config, "audio_config", "speech_config", "audio_encoder_config", "encoder", "encoder_config")
    if s is not None and _get(s, "num_mel_bins", "feature_size", "conv_dim", "sampling_rate", "input_dim") is not None:
        return s
    if _get(config, "num_mel_bins", "feature_size", "conv_dim") is not None:
        return config
    return None


def ids_spec(config: Any, cfg_dict: dict, length: int, prefix: list | None = None, vocab_config: Any = None) -> dict:
    """Token ids for the text model (or vocab_config's), avoiding special ids."""
    vocab = _get(vocab_config or text_config(config), "vocab_size", default=MAX_ID) or MAX_ID
    high = max(2, min(vocab, MAX_ID))
    spec: dict = {"kind": "ids", "shape": [BATCH, length], "high": high, "avoid": sorted(i for i in special_ids(cfg_dict) if i < high)}
    if prefix:
        spec["prefix"] = prefix
    return spec


def image_size(vc: Any) -> tuple[int, int]:
    """(height, width) of an image for a vision config."""
    size = _get(vc, "image_size", default=224)
    if isinstance(size, dict):
        size = size.get("height") or size.get("shortest_edge") or 224
    if isinstance(size, (list, tuple)):
        return int(size[0]), int(size[-1])
    return int(size), int(size)


def grid_pixels(vc: Any) -> tuple[dict, int]:
    """Flattened patches and a (t, h, w) grid per image for grid-style VLMs (Qwen2-VL family)."""
    patch = _get(vc, "patch_size", default=14)
    temporal = _get(vc, "temporal_patch_size", default=1)
    merge = _get(vc, "spatial_merge_size", default=2)
    channels = _get(vc, "in_channels", "num_channels", default=3)
    side = 2 * merge
    per_image = side * side
    pixels = {"kind": "randn", "shape": [BATCH * per_image, channels * temporal * patch * patch]}
    return {"pixel_values": pixels, "image_grid_thw": {"kind": "tensor", "value": [[1, side, side]] * BATCH}}, per_image // (merge * merge)


def token_pooling(vc: Any, pixel_shape: list) -> dict:
    """Image tokens that each pool a 2 x 2 window of patches (Molmo 2): per token the indices of its patches in
    the flattened crops (one crop per image), and per image its (rows, cols, 0, 0) token grid."""
    side = pixel_shape[-1] // _get(vc, "patch_size", default=14)
    pooling = [[b * side * side + (2 * r + i) * side + 2 * c + j for i in (0, 1) for j in (0, 1)]
               for b in range(BATCH) for r in range(2) for c in range(2)]
    return {"image_token_pooling": {"kind": "tensor", "value": pooling},
            "image_grids": {"kind": "tensor", "value": [[2, 2, 0, 0]] * BATCH}}


FEATURE_MASKS = ("input_features_mask", "feature_attention_mask", "input_features_attention_mask",
                 "audio_attention_mask", "audio_feature_attention_mask")


@dataclass
class _Ctx:
    """What the per-modality spec builders share: the class, its config, and the spec being built."""

    cls: type
    config: Any
    cfg_dict: dict
    stratum: str
    params: dict
    overrides: dict
    spec: dict = field(default_factory=dict)
    prefix: list = field(default_factory=list)
    frames: int | None = None

    def __post_init__(self) -> None:
        self.vc = vision_config(self.config)
        self.ac = audio_config(self.config)
        self.image_token = _get(self.config, "image_token_id", "image_token_index", "video_token_index", "video_token_id")
        params = self.params
        self.grid_arg = "image_grid_thw" if "image_grid_thw" in params else ("grid_thw" if "grid_thw" in params else None)
        self.first = next(iter(params), None)
        # patch (x, y) positions: the tower's own name, or the multimodal model's (Gemma 4)
        self.pos_arg = "pixel_position_ids" if "pixel_position_ids" in params else "image_position_ids"
        self.no_audio_tower = "audio_config" in self.cfg_dict and self.cfg_dict["audio_config"] is None
        self.audio_token = _get(self.config, "audio_token_id", "audio_token_index")

    @property
    def vsrc(self) -> Any:
        """The vision config, else the model's own."""
        return self.vc if self.vc is not None else self.config

    def wants(self, name: str) -> bool:
        """The forward takes name and no recipe sets it."""
        return name in self.params and name not in self.overrides


def _grid_tower(c: _Ctx) -> None:
    """A grid-style vision tower on its own: flattened patches + their grid."""
    pix, _ = grid_pixels(c.vsrc)
    c.spec[c.first] = pix["pixel_values"]
    c.spec["grid_thw"] = pix["image_grid_thw"]


def _naflex(c: _Ctx) -> None:
    """Native-resolution patches (SigLIP-2 NaFlex): (B, patches, C*p*p) with each image's patch grid."""
    p, channels = _get(c.vsrc, "patch_size", default=16), _get(c.vsrc, "num_channels", default=3)
    c.spec["pixel_values"] = {"kind": "randn", "shape": [BATCH, NAFLEX_SIDE ** 2, channels * p * p]}
    c.spec["spatial_shapes"] = {"kind": "tensor", "value": [[NAFLEX_SIDE, NAFLEX_SIDE]] * BATCH}
    if "pixel_attention_mask" in c.params:
        c.spec["pixel_attention_mask"] = {"kind": "ones", "shape": [BATCH, NAFLEX_SIDE ** 2]}
    if c.image_token is not None and "input_ids" in c.params:
        c.prefix = [[c.image_token, 0]]  # the count is found by probing the forward


def _positioned_patches(c: _Ctx) -> None:
    """Patches with their (x, y) grid positions (Gemma 4 vision): a square grid that the pooling kernel tiles."""
    p, channels = _get(c.vsrc, "patch_size", default=16), _get(c.vsrc, "num_channels", default=3)
    k = _get(c.vsrc, "pooling_kernel_size", default=1)
    side = -(-NAFLEX_SIDE // k) * k
    c.spec["pixel_values"] = {"kind": "rand", "shape": [BATCH, side * side, channels * p * p]}
    c.spec[c.pos_arg] = {"kind": "tensor", "value": [[[x, y] for y in range(side) for x in range(side)]] * BATCH}
    if c.image_token is not None and "input_ids" in c.params:
        c.prefix = [[c.image_token, 0]]  # the count is found by probing the forward


def _tiled(c: _Ctx) -> None:
    """Tiled images (Mllama): (B, images, tiles, C, H, W), one image of one tile each."""
    h, w = image_size(c.vc) if c.vc is not None else (224, 224)
    channels = _get(c.vsrc, "num_channels", default=3)
    tiles = _get(c.vsrc, "max_num_tiles", default=1)  # tile embeddings span them all
    c.spec["pixel_values"] = {"kind": "randn", "shape": [BATCH, 1, tiles, channels, h, w]}
    c.spec["aspect_ratio_ids"] = {"kind": "ones", "shape": [BATCH, 1]}
    c.spec["aspect_ratio_mask"] = {"kind": "ones", "shape": [BATCH, 1, tiles]}
    if c.image_token is not None and "input_ids" in c.params:
        c.prefix = [[c.image_token, 1]]
        if "cross_attention_mask" in c.params:
            c.spec["cross_attention_mask"] = {"kind": "ones", "shape": [BATCH, SEQ + 1, 1, tiles]}


def _grid_images(c: _Ctx) -> None:
    """Grid-style VLMs (Qwen2-VL family): flattened patches, their grid, and vision start/image/end tokens."""
    pix, n_tokens = grid_pixels(c.vc)
    c.spec.update(pix)
    start, end = _get(c.config, "vision_start_token_id"), _get(c.config, "vision_end_token_id")
    c.prefix = (([[start, 1]] if start is not None else []) + ([[c.image_token, n_tokens]] if c.image_token is not None else [])
                + ([[end, 1]] if end is not None else []))


def _plain_images(c: _Ctx) -> None:
    """Images (or video frames) as (B, C, H, W) at the config's size, with the side inputs their forward names."""
    # no image_size anywhere (CvT, ResNet-likes): a 224 square image is what their defaults expect,
    # unless the config caps it (TVP pads every frame's prompt to max_img_size)
    side = _get(c.config, "max_img_size", default=224)
    h, w = image_size(c.vc) if c.vc is not None else (side, side)
    src = c.vsrc
    channels = _get(src, "num_channels", "in_channels", "in_chans", default=3)
    frames = _get(src, "num_frames")
    if isinstance(frames, int) and frames > 1:
        # video transformers (VideoMAE, ViViT): (batch, frames, channels, height, width)
        c.spec["pixel_values"] = {"kind": "randn", "shape": [BATCH, frames, channels, h, w]}
    else:
        c.spec["pixel_values"] = {"kind": "randn", "shape": [BATCH, channels, h, w]}
    if c.image_token is not None and "input_ids" in c.params:
        # a Q-Former hands over a fixed number of query tokens; otherwise probe the forward for the count
        c.prefix = [[c.image_token, _get(c.config, "num_query_tokens", default=0)]]
    if "pixel_mask" in c.params:
        c.spec["pixel_mask"] = {"kind": "ones", "shape": [BATCH, h, w]}
    if "target_sizes" in c.params and _get(src, "patch_size"):
        # patch-grid size per image (MiniCPM-V): (rows, columns) of patches
        # the images come packed side by side as one row of patches: (1, C, p, patches * p)
        # (two 2 x 2 merges downstream: a side of patches divisible by 4)
        p = _get(src, "patch_size")
        side = -(-(h // p) // 4) * 4
        c.spec["target_sizes"] = {"kind": "tensor", "value": [[side, side]] * BATCH}
        c.spec["pixel_values"] = {"kind": "randn", "shape": [1, channels, p, BATCH * side * side * p]}
    if "image_sizes" in c.params and c.params["image_sizes"].default is inspect.Parameter.empty:
        c.spec["image_sizes"] = {"kind": "tensor", "value": [[h, w]] * BATCH}


def _images(c: _Ctx) -> None:
    """The image inputs: the first layout that the forward's parameters and the config describe."""
    params, overrides = c.params, c.overrides
    if c.grid_arg == "grid_thw" and c.first in ("pixel_values", "hidden_states") and c.first not in overrides:
        _grid_tower(c)
    elif "pixel_values" in params and "vision_config" in c.cfg_dict and c.cfg_dict["vision_config"] is None:
        pass  # built without a vision tower (its default): text only, and said so in make_spec
    elif c.wants("pixel_values") and "spatial_shapes" in params:
        _naflex(c)
    elif c.wants("pixel_values") and c.pos_arg in params:
        _positioned_patches(c)
    elif c.wants("pixel_values") and "aspect_ratio_ids" in params:
        _tiled(c)
    elif "pixel_values" in overrides and c.image_token is not None and "input_ids" in params:
        c.prefix = [[c.image_token, 0]]  # a recipe's images still need their placeholders: the count is probed
    elif c.wants("pixel_values"):
        if c.vc is not None and c.grid_arg == "image_grid_thw":
            _grid_images(c)
        else:
            _plain_images(c)


def _patch_media(c: _Ctx) -> None:
    """Pix2Struct's flattened patches and video-only towers' frames."""
    if c.wants("flattened_patches"):
        # Pix2Struct: (B, patches, 2 + C*p*p), the first two columns the patch's row and column (0 here)
        src = c.vsrc
        p, channels = _get(src, "patch_size", default=16), _get(src, "num_channels", default=3)
        width = _get(src, "patch_embed_hidden_size") or _deep_get(src, "patch_embed_hidden_size") or channels * p * p
        c.spec["flattened_patches"] = {"kind": "rand", "shape": [BATCH, SEQ, 2 + width]}
        if "attention_mask" in c.params:
            c.spec["attention_mask"] = {"kind": "ones", "shape": [BATCH, SEQ]}
    if c.wants("pixel_values_videos") and "pixel_values" not in c.params:
        # video-only towers (VideoPrism): (batch, frames, channels, height, width)
        src = c.vsrc
        h, w = image_size(src)
        frames = _get(src, "num_frames", default=4)
        frames = min(frames, 4) if isinstance(frames, int) else 4
        c.spec["pixel_values_videos"] = {"kind": "randn", "shape": [BATCH, frames, _get(src, "num_channels", default=3), h, w]}


def _vision_extras(c: _Ctx) -> None:
    """Region features, language ids, merge sizes, pooled tokens, high-resolution images: what sits beside images."""
    config, params, spec = c.config, c.params, c.spec
    feat_dim = _get(config, "visual_feat_dim")
    if c.wants("visual_feats") and isinstance(feat_dim, int):
        # detected-region features (LXMERT): (batch, regions, feature width), and each region's box
        spec["visual_feats"] = {"kind": "randn", "shape": [BATCH, REGIONS, feat_dim]}
        if "visual_pos" in params:
            spec["visual_pos"] = {"kind": "rand", "shape": [BATCH, REGIONS, _get(config, "visual_pos_dim", default=4)]}
    languages = _get(config, "languages")
    if c.wants("lang_ids") and isinstance(languages, (list, tuple)) and languages:
        # per-language adapters (X-MOD): one language index per sample, among the config's languages
        spec["lang_ids"] = {"kind": "randint", "shape": [BATCH], "high": len(languages)}
    for name in ("merge_sizes", "image_merge_sizes"):
        if c.wants(name) and ("grid_thw" in spec or "image_grid_thw" in spec):
            # per-image merge factor next to each grid (VideoLLaMA 3)
            merge = _get(c.vsrc, "spatial_merge_size", "merge_size", default=2)
            spec[name] = {"kind": "tensor", "value": [merge] * BATCH}
    if c.wants("image_token_pooling") and "image_grids" in params and "pixel_values" in spec:
        spec.update(token_pooling(c.vsrc, spec["pixel_values"]["shape"]))
    if c.wants("high_res_pixel_values") and "pixel_values" in spec:
        # hybrid towers (DeepSeek-VL hybrid): the same image again at the high-resolution tower's size
        hc = sub(config, "high_res_vision_config")
        h, w = image_size(hc) if hc is not None else spec["pixel_values"]["shape"][-2:]
        spec["high_res_pixel_values"] = {"kind": "randn", "shape": [*spec["pixel_values"]["shape"][:-2], h, w]}


MEL_NAMES = ("num_mel_bins", "feature_projection_input_dim", "feature_size", "n_mels", "input_feat_per_channel", "input_dim",
             "num_chroma")  # chroma bins: a melody conditioner (MusicGen Melody)


def _audio_in(c: _Ctx) -> None:
    """Audio features (mel frames) or a waveform, and the audio placeholder tokens in the text."""
    params, overrides = c.params, c.overrides
    if (c.ac is not None or "input_features" in params or "input_values" in params) and not c.no_audio_tower:
        src = c.ac if c.ac is not None else c.config
        # an encoder with a conv feature extractor and no feature count reads the waveform (wav2vec2 under a
        # speech encoder-decoder that takes either)
        waveform = "input_values" in params and _get(src, "conv_dim") is not None and _get(src, *MEL_NAMES) is None
        if "input_features" in params and "input_features" not in overrides and not waveform:
            mels = _get(src, *MEL_NAMES) or _deep_get(src, *MEL_NAMES) or 80
            # Whisper-style encoders need exactly 2 x max_source_positions frames (shrunk to 128);
            # others take any length: 256 frames keeps them quick
            c.frames = min(2 * _get(src, "max_source_positions"), MAX_FRAMES) if _get(src, "max_source_positions") else MAX_FRAMES
            c.spec["input_features"] = {"kind": "randn", "shape": [BATCH, mels, c.frames]}
        elif "input_values" in params and "input_values" not in overrides and "pixel_values" not in params:
            c.frames = AUDIO_SAMPLES
            c.spec["input_values"] = {"kind": "randn", "shape": [BATCH, AUDIO_SAMPLES]}
    if c.frames is not None and c.audio_token is not None and "input_ids" in params:
        c.prefix = c.prefix + [[c.audio_token, 0]]  # the count is found by probing the forward


def _audio_side(c: _Ctx) -> None:
    """Codec waveforms, segment cutoffs, feature masks and sample lengths that run along the audio input."""
    params, spec = c.params, c.spec
    if c.wants("input_values") and "input_values" not in spec \
            and params["input_values"].default is inspect.Parameter.empty and not c.no_audio_tower:
        spec["input_values"] = {"kind": "randn", "shape": [BATCH, AUDIO_SAMPLES]}  # codecs that take both
    if "input_values_cutoffs" in params and "input_values" in spec:
        # where each sample's audio segments end in its waveform: one segment of all the samples (CSM)
        spec["input_values_cutoffs"] = {"kind": "tensor", "value": [[spec["input_values"]["shape"][-1]]] * BATCH}
    if c.frames is None:
        return
    for name in FEATURE_MASKS:
        if name in params:
            spec[name] = {"kind": "ones", "shape": [BATCH, c.frames]}
    hop = _get(c.ac if c.ac is not None else c.config, "hop_length")
    for name in params:
        if name.endswith("sample_lengths") and "input_features" in spec and isinstance(hop, int) and name not in c.overrides:
            # waveform samples behind each chunk of feature frames (Dots3Note): frames x hop
            spec[name] = {"kind": "tensor", "value": [c.frames * hop] * BATCH}


def _text(c: _Ctx) -> None:
    """Token ids with the media placeholders in front, their masks, and what runs along them."""
    config, params, spec, prefix = c.config, c.params, c.spec, c.prefix
    if not c.wants("input_ids"):
        if "attention_mask" in params and c.frames is not None and "attention_mask" not in c.overrides:
            # speech encoders: the mask is over feature frames (or samples), not tokens
            spec["attention_mask"] = {"kind": "ones", "shape": [BATCH, c.frames]}
        return
    n_prefix = sum(n for _, n in prefix)
    # an encoder-decoder's input ids are the encoder's tokens (Dia: 256 bytes in, audio codes out)
    encoder = sub(config, "encoder_config", "encoder")
    encoder = encoder if isinstance(getattr(encoder, "vocab_size", None), int) else None
    spec["input_ids"] = ids_spec(config, c.cfg_dict, SEQ + n_prefix, prefix or None, encoder)
    if "attention_mask" in params:
        spec["attention_mask"] = {"kind": "ones", "shape": [BATCH, SEQ + n_prefix]}
    if "mm_token_type_ids" in params and prefix:
        # M-RoPE needs to know which tokens are image tokens: 1 for image, 0 for text
        types = [[1 if tid == c.image_token else 0, count] for tid, count in prefix]
        spec["mm_token_type_ids"] = {"kind": "typed", "shape": [BATCH, SEQ + n_prefix], "prefix": types}
    queries = _get(config, "latent_query_num")
    if "image_embeds_position_mask" in params and "pixel_values" in spec and isinstance(queries, int):
        # Kosmos-2: the image's query embeddings replace the tokens right after the first one
        length = max(SEQ + n_prefix, queries + 2)
        spec["input_ids"] = {**spec["input_ids"], "shape": [BATCH, length]}
        spec["image_embeds_position_mask"] = {"kind": "typed", "shape": [BATCH, length], "prefix": [[0, 1], [1, queries]]}
        if "attention_mask" in spec:
            spec["attention_mask"] = {"kind": "ones", "shape": [BATCH, length]}
    if "bbox" in params:
        spec["bbox"] = {"kind": "bbox", "shape": [BATCH, SEQ + n_prefix, 4], "high": 1000}


def _decoder(c: _Ctx) -> None:
    """Decoder ids (or spectrogram frames), one row of codes per codebook for codebook decoders."""
    config, params, spec = c.config, c.params, c.spec
    if (_get(config, "is_encoder_decoder", default=False) or c.stratum == "encoder_decoder" or spec.get("input_features")) \
            and c.wants("decoder_input_ids"):
        spec["decoder_input_ids"] = ids_spec(config, c.cfg_dict, DEC_SEQ)
    if c.wants("decoder_input_values") and "input_values" in spec:
        # speech decoders that take spectrogram frames (SpeechT5): (batch, frames, mel bins)
        spec["decoder_input_values"] = {"kind": "randn", "shape": [BATCH, DEC_SEQ, _get(config, "num_mel_bins", default=80)]}
    codebooks = _get(config, "num_codebooks") or _get(sub(config, "decoder") or config, "num_codebooks")
    if isinstance(codebooks, int) and codebooks > 1:
        # audio-codebook decoders (MusicGen) take one row of codes per codebook: (batch * codebooks, length)
        key = "decoder_input_ids" if "decoder_input_ids" in spec else "input_ids"
        # ids with audio placeholders are text: the codes come from the waveform merged into them (CSM)
        if key in spec and not (c.audio_token is not None and [c.audio_token, 0] in (spec[key].get("prefix") or [])):
            spec[key] = {**spec[key], "shape": [BATCH * codebooks, spec[key]["shape"][1]]}


def _time_series(c: _Ctx) -> None:
    """Past values of a forecaster: (batch, context, channels), with lags, time features and masks as it needs."""
    config, params, spec = c.config, c.params, c.spec
    if not c.wants("past_values"):
        return
    # time series (PatchTST, PatchTSMixer): (batch, context length, channels)
    length = _get(config, "context_length", default=32)
    channels = _get(config, "num_input_channels", "input_size", default=1)
    spec["past_values"] = {"kind": "randn", "shape": [BATCH, length, channels]}
    if _get(config, "num_input_channels", "input_size") is None and "past_values_padding" in params:
        # univariate foundation forecasters (TimesFM): (batch, length), a padding flag per step, a frequency id
        spec["past_values"] = {"kind": "randn", "shape": [BATCH, length]}
        spec["past_values_padding"] = {"kind": "zeros", "shape": [BATCH, length]}
        if "freq" in params:
            spec["freq"] = {"kind": "zeros", "shape": [BATCH, 1]}
    lags = _get(config, "lags_sequence")
    if isinstance(lags, list) and lags:
        # lagged probabilistic forecasters (TimeSeriesTransformer, Informer): context plus the largest lag,
        # one row of time features per step, univariate series without a channel axis
        length = length + max(lags)
        shape = [BATCH, length] if channels == 1 else [BATCH, length, channels]
        spec["past_values"] = {"kind": "randn", "shape": shape}
        if "past_time_features" in params:
            spec["past_time_features"] = {"kind": "randn", "shape": [BATCH, length, _get(config, "num_time_features", default=0)]}
        if "past_observed_mask" in params:
            spec["past_observed_mask"] = {"kind": "ones", "shape": shape, "dtype": "bool"}


def _width(config: Any) -> int:
    return _get(config, "hidden_size", "d_model", default=64)


def _other(c: _Ctx, name: str) -> dict | None:
    """A spec for one more required argument by its name (None: nothing known for it)."""
    config, spec = c.config, c.spec
    mels, mel_vocab = _get(config, "n_mel_bins", "num_mel_bins"), _get(config, "mel_vocab_size")
    if name == "audio_input_ids" and isinstance(mels, int) and isinstance(mel_vocab, int):
        # quantized mel frames (Inkling's audio tower): (audios, frames, mel bins) of mel-vocabulary ids
        return {"kind": "randint", "shape": [BATCH, SEQ, mels], "high": mel_vocab}
    if name.endswith("input_ids"):  # a Q-Former's own ids, a second tokenizer's ids
        return ids_spec(config, c.cfg_dict, SEQ)
    if name == c.first and getattr(c.cls, "main_input_name", None) == "input_values":
        # a codec stage whose forward names its waveform otherwise (VibeVoice's tokenizer): (batch, channels, samples)
        return {"kind": "randn", "shape": [BATCH, _get(config, "channels", "audio_channels", default=1), AUDIO_SAMPLES]}
    if name == c.first == "hidden_states" and isinstance(_get(config, *TOWER_WIDTHS), int):
        # an audio tower on its own (Phi-4 multimodal's conformer): feature frames of its input width
        return {"kind": "randn", "shape": [BATCH, TOWER_FRAMES, _get(config, *TOWER_WIDTHS)]}
    if name == "mask" and c.first == "hidden_states" and spec.get(c.first, {}).get("kind") == "randn":
        return {"kind": "ones", "shape": spec[c.first]["shape"][:2], "dtype": "bool"}  # every frame real
    if name.endswith("hidden_states") and name != c.first:  # context from another model (an assistant's)
        layers = _get(config, "target_layer_ids")  # the target's chosen layers, concatenated on the width
        times = len(layers) if isinstance(layers, (list, tuple)) and layers else 1
        return {"kind": "randn", "shape": [BATCH, SEQ, _width(config) * times]}
    if name == "inputs":  # Perceiver without a preprocessor: embeddings of d_model
        return {"kind": "randn", "shape": [BATCH, SEQ, _get(config, "d_model", "hidden_size", default=64)]}
    if name.startswith("prompt_") and "pixel_values" in spec:  # in-context segmentation (SegGPT): prompt image and mask
        return dict(spec["pixel_values"])
    if name.endswith("task_inputs"):  # OneFormer: the task prompt's token ids
        return {**ids_spec(config, c.cfg_dict, _get(config, "task_seq_len", default=SEQ)), "high": 2}
    if name.endswith("latents"):  # a codec decoder on its own: (batch, channels, frames)
        return {"kind": "randn", "shape": [BATCH, _width(config), SEQ]}
    if name.endswith("embeds"):  # e.g. a Q-Former's query embeddings
        return {"kind": "randn", "shape": [BATCH, SEQ, _width(config)]}
    if name.endswith("attention_mask"):
        return {"kind": "ones", "shape": [BATCH, SEQ]}
    if name == "state" and isinstance(_get(config, "max_state_dim", "state_dim"), int):  # robot policies (PI0)
        return {"kind": "randn", "shape": [BATCH, _get(config, "max_state_dim", "state_dim")]}
    return None


def _others(c: _Ctx) -> None:
    """Every other required argument the builders above left, and a Q-Former's image features."""
    for name, p in c.params.items():
        if name in c.spec or name in c.overrides or p.default is not inspect.Parameter.empty:
            continue
        made = _other(c, name)
        if made is not None:
            c.spec[name] = made
    if c.wants("encoder_hidden_states") and c.spec and isinstance(_get(c.config, "encoder_hidden_size"), int) \
            and _get(c.config, "cross_attention_frequency"):
        # a Q-Former on its own cross-attends to image features of encoder_hidden_size
        c.spec["encoder_hidden_states"] = {"kind": "randn", "shape": [BATCH, SEQ, _get(c.config, "encoder_hidden_size")]}


# The builders in order: later ones read what earlier ones made (the media placeholders before the ids).
BUILDERS = (_images, _patch_media, _vision_extras, _audio_in, _audio_side, _text, _decoder, _time_series, _others)


# Forward arguments under another name than the one the builders know: built under the known name, then renamed
# (VideoLlava's image input on transformers 5.20).
ALIASES = {"pixel_values_images": "pixel_values"}


def make_spec(cls: type, config: Any, cfg_dict: dict, stratum: str, overrides: dict | None = None) -> tuple[dict, bool]:
    """(input spec, text_only) for one model class and its shrunk config; recipe `inputs` override by name."""
    named = forward_params(cls)
    renamed = {known: alias for alias, known in ALIASES.items() if alias in named and known not in named}
    back = {v: k for k, v in renamed.items()}
    params = {back.get(name, name): p for name, p in named.items()}
    c = _Ctx(cls, config, cfg_dict, stratum, params, dict(overrides or {}))
    for builder in BUILDERS:
        builder(c)
    c.spec.update(c.overrides)
    media_in = ("pixel_values", "input_features", "input_values")
    # it accepts media but none could be made for it: reported, never silent
    text_only = stratum == "vl_multimodal" and not any(k in c.spec for k in media_in) and any(k in params for k in media_in)
    spec = {renamed.get(name, name): item for name, item in c.spec.items()}
    if not spec:
        # nothing recognized: fill every required argument with token ids
        for name, p in named.items():
            if p.default is inspect.Parameter.empty:
                spec[name] = ids_spec(config, cfg_dict, SEQ)
    return spec, text_only
