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


def stratum_of(config: Any) -> str:
    """One of STRATA for a config: vl_multimodal, encoder_decoder, vision_other or decoder_llm."""
    subs = sub_configs(config)
    other = [k for k in subs if any(v in k for v in VISION_KEYS)]
    text = has_text(config)
    if other and text:
        return "vl_multimodal"
    if getattr(config, "is_encoder_decoder", False) or ("encoder" in subs and "decoder" in subs):
        return "encoder_decoder"
    if not text:
        return "vision_other"
    modality_attrs = ("image_size", "num_mel_bins", "sampling_rate", "num_channels", "patch_size", "prediction_length")
    if any(getattr(config, a, None) is not None for a in modality_attrs) and not any(k in subs for k in ("text_config",)):
        # a token vocabulary next to a non-text input (ViT with a vocab field, speech CTC): not a plain LLM
        if getattr(config, "image_size", None) is not None or getattr(config, "num_mel_bins", None) is not None or getattr(config, "prediction_length", None) is not None:
            return "vision_other"
    return "decoder_llm"
