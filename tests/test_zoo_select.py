"""Enumeration, stratum rules, resolve/sample and the generic shrink, on the installed transformers."""
from __future__ import annotations

from collections import Counter

import pytest

from harness import zoo
from harness.core.model_build import ModelBuild
from harness.core.outcome import STRATA
from harness.zoo import lock
from harness.discovery.shrink import shrink_dict


@pytest.fixture(scope="module")
def cands() -> list[zoo.Candidate]:
    return zoo.candidates()


def test_enumeration_finds_the_public_classes_with_strata_and_kinds(cands):
    by_name = {c.model: c for c in cands}
    assert len(cands) > 500
    assert by_name["LlamaForCausalLM"] == zoo.Candidate("LlamaForCausalLM", "decoder_llm", "causal_lm")
    assert by_name["Qwen2VLForConditionalGeneration"].stratum == "vl_multimodal"
    assert by_name["Qwen2VLForConditionalGeneration"].kind == "conditional_generation"
    assert by_name["T5ForConditionalGeneration"].stratum == "encoder_decoder"
    assert by_name["WhisperModel"].stratum == "encoder_decoder"
    assert by_name["ViTModel"] == zoo.Candidate("ViTModel", "vision_other", "base")
    # a CTC vocabulary is output only: wav2vec2 takes audio, so it is not a text model
    assert by_name["Wav2Vec2Model"].stratum == "vision_other"
    assert by_name["LayoutLMv3Model"].stratum == "vl_multimodal"
    assert set(Counter(c.stratum for c in cands)) == set(STRATA)
    assert [c.model for c in cands] == sorted(c.model for c in cands)


SEEDS = ("Phi4MultimodalAudioModel", "Ernie4_5_VL_MoeForConditionalGeneration", "Ernie4_5_VLMoeForConditionalGeneration",
         "GlmOcrVisionModel", "VideoLlama3VisionModel", "Qwen3OmniMoeThinkerForConditionalGeneration",
         "Glm4vForConditionalGeneration", "Glm46VForConditionalGeneration", "Qwen3VLForConditionalGeneration",
         "AriaForConditionalGeneration", "AriaTextForCausalLM", "FlaubertModel", "MimiModel")


def test_exclusions_each_have_a_reason_and_sub_models_are_candidates(cands):
    excluded = lock.current().excluded
    names = {c.model for c in cands}
    assert excluded["LlamaPreTrainedModel"].startswith("abstract")
    assert excluded["AutoModel"].startswith("abstract")
    assert not any(reason.startswith("internal") for reason in excluded.values())
    # towers no Auto mapping registers, and a real model whose name starts with Auto
    assert {"Blip2VisionModel", "AutoformerModel", *SEEDS} <= names
    assert not names & set(excluded)
    assert all(reason.strip() for reason in excluded.values())


def test_resolve_exact_glob_dedup_and_close_matches(cands):
    got = zoo.resolve(["GPT2Model", "Qwen2VL*", "GPT2Model"])
    names = [c.model for c in got]
    assert names[0] == "GPT2Model" and names.count("GPT2Model") == 1
    assert {"Qwen2VLForConditionalGeneration", "Qwen2VLModel"} <= set(names)
    assert all(n == "GPT2Model" or n.startswith("Qwen2VL") for n in names)
    with pytest.raises(zoo.UnknownModel, match="GPT2Model"):
        zoo.resolve(["GPT2Modle"])
    with pytest.raises(ValueError):
        zoo.resolve(["NoSuchThing*"])
    assert zoo.resolve(["LlamaForCausalLM"])[0].stratum == "decoder_llm"


def test_registered_models_are_visible_to_resolve_and_build(register_model):
    built = object()
    register_model("ZooTestOnlyModel", "decoder_llm", lambda device: built)
    assert zoo.resolve(["ZooTestOnly*"]) == [zoo.Candidate("ZooTestOnlyModel", "decoder_llm", "extra")]
    assert zoo.build("ZooTestOnlyModel") is built


