"""`zoo check`: the summary document, failures grouped by cause, and the cache keyed by fingerprint."""
from __future__ import annotations

import json

from harness import zoo
from harness.discovery import check
from state import db
from state import zoo as kept
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


def test_results_are_kept_in_the_store_one_per_model(tmp_path):
    conn = db.connect(tmp_path / "state.sqlite")
    assert kept.check_results(conn) == {}
    kept.record_checks(conn, [{**r("A", "decoder_llm"), "timeout_s": 60.0}, r("B", "vision_other", "timeout")])
    kept.record_checks(conn, [{**r("A", "decoder_llm", "eager_error", "boom"), "timeout_s": 120.0}])
    results = kept.check_results(db.connect(tmp_path / "state.sqlite"))   # read back from the file
    assert set(results) == {"A", "B"}
    assert (results["A"]["status"], results["A"]["cause"], results["A"]["timeout_s"]) == ("eager_error", "boom", 120.0)
    assert check.reused(conn, {"A": "f", "B": "f"}, 60) == {"A": results["A"]}   # B timed out under no known limit


def test_check_runs_in_engine_workers_and_reuses_only_matching_fingerprints(tmp_path):
    conn = db.connect(tmp_path / "state.sqlite")
    models = ["GPT2Model", "ZooTestBadInputs"]
    fps = {"GPT2Model": zoo.fingerprint("GPT2Model")}
    extra = ["tests.zoo_extra_models"]
    first = check.check(models, fps, conn=conn, workers=2, timeout=120, progress=False, extra_modules=extra)
    assert [x["status"] for x in first] == ["ok", "input_error"]
    assert "no inputs can be made" in first[1]["cause"]
    assert first[0]["stratum"] == "decoder_llm" and first[0]["fingerprint"] == fps["GPT2Model"]
    stored = kept.check_results(conn)
    assert set(stored) == {"GPT2Model"}  # no fingerprint, never kept
    # a kept result is reused only while the fingerprint matches: prove it by planting a marker
    kept.record_checks(conn, [{**stored["GPT2Model"], "cause": "from-the-store"}])
    again = check.check(["GPT2Model"], fps, conn=conn, workers=1, timeout=120, progress=False)
    assert again[0]["cause"] == "from-the-store"
    fresh = check.check(["GPT2Model"], {"GPT2Model": "changed"}, conn=conn, workers=1, timeout=120, progress=False)
    assert fresh[0]["cause"] is None and fresh[0]["status"] == "ok"
    assert kept.check_results(conn)["GPT2Model"]["fingerprint"] == "changed"


def test_cli_zoo_check_ignores_an_old_json_cache_with_one_log_line(tmp_path, capsys, caplog):
    """A zoo-check.json left beside the store by an older flagsweep is never read: its planted result is not
    reused (the model runs), one log line says so, and the result is kept in the store instead. The workers run
    under `[sweep] python` (issue 38: zoo check reported from the bot's own venv), kept with the result."""
    import sys

    from bot.cli.main import main

    python, started = tmp_path / "python", tmp_path / "started"
    python.write_text(f'#!/bin/sh\necho "$@" >> "{started}"\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    (tmp_path / "s.toml").write_text(f'[sweep]\npython = "{python}"\n')

    old = tmp_path / "zoo-cache" / "zoo-check.json"
    old.parent.mkdir()
    planted = {**r("GPT2Model", "decoder_llm", "eager_error", "from-the-old-file"),
               "fingerprint": zoo.fingerprint("GPT2Model"), "timeout_s": 120}
    old.write_text(json.dumps({"version": 1, "results": {"GPT2Model": planted}}))
    caplog.set_level("INFO")
    state = tmp_path / "state.sqlite"
    assert main(["--settings", str(tmp_path / "s.toml"), "--state", str(state), "zoo", "check", "--models",
                 "GPT2Model", "--workers", "1", "--json"]) == 0
    assert "harness.engine.worker" in started.read_text()
    doc = json.loads(capsys.readouterr().out)
    assert (doc["candidates"], doc["ok"], doc["failures"]) == (1, 1, [])
    said = [rec.getMessage() for rec in caplog.records if "zoo-check.json" in rec.getMessage()]
    assert len(said) == 1 and "ignoring" in said[0] and str(state) in said[0]
    stored = kept.check_results(db.connect(state))["GPT2Model"]
    assert stored["status"] == "ok" and stored["where"] == {"python": str(python), "device": "cpu"}
    assert check.reused(db.connect(state), {"GPT2Model": stored["fingerprint"]}, 120,
                        check.where_checked(None, "cpu")) == {}     # the bot's own venv: checked again
    assert old.read_text() == json.dumps({"version": 1, "results": {"GPT2Model": planted}})   # left as it was


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
