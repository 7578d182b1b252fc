"""Input repairs: the model's own error says how its inputs must change (pure spec edits, tiny torch modules)."""
from __future__ import annotations

import pytest
import torch

from harness.discovery import probe
from harness.zoo.inputs import make_inputs


class FramesLast(torch.nn.Module):
    """A speech encoder that projects each frame's mel features: wants (batch, frames, mel)."""

    def __init__(self, mel: int):
        super().__init__()
        self.proj = torch.nn.Linear(mel, 4)

    def forward(self, input_features: torch.Tensor) -> torch.Tensor:
        return self.proj(input_features)


class ChunkedFrames(torch.nn.Module):
    """An encoder that cuts its frames into windows of 100 (the error text is the model's own)."""

    def forward(self, input_features: torch.Tensor, input_features_mask: torch.Tensor) -> torch.Tensor:
        if input_features.shape[-1] % 100:
            raise ValueError("The number of frames must be a multiple of the chunk size (100)")
        assert input_features_mask.shape[-1] == input_features.shape[-1]
        return input_features.sum()


class NeverHappy(torch.nn.Module):
    """An error that no repair knows: the spec comes back as it was."""

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("something no repair knows about")


def test_features_last_from_a_real_matmul_error():
    spec = {"input_features": {"kind": "randn", "shape": [2, 80, 256]}}
    fixed = probe.repair_inputs(FramesLast(80), spec, "cpu")
    assert fixed["input_features"]["shape"] == [2, 256, 80]
    FramesLast(80)(**make_inputs(fixed))  # and the repaired inputs really run


def test_frames_rounded_up_to_the_chunk_with_their_mask():
    spec = {"input_features": {"kind": "randn", "shape": [2, 80, 256]},
            "input_features_mask": {"kind": "ones", "shape": [2, 256]}}
    fixed = probe.repair_inputs(ChunkedFrames(), spec, "cpu")
    assert fixed["input_features"]["shape"] == [2, 80, 300]
    assert fixed["input_features_mask"]["shape"] == [2, 300]


def test_an_unknown_error_leaves_the_spec_alone():
    spec = {"pixel_values": {"kind": "randn", "shape": [2, 3, 8, 8]}}
    assert probe.repair_inputs(NeverHappy(), spec, "cpu") == spec


def test_text_only_specs_skip_the_probe_forward():
    spec = {"input_ids": {"kind": "ids", "shape": [2, 16], "high": 100}}
    assert probe.repair_inputs(NeverHappy(), spec, "cpu") is spec


def test_image_token_count_follows_the_features_the_model_made():
    spec = {"input_ids": {"kind": "ids", "shape": [2, 20], "high": 100, "prefix": [[7, 1], [5, 4]]},
            "attention_mask": {"kind": "ones", "shape": [2, 20]},
            "mm_token_type_ids": {"kind": "typed", "shape": [2, 20], "prefix": [[0, 1], [1, 4]]}}
    error = "Image features and image tokens do not match: tokens: 8, features 12"
    fixed = probe._image_token_count(spec, error)
    assert fixed["input_ids"]["prefix"] == [[7, 1], [5, 6]]
    assert fixed["input_ids"]["shape"] == fixed["attention_mask"]["shape"] == [2, 22]
    assert fixed["mm_token_type_ids"]["prefix"] == [[0, 1], [1, 6]]
    ids = make_inputs(fixed)["input_ids"]
    assert ((ids == 5).sum(dim=1) >= 6).all()
    # the same count in HY-V4-VL's wording (transformers 5.24)
    other = probe._image_token_count(spec, "Image features and image tokens do not match, tokens: 8, features: 12")
    assert other == fixed
    # LLaVA on 5.18 says the same words with its features counted in elements (width 64 x the tokens)
    assert probe._image_token_count(spec, "Image features and image tokens do not match, tokens: 8, features: 512") is None
    none_yet = {**spec, "input_ids": {**spec["input_ids"], "prefix": [[7, 1], [5, 0]]}}
    assert probe._image_token_count(none_yet, "Image features and image tokens do not match, tokens: 0, features: 512") is None
    # T5Gemma 2 on 5.18 counts tokens in HunYuan-VL's words (a colon): none yet, 98 features for a batch of 2
    assert probe._image_token_count(none_yet, "Image features and image tokens do not match: tokens: 0, "
                                              "features 98")["input_ids"]["prefix"] == [[7, 1], [5, 49]]
    assert probe._image_token_count(none_yet, "Multimodal features and placeholder tokens do not match, tokens: 0, "
                                              "features: 12")["input_ids"]["prefix"] == [[7, 1], [5, 6]]
    # fewer features than tokens, or a count no placeholder explains: not this repair's business
    assert probe._image_token_count(spec, "features and image tokens do not match: tokens: 8, features 6") is None
    assert probe._image_token_count(spec, "features and image tokens do not match: tokens: 9, features 12") is None


