"""The zoo's caps over a whole shrunk config (harness/discovery/caps.py): vocabularies with their special ids,
media token counts with their tower's grid, widths under a name the config class aliases. Plain dicts and one
real config class here; the real builds are in tests/test_zoo_lock.py (GPT2Model, whose ids sit above the cap) and
below (a class that does not run with a cap keeps its size, and its entry says why)."""
from __future__ import annotations

import json

from harness.discovery import caps
from harness.discovery.specs import MAX_ID, special_ids
from harness.zoo import lock


def test_special_ids_above_the_cap_move_between_the_drawn_ids_and_the_cap_equal_ones_together():
    cfg = {"vocab_size": 257152, "image_token_index": 256000, "image_token_id": 257151, "pad_token_id": 0,
           "text_config": {"vocab_size": 257152, "bos_token_id": 2, "eos_token_id": [1, 256000], "type_vocab_size": 2},
           "decoder_start_token_id": 257151, "mask_token_id": 1000, "image_size": 224}
    out = caps.cap_vocab(cfg)
    assert out["vocab_size"] == out["text_config"]["vocab_size"] == caps.VOCAB
    assert out["text_config"]["type_vocab_size"] == 2 and out["image_size"] == 224     # not a vocabulary
    # below the drawn range: kept (the inputs avoid them); 1000 is taken, so the moved ids skip it
    assert (out["pad_token_id"], out["text_config"]["bos_token_id"], out["mask_token_id"]) == (0, 2, 1000)
    assert out["image_token_index"] == 1001 and out["image_token_id"] == out["decoder_start_token_id"] == 1002
    assert out["text_config"]["eos_token_id"] == [1, 1001]                    # a list of ids moves alike
    assert all(i < MAX_ID or MAX_ID <= i < caps.VOCAB for i in special_ids(out))
    assert len(special_ids(out)) == len(special_ids(cfg))                      # distinct ids stay distinct


def test_more_ids_than_room_below_the_cap_raise_it_and_a_named_vocabulary_is_left_alone():
    many = {"vocab_size": 50000, **{f"extra_{i}_token_id": 40000 + i for i in range(30)}}
    out = caps.cap_vocab(many)
    assert out["vocab_size"] == caps.VOCAB + 64
    assert sorted(v for k, v in out.items() if k != "vocab_size") == list(range(MAX_ID, MAX_ID + 30))
    named = {"vocab_size": 65536, "image_token_id": 8711, "vocabulary_map": None}
    assert caps.cap_vocab(named) == named
    assert caps.cap_vocab({"vocab_size": 900, "eos_token_id": 5}) == {"vocab_size": 900, "eos_token_id": 5}


def test_media_token_counts_follow_the_towers_cut_grid_or_nothing_changes():
    cfg = {"image_token_index": 1000, "vision_config": {"image_size": 224, "patch_size": 14},
           "text_config": {"num_image_tokens": 256}, "mm_tokens_per_image": 64}   # the grid, and it pooled by 2
    out = caps.cap_media(cfg)
    assert out["vision_config"]["image_size"] == caps.IMAGE_SIDE * 14
    assert out["text_config"]["num_image_tokens"] == caps.IMAGE_SIDE ** 2 and out["mm_tokens_per_image"] == 16
    odd = {**cfg, "mm_tokens_per_image": 50}            # no grid gives 50 tokens: the tower keeps its size
    assert caps.cap_media(odd) == odd
    small = {**cfg, "vision_config": {"image_size": 112, "patch_size": 16}}    # 7 patches a side already
    assert caps.cap_media(small) == small
    text_only = {"vision_config": {"image_size": 224, "patch_size": 14}}       # no image tokens in any text
    assert caps.cap_media(text_only) == text_only


def test_a_width_the_config_class_aliases_is_capped_and_ints_equal_to_it_follow():
    from transformers import FlaubertConfig

    cfg = {"emb_dim": 2048, "n_layers": 12, "n_heads": 16, "embed_init_dim": 2048, "max_position_embeddings": 2048,
           "n_langs": 1}
    out = caps.cap_aliased_widths(FlaubertConfig, cfg)
    assert out["emb_dim"] == out["embed_init_dim"] == caps.WIDTH         # by the alias, then by value
    assert (out["n_layers"], out["n_heads"]) == (2, 4)
    assert out["max_position_embeddings"] == 2048 and out["n_langs"] == 1   # positions are no width


def test_why_an_entry_gave_up_its_caps_is_optional_and_outside_the_build_hash():
    entry = {"model": "M", "config_class": "C", "stratum": "s", "kind": "k", "status": "ok", "cause": None,
             "config": {"vocab_size": 30000}, "spec": {}, "text_only": False,
             "applied": {"recipes": [], "fixups": [], "repairs": []}, "transformers": "5.23.0"}
    uncapped = lock.seal({**entry, lock.UNCAPPED_FIELD: "vocab: eager_error: IndexError: index out of range"})
    assert lock.check_entry("M", uncapped, "5.23.0") is uncapped
    assert lock.build_hash(uncapped) == lock.build_hash(lock.seal(entry))


def test_a_class_that_does_not_run_with_a_cap_keeps_its_size_and_its_entry_says_why():
    """ConvNeXt aliases num_hidden_layers to num_stages: capped at 2 stages, its 4 stage widths no longer fit and
    the eager forward fails. The lock job gives the caps up (the vocabulary and media caps change nothing in it, so
    they are not tried alone), locks the size it had, and its entry names the caps and the failure."""
    from harness.discovery.discover import plan
    from harness.discovery.lockjob import lock_entry

    assert plan("ConvNextModel", ("widths",)).config["num_stages"] == 2                 # what the cap would build
    entry = lock_entry("ConvNextModel", "cpu")
    assert entry["status"] == "ok" and entry["config"]["num_stages"] == 4 == len(entry["config"]["hidden_sizes"])
    assert entry["config"] == json.loads(json.dumps(plan("ConvNextModel", ()).config))  # its old size, as JSON
    assert entry[lock.UNCAPPED_FIELD].startswith("widths, vocab, media: eager_error: RuntimeError: Given normalized_shape")
