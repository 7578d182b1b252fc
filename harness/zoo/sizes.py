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


# -- input sizes: the second spec (trace on A, run on B) -------------------------------------------

SECOND_SEQ_STEP = 8    # tokens added to every sequence axis: 16 -> 24, 8 -> 16 (a size Dynamo has not seen)
SECOND_BATCH_STEP = 1  # rows added to the batch: 2 -> 3 (not a power of two, so no specialization hides it)
# Input kinds laid out along (batch, sequence[, 4]): their second axis is a token axis.
TOKEN_KINDS = ("ids", "ones", "zeros", "typed", "arange", "randint", "bbox")
# Input kinds whose values are listed per image or per sample: another batch would need more rows than a shape.
LISTED_KINDS = ("tensor", "value", "list")


def second_specs(spec: dict) -> list[dict]:
    """The candidate second input specs of a first one, best first: longer sequences and one more row of batch,
    longer sequences alone, one more row alone. A sequence axis is the second axis of a token-kind input that is as
    long as one of the token inputs (input_ids, decoder_input_ids, ...); media keep the sizes their config fixes.
    The batch grows only where every input is shaped by it. The first candidate that runs in eager is the one used
    (`zoo lock` seals it; a build without one tries them in the worker)."""
    seq, batch = _lengthen(spec), _widen(spec)
    both = _widen(seq) if seq is not None else None
    out: list[dict] = []
    for candidate in (both, seq, batch):
        if candidate is not None and candidate != spec and candidate not in out:
            out.append(candidate)
    return out


def _shape(item: object) -> list | None:
    """The shape of an input spec item, when it has one of plain sizes."""
    shape = item.get("shape") if isinstance(item, dict) else None
    return shape if isinstance(shape, list) and shape and all(isinstance(n, int) for n in shape) else None


def _token_lengths(spec: dict) -> set[int]:
    """The lengths of the token-id inputs (the sequences a second size lengthens)."""
    return {_shape(item)[1] for name, item in spec.items()
            if isinstance(item, dict) and item.get("kind") == "ids" and _shape(item) and len(_shape(item)) == 2}


def _lengthen(spec: dict) -> dict | None:
    """Every token axis as long as a token input's made SECOND_SEQ_STEP longer (None: no token input)."""
    lengths = _token_lengths(spec)
    if not lengths:
        return None
    out = {}
    for name, item in spec.items():
        shape = _shape(item)
        token_axis = shape is not None and item.get("kind") in TOKEN_KINDS and len(shape) in (2, 3) and \
            (len(shape) == 2 or item.get("kind") == "bbox") and shape[1] in lengths
        out[name] = {**item, "shape": [shape[0], shape[1] + SECOND_SEQ_STEP, *shape[2:]]} if token_axis else item
    return out


def _widen(spec: dict) -> dict | None:
    """Every input one batch row more, where every input is a shaped tensor of the same batch (None: not so)."""
    shapes = [_shape(item) for item in spec.values()]
    if any(s is None for s in shapes) or any(item.get("kind") in LISTED_KINDS for item in spec.values()):
        return None
    if len({s[0] for s in shapes}) != 1:
        return None
    return {name: {**item, "shape": [item["shape"][0] + SECOND_BATCH_STEP, *item["shape"][1:]]}
            for name, item in spec.items()}
