"""What a transformers bump changed: `zoo diff` over two real locks, and comparability of results across the bump."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from bot.cli.main import main
from harness import zoo
from harness.core.outcome import Outcome
from harness.discovery import locker
from harness.engine.engine import JobResult
from harness.zoo import lock, lockdiff, second
from state import db, history, runs
from harness.core.run_environment import RunEnvironment

MODELS = ("GPT2Model", "ViTModel", "BertModel")
FLAG = "capture_scalar_outputs"                 # a flag that has a summary issue by default


def _entries(version: str) -> dict[str, dict]:
    """Copies of real locked entries, as a lock for `version` would hold them."""
    real = lock.current()
    return {m: {**copy.deepcopy(real.entry(m)), "transformers": version} for m in MODELS}


def _write(folder: Path, version: str, entries: dict[str, dict]) -> Path:
    path = lock.lock_path(version, folder)
    lock.write(path, version, entries)
    return path


@pytest.fixture
def three_locks(tmp_path):
    """old; new_config (GPT2Model's config changed, BertModel gone, a class added); new_modeling (ViT's source changed)."""
    old = _entries("5.23.0")
    config = _entries("5.24.0")
    config["GPT2Model"]["config"]["n_layer"] = 3
    added = copy.deepcopy(config.pop("BertModel"))
    config["BertNewModel"] = {**added, "model": "BertNewModel"}
    modeling = _entries("5.24.0")
    modeling["ViTModel"]["modeling"] = "0" * 16
    return (_write(tmp_path / "a", "5.23.0", old), _write(tmp_path / "b", "5.24.0", config),
            _write(tmp_path / "c", "5.24.0", modeling))


def test_zoo_diff_names_added_removed_changed_entries_and_modeling(three_locks, capsys):
    old, config, modeling = three_locks
    assert main(["zoo", "diff", str(old), str(config), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["old"], doc["new"]) == ("5.23.0", "5.24.0")
    assert doc["added"] == ["BertNewModel"] and doc["removed"] == ["BertModel"]
    assert doc["entries_changed"] == [{"model": "GPT2Model", "changed": ["config"]}]
    assert doc["unchanged"] == ["ViTModel"] and doc["modeling_changed"] == []

    assert main(["zoo", "diff", "5.23.0", "5.24.0", "--lock-dir", str(old.parent)]) == 2   # no 5.24.0 lock there
    assert "5.24.0 is neither a lock file nor a version" in capsys.readouterr().err

    assert main(["zoo", "diff", str(old), str(modeling)]) == 0
    text = capsys.readouterr().out
    assert "1 model(s) whose modeling source changed: ViTModel" in text
    assert "0 entries changed" in text and "2 model(s) unchanged" in text


def test_a_lock_without_modeling_hashes_is_unknown_not_changed(three_locks):
    old, _, modeling = three_locks
    doc = lock.read(old)
    for e in doc["entries"].values():
        e.pop("modeling", None)
    diff = lockdiff.compare(lockdiff.from_lock(doc), lockdiff.from_lock(lock.read(modeling)))
    assert diff["modeling_changed"] == [] and diff["modeling_unknown"] == sorted(MODELS)
    scan = {"transformers": "5.24.0", "candidates": [{"model": m, "modeling": "1" * 16} for m in MODELS]}
    against_installed = lockdiff.compare(lockdiff.from_lock(lock.read(modeling)), lockdiff.from_scan(scan))
    assert against_installed["modeling_changed"] == sorted(MODELS) and not against_installed["entries_compared"]


def _run(conn, version: str, fingerprints: dict[str, str], recipes: str = "r") -> int:
    rid = runs.create_run(conn, environment=RunEnvironment.from_dict({"torch_version": "2.13.0", "transformers_version": version,
                                             "device": "cpu", "recipe_fingerprint": recipes}),
                          models=list(fingerprints), configs={"baseline": {}, FLAG: {FLAG: True}})
    for m, fp in fingerprints.items():
        for config in ("baseline", FLAG):
            runs.record_outcome(conn, rid, Outcome(m, config, "ok", stratum="decoder_llm", graphs=2, fingerprint=fp))
    runs.finish_run(conn, rid)
    history.finalize_run(conn, rid)
    return rid


def test_across_a_bump_changed_models_are_not_comparable_and_the_rest_are_compared(three_locks, tmp_path,
                                                                                   monkeypatch, capsys):
    old, _, modeling = three_locks
    prints = {}
    for path in (old, modeling):     # each night builds from its own release's lock, as a sweep does
        version = lock.read(path)["transformers"]
        monkeypatch.setattr(lock, "LOCK_DIR", path.parent)
        monkeypatch.setattr(lock, "installed_transformers", lambda v=version: v)
        lock.load.cache_clear()
        prints[version] = {m: zoo.fingerprint(m) for m in MODELS}
    lock.load.cache_clear()
    assert prints["5.23.0"]["GPT2Model"] == prints["5.24.0"]["GPT2Model"]   # the release alone moves nothing
    assert prints["5.23.0"]["ViTModel"] != prints["5.24.0"]["ViTModel"]

    state = tmp_path / "st.sqlite"
    conn = db.connect(state)
    a, b = _run(conn, "5.23.0", prints["5.23.0"]), _run(conn, "5.24.0", prints["5.24.0"])
    assert main(["--state", str(state), "diff", str(a), str(b), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by_model = {t["model"]: t for t in doc["transitions"]}
    assert by_model["ViTModel"]["transition"] == "not_comparable"
    assert by_model["ViTModel"]["reason"] == "transformers 5.23.0 → 5.24.0"
    assert by_model["GPT2Model"]["transition"] == by_model["BertModel"]["transition"] == "unchanged"
    assert any(n.startswith("transformers 5.23.0 → 5.24.0: 1 of 3 models not comparable") for n in doc["notes"])
    assert main(["--state", str(state), "report", str(b), "-o", str(tmp_path / "r.md")]) == 0
    report = (tmp_path / "r.md").read_text()
    assert "not comparable (transformers 5.23.0 → 5.24.0)" in report
    out = tmp_path / "out"
    assert main(["--state", str(state), "publish", str(b), "--dry-run", "--no-verify", "--out", str(out)]) == 0
    summary = next(p.read_text() for p in out.glob("*.md") if p.read_text().startswith("# flagsweep summary"))
    assert "1 model was not compared with" in summary and "(transformers 5.23.0 → 5.24.0)" in summary


def test_the_night_after_a_relock_says_so_in_one_line_and_lists_no_item(tmp_path, capsys):
    """The corpus re-locked under the same transformers (issue 44's caps): every build changed, so every item is
    not comparable for one night. The diff, the report and `flagsweep diff` say so in one line (the two recipe
    fingerprints, how many models) instead of listing thousands of not_comparable items; a model whose build did
    not change is still compared, and a night without a re-lock has no such line."""
    state = tmp_path / "st.sqlite"
    conn = db.connect(state)
    before = {"GPT2Model": "f1", "BertModel": "f2", "ViTModel": "f3"}
    a = _run(conn, "5.23.0", before, recipes="old")
    b = _run(conn, "5.23.0", {**before, "GPT2Model": "g1", "BertModel": "g2"}, recipes="new")
    c = _run(conn, "5.23.0", {**before, "GPT2Model": "g1", "BertModel": "g2"}, recipes="new")
    assert main(["--state", str(state), "diff", str(a), str(b), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["relock"] == {"before": "old", "after": "new", "models": 2, "of": 3}
    by_model = {t["model"]: t for t in doc["transitions"]}
    assert by_model["GPT2Model"]["transition"] == "not_comparable" and by_model["GPT2Model"]["in_note"]
    assert by_model["ViTModel"]["transition"] == "unchanged" and not by_model["ViTModel"]["in_note"]
    assert doc["changed_models"] == []                       # nothing a person needs to hear about, item by item
    assert main(["--state", str(state), "diff", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    note = "recipe fingerprint old → new: the corpus was re-locked or its build code changed): 2 of 3 models"
    assert text.count(note) == 1 and "not_comparable" not in text and "Nothing changed." in text
    assert main(["--state", str(state), "report", str(b), "-o", str(tmp_path / "r.md")]) == 0
    report = (tmp_path / "r.md").read_text()
    assert report.count(note) == 1 and "not comparable (" not in report and "Nothing changed." in report
    assert main(["--state", str(state), "diff", str(b), str(c), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["relock"] is None    # the night after: compared as ever


def test_a_worker_answer_that_is_no_entry_is_an_error_not_ok():
    real = lock.current().entry("GPT2Model")
    hollow = lock.seal({**real, "config_class": "", "config": {}})
    why = locker.not_an_entry(JobResult("GPT2Model", "ok", hollow), real["transformers"])
    assert "config_class" in why
    assert locker.not_an_entry(JobResult("GPT2Model", "ok", None), real["transformers"])
    assert locker.not_an_entry(JobResult("GPT2Model", "ok", real), real["transformers"]) is None


def test_zoo_diff_reads_locks_with_their_checks(three_locks, capsys, tmp_path):
    """Issue 31: `zoo diff` read locks without their checks: a mistyped release was accepted, and a hand-edited
    entry whose hash no longer matches was listed as an ordinary change. It is flagged as `zoo lock --check` does."""
    old, config, _ = three_locks
    doc = json.loads(config.read_text())
    doc["entries"]["GPT2Model"]["config"]["n_layer"] = 7          # edited by hand: the hash no longer matches
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    assert main(["zoo", "diff", str(old), str(edited), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["corrupt"] == [{"side": "new", "model": "GPT2Model", "field": "hash",
                               "why": out["corrupt"][0]["why"]}] and "edited by hand" in out["corrupt"][0]["why"]
    assert out["entries_changed"] == [] and "GPT2Model" not in out["unchanged"]
    assert main(["zoo", "diff", str(old), str(edited)]) == 1
    assert "corrupt entry in the 5.24.0 lock (new): GPT2Model (field 'hash'" in capsys.readouterr().out

    doc["transformers"] = 5
    edited.write_text(json.dumps(doc))
    assert main(["zoo", "diff", str(old), str(edited)]) == 2
    assert "'transformers' must be the release's version (a string), got 5" in capsys.readouterr().err


def test_zoo_lock_into_a_file_is_refused_before_discovery(tmp_path, capsys):
    """Issue 31: `zoo lock --lock-dir FILE` failed with `File exists` only after discovery ran."""
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("")
    assert main(["--state", str(tmp_path / "s.sqlite"), "zoo", "lock", "--models", "GPT2Model",
                 "--lock-dir", str(a_file)]) == 2
    err = capsys.readouterr().err
    assert err == f"flagsweep zoo lock: --lock-dir {a_file} is a file; pass the folder the lock files live in\n"
    assert not (tmp_path / "s.sqlite").exists()


@pytest.mark.parametrize("second, field", [
    ({"input_ids": {"kind": "ids", "shape": [3, 24]}}, "second_spec"),         # names other inputs than the spec
    ("[3, 24]", "second_spec"),                                                # not an input spec
    ({"input_ids": {"kind": "ids", "shape": [3, -1]}, "attention_mask": {"kind": "ones", "shape": [3, 24]}},
     "second_spec.input_ids"),
])
def test_zoo_diff_checks_and_shows_the_second_input_spec(three_locks, capsys, tmp_path, second, field):
    """Issue 38: `zoo diff` neither checked nor showed a malformed second input spec when the entry's hash was
    recomputed (the spec is left out of build_hash, so the entry read as unchanged); a changed one is shown."""
    old, config, _ = three_locks
    doc = json.loads(config.read_text())
    doc["entries"]["GPT2Model"] = lock.seal({**doc["entries"]["GPT2Model"], "second_spec": second})
    doc["entries"]["ViTModel"] = lock.seal({**doc["entries"]["ViTModel"],
                                            "second_spec": {"pixel_values": {"kind": "randn", "shape": [1, 3, 96, 96]}}})
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    assert main(["zoo", "diff", str(old), str(edited), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [(c["side"], c["model"], c["field"]) for c in out["corrupt"]] == [("new", "GPT2Model", field)]
    assert out["second_spec_changed"] == ["ViTModel"] and "GPT2Model" not in out["unchanged"]
    assert main(["zoo", "diff", str(old), str(edited)]) == 1
    text = capsys.readouterr().out
    assert f"corrupt entry in the 5.24.0 lock (new): GPT2Model (field '{field}'" in text
    assert "1 model(s) whose second input spec changed" in text and "ViTModel" in text


@pytest.mark.parametrize("record, field", [
    ("eager", "modes"),                                               # not an object
    ({"attention": {"flash": None}}, "modes.attention.flash"),        # not a probed value
    ({"phase": {"train": ""}}, "modes.phase.train"),                  # an empty reason
])
def test_a_malformed_modes_record_is_listed_by_zoo_diff_and_the_lock_check(three_locks, capsys, tmp_path, record,
                                                                          field):
    """The modes record is sealed outside build_hash, like the second spec: a malformed one in a re-sealed entry read
    as unchanged to `zoo diff` and `zoo lock --check` (a sweep refused it); both now list it as corrupt."""
    old, config, _ = three_locks
    doc = json.loads(config.read_text())
    doc["entries"]["GPT2Model"] = lock.seal({**doc["entries"]["GPT2Model"], "modes": record})
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    assert main(["zoo", "diff", str(old), str(edited), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [(c["side"], c["model"], c["field"]) for c in out["corrupt"]] == [("new", "GPT2Model", field)]
    bad = locker.corrupt_entries(doc["entries"], doc["transformers"])    # what `zoo lock --check` reports
    assert [(b["model"], b["field"]) for b in bad] == [("GPT2Model", field)]


def test_the_committed_lock_passes_every_check_its_second_specs_included():
    """Found with issue 38: three committed entries (time-series models, an input with 0 features) sealed a second
    spec the check refused (it wanted every size positive; the entry's own spec has the 0): their second_size call
    never ran. A size may be 0; the committed lock has no corrupt entry."""
    doc = lock.read(lock.current().path)
    assert second.corrupt_entries(doc["entries"], doc["transformers"]) == []
    sealed = lock.current().entry("AutoformerModel")
    assert second.check("AutoformerModel", sealed["second_spec"], sealed["spec"]) == sealed["second_spec"]
