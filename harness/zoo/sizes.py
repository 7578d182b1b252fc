"""The size vocabulary: which config keys count layers and heads, and which hold widths and expert counts.

One vocabulary for the two shrinks. The zoo's (harness/discovery/shrink.py) caps a
default config by the exact names below, each role with its own cap; every lock
entry depends on these lists, so a name added here changes the entries that have
it (re-lock them). The reproducer's (bot/verify/proposals.py) halves a stored build
by role with the is_* tests: a name below, or one of its family by pattern (the
patterns reach further than the names; the zoo does not use them, as they would
change about a quarter of the lock).

Stdlib only: the reproducer side never imports torch.
"""
from __future__ import annotations

import re

# -- exact names, by role (what the zoo's shrink caps) ----------------------------------------------

LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
              "num_encoder_layers", "num_decoder_layers", "depth", "num_text_layers", "num_vision_layers",
              "text_layers", "vision_layers", "encoder_num_layers", "decoder_num_layers")
WIDTH_KEYS = ("hidden_size", "d_model", "n_embd", "embed_dim", "word_embed_proj_dim", "out_hidden_size",
              "projection_dim", "encoder_hidden_size", "decoder_hidden_size", "text_hidden_size",
              "vision_hidden_size", "hidden_dim", "embedding_size", "d_embed", "projector_hidden_size",
              "output_hidden_size", "mm_hidden_size", "vision_output_dim", "audio_hidden_size", "condition_dim",
              "text_embed_dim", "vision_embed_dim", "audio_embed_dim", "hidden_dim_vision", "cross_attention_hidden_size", "cross_hidden_size",
              "input_embedding_size", "output_embedding_size", "adapter_out_dim", "projection_hidden_size",
              "hidden_size_global", "backbone_hidden_size", "output_channels", "fpn_hidden_size", "vit_dim")
WIDTH_LIST_KEYS = ("downsample_channels",)  # SAM necks in OCR towers (DeepSeek-OCR 2, Unlimited OCR)
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "encoder_attention_heads", "decoder_attention_heads",
             "num_heads", "encoder_num_attention_heads", "decoder_num_attention_heads")
KV_KEYS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num", "encoder_num_key_value_heads")
FFN_KEYS = ("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner", "d_ff", "d_kv_ff",
            "moe_intermediate_size", "shared_expert_intermediate_size", "intermediate_size_mlp", "ffn_hidden_size",
            "expert_intermediate_size", "dense_intermediate_size", "encoder_intermediate_size", "decoder_intermediate_size")
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts", "num_routed_experts")
PER_TOKEN_KEYS = ("num_experts_per_tok", "num_experts_per_token", "moe_k", "moe_topk")   # experts each token takes

# -- families, by pattern (what the reproducer's shrink also tries) --------------------------------

LAYERS = re.compile(r"^(num_\w*layers|\w+_layers|n_layers?|layers|depth|\w+_depth)$")
DEPTHS = re.compile(r"^(depths|\w+_depths)$")             # one depth per stage
HEADS = re.compile(r"^(num_attention_heads|num_key_value_heads|num_heads|n_heads?|\w+_attention_heads|\w+_num_heads)$")
WIDTHS = re.compile(r"^(hidden_size|intermediate_size|d_model|d_ff|d_kv|dim|hidden_dim|embed_dim|ffn_dim|head_dim|"
                    r"projection_dim|num_filters|upsample_groups|vector_quantization_hidden_dimension|"
                    r"\w+_hidden_size|\w+_intermediate_size|\w+_ffn_dim|\w+_dim)$")
COUNTS = re.compile(r"^(num_quantizers|codebook_size|num_codebooks|num_experts|num_local_experts|n_routed_experts)$")


def is_layers(name: str) -> bool:
    """A key that counts layers."""
    return name in LAYER_KEYS or bool(LAYERS.match(name))


def is_depths(name: str) -> bool:
    """A key that lists one depth per stage."""
    return bool(DEPTHS.match(name))


def is_heads(name: str) -> bool:
    """A key that counts attention heads (key/value heads included)."""
    return name in HEAD_KEYS or name in KV_KEYS or bool(HEADS.match(name))


def is_width(name: str) -> bool:
    """A key that holds a width (model, projection, head or feed-forward)."""
    return name in WIDTH_KEYS or name in FFN_KEYS or bool(WIDTHS.match(name))


def is_count(name: str) -> bool:
    """A key that counts experts, quantizers or codebooks."""
    return name in EXPERT_KEYS or bool(COUNTS.match(name))