def test_sample_is_stratified_and_deterministic(cands):
    a = zoo.sample(cands, 40, seed=7)
    assert a == zoo.sample(cands, 40, seed=7)
    assert a != zoo.sample(cands, 40, seed=8)
    assert len(a) == 40 and len({c.model for c in a}) == 40
    have = Counter(c.stratum for c in cands)
    got = Counter(c.stratum for c in a)
    for stratum in STRATA:  # proportional within rounding, never an empty stratum
        assert got[stratum] >= 1
        assert abs(got[stratum] - 40 * have[stratum] / len(cands)) <= 1.5
    assert zoo.sample(cands[:5], 10, seed=1) == cands[:5]


def test_shrink_keeps_heads_ratios_layer_kinds_and_rotary_sections():
    d = shrink_dict({
        "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 6,
        "intermediate_size": 11008, "layer_types": ["linear", "linear", "full", "linear", "linear", "full"],
        "num_local_experts": 64, "num_experts_per_tok": 8, "vocab_size": 32000,
        "rope_parameters": {"rope_type": "default", "mrope_section": [16, 24, 24]}, "head_dim": 128,
        "vision_config": {"model_type": "v", "hidden_size": 1280, "depth": 32, "num_heads": 16, "deepstack_visual_indexes": [8, 16, 24]},
    })
    assert d["hidden_size"] == 64 and d["num_attention_heads"] == 4 and d["head_dim"] == 16
    assert d["num_key_value_heads"] == 1  # 32/8 = 4 query heads per kv head, kept
    assert d["layer_types"] == ["linear", "full"] and d["num_hidden_layers"] == 2
    assert d["num_local_experts"] == 4 and d["num_experts_per_tok"] == 2
    assert sum(d["rope_parameters"]["mrope_section"]) == 8
    assert d["vocab_size"] == 32000
    v = d["vision_config"]
    assert v["hidden_size"] == 64 and v["depth"] == 2 and v["deepstack_visual_indexes"] == [1]


def test_fingerprint_is_cheap_stable_and_per_model():
    a = zoo.fingerprint("LlamaForCausalLM")
    assert a == zoo.fingerprint("LlamaForCausalLM")
    assert a != zoo.fingerprint("MistralForCausalLM")
    assert len(a) == 16


