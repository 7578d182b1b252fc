"""`zoo check`: the summary document, failures grouped by cause, and the cache keyed by fingerprint."""
from __future__ import annotations

import json

from harness import zoo
from harness.discovery import check
from tests import zoo_extra_models  # noqa: F401  (registers ZooTestBadInputs here too)


def r(model, stratum, status="ok", cause=None, text_only=False):
    return {"model": model, "stratum": stratum, "status": status, "cause": cause, "text_only": text_only, "fingerprint": "f"}


def test_summary_has_the_documented_shape():
    doc = check.summarize([r("B", "decoder_llm"), r("A", "vl_multimodal", text_only=True),
                           r("C", "vl_multimodal", "eager_error", "RuntimeError: boom")])
    assert doc["candidates"] == 3 and doc["ok"] == 2
    assert doc["by_stratum"]["vl_multimodal"] == {"candidates": 2, "ok": 1}
    assert doc["by_stratum"]["encoder_decoder"] == {"candidates": 0, "ok": 0}
    assert doc["text_only"] == ["A"]
    assert doc["failures"] == [{"model": "C", "stratum": "vl_multimodal", "status": "eager_error", "cause": "RuntimeError: boom"}]
    assert json.loads(json.dumps(doc)) == doc


def test_failures_grouped_by_cause_biggest_first():
    groups = check.group_failures([
        {"model": "A", "status": "create_error", "cause": "x"}, {"model": "B", "status": "eager_error", "cause": "y"},
        {"model": "C", "status": "eager_error", "cause": "y"}])
    assert groups == [("eager_error: y", ["B", "C"]), ("create_error: x", ["A"])]


def test_cache_roundtrip_and_foreign_files(tmp_path):
    assert check.load_cache(tmp_path) == {}
    check.save_cache(tmp_path, {"A": r("A", "decoder_llm")})
    assert check.load_cache(tmp_path)["A"]["status"] == "ok"
    (tmp_path / check.CACHE_NAME).write_text('{"version": 999, "results": {"A": {}}}')
    assert check.load_cache(tmp_path) == {}
    (tmp_path / check.CACHE_NAME).write_text("not json")
    assert check.load_cache(tmp_path) == {}


def test_check_runs_in_engine_workers_and_reuses_only_matching_fingerprints(tmp_path):
    models = ["GPT2Model", "ZooTestBadInputs"]
    fps = {"GPT2Model": zoo.fingerprint("GPT2Model")}
    extra = ["tests.zoo_extra_models"]
    first = check.check(models, fps, cache_dir=tmp_path, workers=2, timeout=120, progress=False, extra_modules=extra)
    assert [x["status"] for x in first] == ["ok", "input_error"]
    assert "no inputs can be made" in first[1]["cause"]
    assert first[0]["stratum"] == "decoder_llm" and first[0]["fingerprint"] == fps["GPT2Model"]
    cached = check.load_cache(tmp_path)
    assert set(cached) == {"GPT2Model"}  # no fingerprint, never cached
    # a cached result is reused only while the fingerprint matches: prove it by planting a marker
    cached["GPT2Model"]["cause"] = "from-cache"
    check.save_cache(tmp_path, cached)
    again = check.check(["GPT2Model"], fps, cache_dir=tmp_path, workers=1, timeout=120, progress=False)
    assert again[0]["cause"] == "from-cache"
    fresh = check.check(["GPT2Model"], {"GPT2Model": "changed"}, cache_dir=tmp_path, workers=1, timeout=120, progress=False)
    assert fresh[0]["cause"] is None and fresh[0]["status"] == "ok"


def test_cli_zoo_list_json_is_only_the_document(capsys):
    from bot.cli.main import main

    assert main(["zoo", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"model": "GPT2Model", "stratum": "decoder_llm", "kind": "base"} in rows
    assert all(set(r) == {"model", "stratum", "kind"} for r in rows)
    # every locked class, the towers that no Auto mapping registers included
    assert len(rows) == len(zoo.candidates()) > 900
    assert {"Phi4MultimodalAudioModel", "GlmOcrVisionModel", "AutoformerModel"} <= {r["model"] for r in rows}


def test_cli_repro_writes_a_standalone_script(tmp_path, capsys):
    from bot.cli.main import main

    out = tmp_path / "repro.py"
    assert main(["repro", "GPT2Model", "--config", "capture_scalar_outputs", "-o", str(out)]) == 0
    text = out.read_text()
    assert "capture_scalar_outputs" in text and "FLAGSWEEP_RESULT" in text and "GPT2Config" in text
    assert main(["repro", "GPT2Modle", "--config", "baseline"]) == 2
    assert "GPT2Model" in capsys.readouterr().err
