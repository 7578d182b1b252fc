"""Decide a model's stratum by rules over its config, never by a hand list."""
from __future__ import annotations

from typing import Any

VISION_KEYS = ("vision", "image", "visual", "video", "audio", "speech", "vq", "encodec", "codec", "sound")
TEXT_KEYS = ("text", "language", "llm", "decoder", "lm")


def sub_configs(config: Any) -> dict[str, Any]:
    """The nested PretrainedConfig objects of a config, by attribute name."""
    from transformers import PretrainedConfig

    out = {}
    for key, value in vars(config).items():
        if isinstance(value, PretrainedConfig):
            out[key] = value
    return out


def has_text(config: Any) -> bool:
    """Whether the config (or a sub-config) describes a token vocabulary."""
    if isinstance(getattr(config, "vocab_size", None), int) and config.vocab_size > 0:
        return True
    return any(has_text(sub) for key, sub in sub_configs(config).items() if any(t in key for t in TEXT_KEYS))


TEXT_INPUTS = ("input_ids", "decoder_input_ids")
OTHER_INPUTS = ("pixel_values", "input_features", "input_values", "past_values", "pixel_values_videos",
                "audio_values", "input_points", "spectrogram", "flattened_patches", "bbox", "image")


def stratum_of(config: Any, params: Any = ()) -> str:
    """One of STRATA for a config (and, if given, the forward's parameter names).

    vl_multimodal: a vision/audio sub-config next to text, or a forward that takes
    token ids and another modality; encoder_decoder: is_encoder_decoder or
    encoder+decoder sub-configs; vision_other: no token-id input (ViT, wav2vec2,
    time series: a vocabulary used only for output does not make a text model);
    decoder_llm: the rest (decoders and text encoders).
    """
    subs = sub_configs(config)
    other = [k for k in subs if any(v in k for v in VISION_KEYS)]
    text = has_text(config)
    params = set(params)
    if other and text:
        return "vl_multimodal"
    if getattr(config, "is_encoder_decoder", False) or ("encoder" in subs and "decoder" in subs):
        return "encoder_decoder"
    if params:
        takes_text = any(p in params for p in TEXT_INPUTS)
        takes_other = any(p in params for p in OTHER_INPUTS)
        if takes_text and takes_other and text:
            return "vl_multimodal"
        if not takes_text:
            return "vision_other"
        return "decoder_llm"
    return "decoder_llm" if text else "vision_other"