def test_shrink_keeps_architecture_identities():
    mla = shrink_dict({"hidden_size": 7168, "num_attention_heads": 128, "num_hidden_layers": 61, "head_dim": 64,
                       "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "qk_head_dim": 192, "v_head_dim": 128})
    assert mla["head_dim"] == mla["qk_rope_head_dim"]  # equal in the default, equal after
    assert mla["qk_head_dim"] == mla["qk_rope_head_dim"] + mla["qk_nope_head_dim"]
    mamba = shrink_dict({"hidden_size": 4096, "num_hidden_layers": 32, "mamba_n_heads": 128, "mamba_d_head": 64,
                         "mamba_expand": 2, "mamba_d_ssm": 8192})
    assert mamba["mamba_n_heads"] * mamba["mamba_d_head"] == mamba["mamba_expand"] * mamba["hidden_size"] == mamba["mamba_d_ssm"]
    per_layer = shrink_dict({"num_hidden_layers": 24, "per_layer_config": {"5": {"x": 1}, "11": {"x": 2}}})
    assert per_layer["per_layer_config"] == {"1": {"x": 1}}  # the special layer still exists
    backbone = shrink_dict({"num_hidden_layers": 12, "hidden_size": 768, "out_features": ["stage12"], "out_indices": [12],
                            "stage_names": ["stem"] + [f"stage{i}" for i in range(1, 13)], "use_timm_backbone": True})
    assert "stage_names" not in backbone and backbone["out_features"] is None and backbone["out_indices"] == [2]
    assert backbone["use_timm_backbone"] is False
    resnet = shrink_dict({"depths": [3, 4, 6, 3], "out_features": ["stage2", "stage4"], "out_indices": [2, 4]})
    assert resnet["out_features"] == ["stage2", "stage4"] and resnet["depths"] == [2, 2, 2, 2]
    whisper = shrink_dict({"num_mel_bins": 80, "max_source_positions": 1500, "encoder_layers": 4, "activation_function": "gelu"})
    assert whisper["max_source_positions"] == 64 and whisper["activation_function"] == "gelu"


def test_shrink_keeps_relations_the_code_derives():
    # per-part dims that split a width keep splitting it (Reformer's axial position embeddings)
    reformer = shrink_dict({"hidden_size": 256, "num_attention_heads": 8, "num_hidden_layers": 6, "axial_pos_embds_dim": [64, 192]})
    assert sum(reformer["axial_pos_embds_dim"]) == reformer["hidden_size"] == 64
    # a dim that was two models' widths side by side stays their sum (codecs: semantic + acoustic)
    codec = shrink_dict({"hidden_size": 1024, "num_hidden_layers": 4, "quantization_dim": 2048,
                         "semantic_model_config": {"model_type": "x", "hidden_size": 1024, "num_hidden_layers": 4}})
    assert codec["quantization_dim"] == codec["hidden_size"] + codec["semantic_model_config"]["hidden_size"] == 128
    # routing left unset by the default gets the caps; an unset expert count alone means a dense model
    moe = shrink_dict({"hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
                       "n_routed_experts": None, "num_experts_per_tok": None})
    assert (moe["n_routed_experts"], moe["num_experts_per_tok"]) == (4, 2)
    dense = shrink_dict({"hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16, "num_experts": None})
    assert dense["num_experts"] is None
    # a per-head width that was width / heads stays so (Pix2Struct's text attention counts heads by it)
    p2s = shrink_dict({"hidden_size": 768, "num_heads": 12, "d_kv": 64, "num_layers": 12})
    assert p2s["d_kv"] * p2s["num_heads"] == p2s["hidden_size"]
    # layers that reuse earlier layers' caches: a producer and a consumer of every kind survive (Gemma 3n)
    kinds = (["sliding_attention"] * 4 + ["full_attention"]) * 6
    shared = shrink_dict({"hidden_size": 2048, "num_attention_heads": 8, "num_hidden_layers": 30,
                          "num_kv_shared_layers": 10, "layer_types": kinds})
    n, k = shared["num_hidden_layers"], shared["num_kv_shared_layers"]
    assert 0 < k < n == len(shared["layer_types"])
    assert set(shared["layer_types"][: n - k]) == set(shared["layer_types"][n - k:]) == set(kinds)


def test_one_size_vocabulary_for_both_shrinks():
    """The zoo's shrink caps the exact names of harness/zoo/sizes.py; the reproducer's proposals take those names
    and their families by pattern, so a width only the zoo named (GPT-2's n_embd) is shrunk in reproducers too."""
    from bot.verify import proposals
    from harness.zoo import sizes

    assert all(sizes.is_layers(k) for k in sizes.LAYER_KEYS) and all(sizes.is_heads(k) for k in sizes.KV_KEYS)
    assert all(sizes.is_width(k) for k in sizes.WIDTH_KEYS + sizes.FFN_KEYS)
    assert all(sizes.is_count(k) for k in sizes.EXPERT_KEYS)
    assert not any(f(k) for k in ("vocab_size", "max_position_embeddings", "image_token_id")
                   for f in (sizes.is_layers, sizes.is_heads, sizes.is_count))
    # the zoo caps by names only: a key of a width's family that no list names is left as it was
    assert shrink_dict({"hidden_size": 4096, "mlp_dim": 3000}) == {"hidden_size": 64, "mlp_dim": 3000}
    entry = lock.current().entry("GPT2Model")
    widths = [c for c in proposals.propose(ModelBuild("GPT2Model", entry["config_class"], entry["config"], entry["spec"], 0), set())
              if c.knob == "widths"]
    assert [path for c in widths for path, _ in c.sets] == [("config", "n_embd")]