def test_waveform_samples_rounded_up_to_the_codec_hop():
    spec = {"input_values": {"kind": "randn", "shape": [2, 1, 8000]},
            "padding_mask": {"kind": "ones", "shape": [2, 8000]}}
    fixed = probe._samples_multiple(spec, "`input_values` length 8000 is not a multiple of 96")
    assert fixed["input_values"]["shape"] == [2, 1, 8064] and fixed["padding_mask"]["shape"] == [2, 8064]
    assert probe._samples_multiple(spec, "unrelated") is None


def test_pixel_layout_repairs():
    pix = {"pixel_values": {"kind": "randn", "shape": [2, 3, 32, 32]}}
    assert probe._add_image_axis(pix)["pixel_values"]["shape"] == [2, 1, 3, 32, 32]
    pair = "expects a 5D tensor of shape (batch_size, 2, num_channels, height, width)"
    assert probe._image_group(pix, pair)["pixel_values"]["shape"] == [2, 2, 3, 32, 32]
    tiles = "split_with_sizes expects split_sizes to sum exactly to 2 (input tensor's size at dimension 0), but got split_sizes=[5, 5]"
    assert probe._patches_per_image(pix, tiles)["pixel_values"]["shape"] == [2, 5, 3, 32, 32]
    flat = {"pixel_values": {"kind": "randn", "shape": [16, 3 * 14 * 14]}}
    assert probe._patches_as_images(flat)["pixel_values"]["shape"] == [16, 3, 14, 14]
    assert probe._patch_width(flat, "mat1 and mat2 shapes cannot be multiplied (16x588 and 1176x64)")["pixel_values"]["shape"] == [16, 1176]
    # a linear patch embedding over flattened 8x8 patches of a 32x32 image: 16 patches of 192
    fuyu = probe._image_as_patches(pix, "mat1 and mat2 shapes cannot be multiplied (192x32 and 192x64)")
    assert fuyu["pixel_values"]["shape"] == [2, 16, 192]


def _repair_cases() -> list[tuple[str, dict]]:
    import json
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "zoo_repair_cases.json"
    return sorted(json.loads(path.read_text())["cases"].items())


@pytest.mark.parametrize("name, case", _repair_cases(), ids=[n for n, _ in _repair_cases()])
def test_each_repair_handles_the_real_error_text_it_was_written_for(name, case):
    """Fed the error text a real model raised (recorded by scripts/zoo_repair_cases.py), the repair alone rewrites the spec."""
    matching = [(pattern, fix) for pattern, fix in probe.INPUT_REPAIRS if fix.__name__ == name]
    assert matching, f"{name} is no longer a repair"
    assert any(pattern.search(case["error"]) for pattern, _ in matching)
    fix = matching[0][1]
    after = fix(case["before"], case["error"]) if fix.__code__.co_argcount == 2 else fix(case["before"])
    assert after == case["after"] != case["before"]


def test_a_shrink_that_breaks_the_configs_validator_backs_off_the_fewest_keys():
    """Dory (transformers 5.24): three layer counts must sum to num_hidden_layers, and layer_types must match it."""
    from harness.discovery.fixups import respect_validator

    class Config:
        @classmethod
        def from_dict(cls, d):
            if d["n_in"] + d["n_out"] != d["num_hidden_layers"] or len(d["layer_types"]) != d["num_hidden_layers"]:
                raise ValueError("n_in + n_out must equal num_hidden_layers")
            return cls()

    orig = {"hidden_size": 512, "num_hidden_layers": 4, "layer_types": ["a"] * 4, "n_in": 2, "n_out": 2}
    shrunk = {"hidden_size": 64, "num_hidden_layers": 2, "layer_types": ["a"] * 2, "n_in": 2, "n_out": 2}
    assert respect_validator(Config, orig, shrunk) == {**shrunk, "num_hidden_layers": 4, "layer_types": ["a"] * 4}
    fine = {**shrunk, "n_in": 1, "n_out": 1}
    assert respect_validator(Config, orig, fine) is fine              # a valid shrink is left alone
    hopeless = {**shrunk, "n_in": 9}
    assert respect_validator(Config, {**orig, "n_in": 9}, hopeless) is hopeless   # nothing mends it: unchanged


