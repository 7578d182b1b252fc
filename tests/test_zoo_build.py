"""Real tiny builds with their real inputs, one eager forward each, per stratum."""
from __future__ import annotations

import pytest
import torch

from harness import zoo


def forward(built: zoo.Built) -> object:
    with torch.no_grad():
        return built.module(**built.inputs)


@pytest.mark.parametrize("model, stratum", [
    ("LlamaForCausalLM", "decoder_llm"),
    ("T5ForConditionalGeneration", "encoder_decoder"),
    ("ViTModel", "vision_other"),
])
def test_text_encoder_decoder_and_vision_builds_run(model, stratum):
    built = zoo.build(model)
    assert built.stratum == stratum and not built.text_only
    assert not built.module.training
    assert sum(p.numel() for p in built.module.parameters()) < 50_000_000
    ids = built.inputs.get("input_ids")
    if ids is not None:
        assert ids.shape[0] == 2  # batch 2: sizes must not specialize to 1
    out = forward(built)
    assert out is not None
    if model == "T5ForConditionalGeneration":
        assert built.inputs["decoder_input_ids"].shape[0] == 2
        assert out.logits.shape[:2] == built.inputs["decoder_input_ids"].shape


def test_grid_vision_language_model_gets_patches_grid_and_matching_image_tokens():
    built = zoo.build("Qwen2VLForConditionalGeneration")
    cfg = built.module.config
    assert built.stratum == "vl_multimodal" and not built.text_only
    grid = built.inputs["image_grid_thw"]
    pixels = built.inputs["pixel_values"]
    assert grid.shape == (2, 3)
    assert pixels.shape[0] == int(grid.prod(dim=1).sum())  # one row per patch
    merge = cfg.vision_config.spatial_merge_size
    per_image = int(grid[0].prod()) // (merge * merge)
    ids = built.inputs["input_ids"]
    assert ((ids == cfg.image_token_id).sum(dim=1) == per_image).all()
    assert ((ids == cfg.vision_start_token_id).sum(dim=1) == 1).all()
    out = forward(built)
    assert out.logits.shape[:2] == ids.shape


def test_patch_vision_language_model_probes_its_image_token_count():
    built = zoo.build("LlavaForConditionalGeneration")
    cfg = built.module.config
    n_image = (built.inputs["input_ids"] == cfg.image_token_id).sum(dim=1)
    assert (n_image > 0).all() and (n_image == n_image[0]).all()
    assert built.inputs["pixel_values"].dim() == 4
    forward(built)


def test_audio_models_get_features_or_waveforms():
    whisper = zoo.build("WhisperForConditionalGeneration")
    feats = whisper.inputs["input_features"]
    cfg = whisper.module.config
    assert feats.shape == (2, cfg.num_mel_bins, 2 * cfg.max_source_positions)
    assert "decoder_input_ids" in whisper.inputs
    forward(whisper)
    w2v = zoo.build("Wav2Vec2Model")
    assert w2v.inputs["input_values"].dim() == 2 and w2v.inputs["input_values"].shape[0] == 2
    assert w2v.stratum == "vision_other"
    forward(w2v)


def test_builds_are_deterministic():
    a, b = zoo.build("GPT2Model"), zoo.build("GPT2Model")
    assert torch.equal(a.inputs["input_ids"], b.inputs["input_ids"])
    assert all(torch.equal(x, y) for x, y in zip(a.module.state_dict().values(), b.module.state_dict().values()))
    assert a.fingerprint == b.fingerprint == zoo.fingerprint("GPT2Model")


def test_a_model_that_cannot_be_built_is_a_build_error_with_a_cause():
    with pytest.raises(zoo.BuildError) as info:
        zoo.build("NoSuchModelAnywhere")
    assert info.value.status == "create_error" and "NoSuchModelAnywhere" in info.value.cause


@pytest.mark.parametrize("model, media", [
    ("GlmOcrVisionModel", "hidden_states"),        # a vision tower no Auto mapping registers: flattened patches + grid
    ("Phi4MultimodalAudioModel", "hidden_states"),  # an audio tower no Auto mapping registers: feature frames
])
def test_sub_model_towers_build_from_the_lock_with_their_real_inputs(model, media):
    built = zoo.build(model)
    assert built.inputs[media].is_floating_point() and built.inputs[media].dim() >= 2  # features, not token ids
    assert not built.text_only and built.stratum == "vision_other"
    assert forward(built) is not None


def test_a_part_of_a_composite_model_builds_from_its_part_config():
    """transformers 5.18 gives Aimv2TextModel the composite Aimv2Config (no hidden_size): the part the class's
    name adds to the composite's picks the sub-config; the whole model, or a name that picks two, keeps its own."""
    from harness.zoo.build import config_class_of

    class FooTextConfig:
        model_type = "foo_text"

    class FooVisionConfig:
        model_type = "foo_vision"

    class FooConfig:
        model_type = "foo"
        sub_configs = {"text_config": FooTextConfig, "vision_config": FooVisionConfig}

    def model(name: str, config: type = FooConfig) -> type:
        return type(name, (), {"config_class": config})

    assert config_class_of(model("FooTextModel")) is FooTextConfig
    assert config_class_of(model("FooVisionModel")) is FooVisionConfig
    assert config_class_of(model("FooModel")) is FooConfig
    assert config_class_of(model("FooForConditionalGeneration")) is FooConfig
    assert config_class_of(model("FooVisionTextDualModel")) is FooConfig          # names two parts: unchanged
    assert config_class_of(model("FooTextModel", FooTextConfig)) is FooTextConfig  # already its part


def test_building_an_entry_leaves_it_as_it_was(monkeypatch):
    """A config that changes the dict it is built from (Levit appends to down_ops in its post-init on
    transformers 5.20) must not change the lock entry: the entry is sealed by its hash, and cached for the
    next build in the same process."""
    import copy
    import importlib

    build_mod = importlib.import_module("harness.zoo.build")    # the module (harness.zoo.build is the function)
    entry = copy.deepcopy(build_mod.entry("GPT2Model"))
    before = copy.deepcopy(entry)

    class GPT2Config:
        @classmethod
        def from_dict(cls, d):
            d.setdefault("down_ops", []).append([""])
            raise ValueError("stop here")

    monkeypatch.setattr(build_mod, "config_class_of", lambda cls: GPT2Config)
    with pytest.raises(build_mod.BuildError):
        build_mod.materialize(entry)
    assert entry == before
