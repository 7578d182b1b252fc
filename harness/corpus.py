"""The embedded default corpus: a stratified quick-start set of model classes.

Chosen by experiment (zoo build + baseline and the two built-in configs, torch
2.13.0 CPU, transformers 5.23.0): every class here builds tiny and runs eager,
and the set as a whole finishes baseline + capture_scalar_outputs +
capture_dynamic_output_shape_ops in well under 10 minutes on 2 CPU cores.
The comments say what each flag did to the models that show a behaviour.
"""
from __future__ import annotations

DEFAULT_CORPUS: tuple[str, ...] = (
    # vl_multimodal
    "Qwen2VLForConditionalGeneration",     # grid VLM: 25 graphs; scalar -> 18 (reduces); dynamic-shape ops crash (GuardOnDataDependentSymNode Eq(uN, 0))
    "Qwen2_5_VLForConditionalGeneration",  # same family: scalar reduces 27 -> 20; dynamic-shape ops crash
    "LlavaForConditionalGeneration",       # 4 graphs; scalar -> 1 (reduces); dynamic-shape ops: no effect
    "PaliGemmaForConditionalGeneration",   # 4 graphs; scalar -> 1 (reduces); dynamic-shape ops: no effect
    "AltCLIPModel",
    "Aimv2Model",
    "BlipModel",
    "BlipForConditionalGeneration",
    # decoder_llm
    "LlamaForCausalLM",                    # 1 graph under all three: no effect
    "GPT2Model",                           # no effect
    "MixtralForCausalLM",                  # MoE routing: no effect
    "Qwen2MoeForCausalLM",                 # no effect
    "OlmoeForCausalLM",                    # no effect
    "BertModel",
    "BloomForCausalLM",
    "AlbertModel",
    "BioGptForCausalLM",
    "ApertusForCausalLM",
    "Cohere2ForCausalLM",
    # encoder_decoder
    "WhisperModel",                        # audio features in: no effect
    "BartModel",
    "T5Model",
    "BartForConditionalGeneration",
    "BigBirdPegasusModel",
    "BlenderbotSmallModel",
    # vision_other
    "ViTModel",
    "Wav2Vec2Model",                       # raw audio in: no effect
    "HubertModel",                         # no effect
    "BeitModel",
    "BitModel",
    "CvtModel",
    "DonutSwinModel",
)
