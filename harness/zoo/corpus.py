"""The embedded default corpus: a stratified quick-start set of model classes, a named subset of the zoo lock.

corpus(name) gives a named corpus's classes after checking each against the
lock of the installed transformers: every one must be locked with status ok
(a missing or failed entry is a LockError naming the class and `zoo lock`).

Chosen by experiment (zoo build + baseline and the two built-in configs, torch
2.13.0 CPU, transformers 5.23.0, counting backend): every class here builds
tiny and runs eager, and the set as a whole finishes baseline +
capture_scalar_outputs + capture_dynamic_output_shape_ops in well under 10
minutes on 2 CPU cores (about 6 minutes for the first 32-class version on a
shared, loaded machine). Comments give graphs as baseline -> with the flag;
"scalar" is capture_scalar_outputs, "dynamic" is capture_dynamic_output_shape_ops.

What the flags do here: dynamic crashes on the grid VLMs (Qwen2-VL family:
GuardOnDataDependentSymNode on Eq(uN, 0)) and reduces graphs on the audio
LLMs and ViLT; scalar reduces graphs on the VLMs and Longformer, adds one on
LED; both do nothing on the plain decoders, encoders and vision models.
None of the ~90 classes swept so far crashed under capture_scalar_outputs on
torch 2.13.0; add one here when a nightly shows such a crash.
"""
from __future__ import annotations

DEFAULT_CORPUS: tuple[str, ...] = (
    # vl_multimodal
    "Qwen2VLForConditionalGeneration",     # 25; scalar -> 18 (reduces); dynamic crashes (GuardOnDataDependentSymNode Eq(uN, 0))
    "Qwen2_5_VLForConditionalGeneration",  # 27; scalar -> 20; dynamic crashes
    "LlavaForConditionalGeneration",       # 4; scalar -> 1; dynamic: no effect
    "PaliGemmaForConditionalGeneration",   # 4; scalar -> 1; dynamic: no effect
    "ViltModel",                           # 9; scalar: same count; dynamic -> 7 (reduces)
    "VoxtralForConditionalGeneration",     # audio LLM: 5; scalar: no effect; dynamic -> 1 (reduces)
    "Qwen2AudioForConditionalGeneration",  # audio LLM: 4; scalar -> 3; dynamic -> 3
    "AltCLIPModel",
    "BlipModel",
    # decoder_llm
    "LlamaForCausalLM",                    # 1 graph under all three: no effect
    "GPT2Model",                           # no effect
    "MixtralForCausalLM",                  # MoE routing: no effect
    "Qwen2MoeForCausalLM",                 # no effect
    "OlmoeForCausalLM",                    # no effect
    "LongformerModel",                     # 6; scalar -> 5 (a text model losing a graph break); dynamic: no effect
    "BertModel",
    "BloomForCausalLM",
    "AlbertModel",
    "BioGptForCausalLM",
    "Cohere2ForCausalLM",
    # encoder_decoder
    "WhisperModel",                        # audio features in: no effect
    "LEDModel",                            # 5; scalar -> 6 (increases); dynamic: no effect
    "BartModel",
    "T5Model",
    "BartForConditionalGeneration",
    "Speech2TextModel",                    # no effect
    # vision_other
    "ViTModel",
    "Wav2Vec2Model",                       # raw audio + mask: no effect
    "HubertModel",                         # no effect
    "BeitModel",
    "DonutSwinModel",
    "YolosModel",                          # no effect
)

CORPORA: dict[str, tuple[str, ...]] = {"default": DEFAULT_CORPUS}


def corpus(name: str = "default") -> list[str]:
    """The classes of a named corpus, each checked to be locked and buildable (status ok) in the current lock."""
    from harness.zoo import LockError
    from harness.zoo.lock import current

    if name not in CORPORA:
        raise LockError(f"unknown corpus {name!r}; known: {', '.join(sorted(CORPORA))}")
    lock = current()
    for model in CORPORA[name]:
        status = lock.entry(model)["status"]
        if status != "ok":
            raise LockError(f"corpus {name!r} names {model}, locked as {status}; fix it or drop it from the corpus")
    return list(CORPORA[name])