def test_a_validator_back_off_prefers_the_smallest_model():
    """A width grows by doublings rather than jumping back to its default, inside a sub-config the one value
    moves (HY-V4-VL's text tower: restoring the whole tower allocated 24 GB), and the cheaper of two mends wins."""
    from harness.discovery.fixups import respect_validator

    least_rope = [60]

    class Config:
        @classmethod
        def from_dict(cls, d):
            text = d["text_config"]
            if text["hidden_size"] < 200 and text["rope_dim"] < least_rope[0]:
                raise ValueError("hidden_size too small for the rotary dim")
            return cls()

    orig = {"text_config": {"hidden_size": 6144, "rope_dim": 640, "num_hidden_layers": 78}}
    shrunk = {"text_config": {"hidden_size": 64, "rope_dim": 8, "num_hidden_layers": 3}}
    mended = respect_validator(Config, orig, shrunk)
    assert mended == {"text_config": {"hidden_size": 64, "rope_dim": 64, "num_hidden_layers": 3}}  # 64 < 256
    assert shrunk["text_config"]["rope_dim"] == 8                                                 # not mutated

    least_rope[0] = 500                        # now growing the width (to 256) is the cheaper mend (rope: 512)
    assert respect_validator(Config, orig, shrunk)["text_config"] == {"hidden_size": 256, "rope_dim": 8,
                                                                      "num_hidden_layers": 3}


def test_mrope_sections_the_code_reads_but_nothing_defines_get_qwen2_vl_split(tmp_path, monkeypatch):
    """Qwen2.5-Omni on transformers 5.10: the attention reads rope_parameters["mrope_section"], the default
    config has none and the code no default (checkpoints bring it); the sections are written in, scaled."""
    import importlib.util
    import sys
    from types import SimpleNamespace

    from harness.discovery.fixups import code_default_mrope

    def module_class(name: str, source: str) -> type:
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, mod)              # where inspect finds a class's source file
        spec.loader.exec_module(mod)
        return mod.Model

    reads = module_class("reads", "class Model:\n    def f(self, c):\n        return c.rope_parameters['mrope_section']\n")
    silent = module_class("silent", "class Model:\n    pass\n")
    base = SimpleNamespace(hidden_size=4096, num_attention_heads=32)          # a 128 head
    cfg = {"hidden_size": 64, "num_attention_heads": 4, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}
    fixed = code_default_mrope(reads, base, cfg)
    assert fixed["rope_parameters"]["mrope_section"] == [2, 3, 3]                # Qwen2-VL's 16:24:24, half of 16
    assert fixed["rope_parameters"]["rope_theta"] == 1e6
    assert code_default_mrope(silent, base, cfg) is cfg


def test_keys_a_sub_config_refuses_are_dropped_from_it():
    """Dbrx on transformers 5.18: attn_config's to_dict writes output_attentions, which its from_dict refuses."""
    from harness.discovery.fixups import known_kwargs

    class Config:
        @classmethod
        def from_dict(cls, d):
            extra = {k: v for k, v in d["attn_config"].items() if k != "heads"}
            if extra:
                raise ValueError(f"Found unknown kwargs={extra}")
            return cls()

    cfg = {"output_attentions": False, "attn_config": {"heads": 4, "output_attentions": False}}
    assert known_kwargs(Config, cfg) == {"output_attentions": False, "attn_config": {"heads": 4}}
    fine = {"output_attentions": False, "attn_config": {"heads": 4}}
    assert known_kwargs(Config, fine) is fine


def test_an_image_input_under_another_name_gets_images():
    """VideoLlava on transformers 5.20 calls its image input pixel_values_images: built as pixel_values, renamed."""
    import transformers

    from harness.discovery.specs import make_spec

    class RenamedVideoLlava(transformers.VideoLlavaModel):
        def forward(self, input_ids=None, pixel_values_images=None, pixel_values_videos=None, attention_mask=None):
            raise NotImplementedError

    config = transformers.VideoLlavaConfig()
    spec, text_only = make_spec(RenamedVideoLlava, config, config.to_dict(), "vl_multimodal")
    assert "pixel_values_images" in spec and "pixel_values" not in spec and not text_only
    assert spec["pixel_values_images"]["shape"][0] == 2
