"""The locked corpus: entries build the same tensors every time, bad entries are named, fingerprints move only with builds."""
from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness import zoo
from harness.discovery import check, locker
from harness.zoo import lock
from harness.zoo.build import materialize
from harness.zoo.fingerprint import HERE, MATERIALIZE_SOURCES, materialize_version

CHEAP = ("GPT2Model", "ViTModel")


@pytest.fixture
def small_lock(tmp_path, monkeypatch):
    """A lock dir holding copies of a few real entries; the zoo reads it instead of the package's."""
    real = lock.current()
    entries = {m: copy.deepcopy(real.entry(m)) for m in CHEAP}
    lock.write(lock.lock_path(real.version, tmp_path), real.version, entries)
    monkeypatch.setenv("FLAGSWEEP_ZOO_LOCK_DIR", str(tmp_path))
    lock.load.cache_clear()
    yield tmp_path, real.version
    lock.load.cache_clear()


def _rewrite(path: Path, model: str, edit) -> None:
    doc = json.loads(path.read_text())
    edit(doc["entries"][model])
    path.write_text(json.dumps(doc))
    lock.load.cache_clear()


def test_a_locked_entry_builds_the_same_tensors_twice():
    e = lock.current().entry("GPT2Model")
    a, b = materialize(e), materialize(e)
    assert a.inputs.keys() == b.inputs.keys() == e["spec"].keys()
    assert all(torch.equal(a.inputs[k], b.inputs[k]) for k in a.inputs)
    assert all(torch.equal(x, y) for x, y in zip(a.module.state_dict().values(), b.module.state_dict().values()))
    assert type(a.module).config_class.__name__ == e["config_class"] and a.config == e["config"]


def test_the_lock_file_is_deterministic_and_every_entry_checks():
    current = lock.current()
    text = current.path.read_text()
    assert text == lock.pretty(json.loads(text)) + "\n"  # what write() makes: sorted, stable
    for model in current.names():
        entry = current.entry(model)
        assert entry["status"] in lock.LOCK_STATUSES
        assert entry["status"] == "ok" or entry["cause"]  # a class not locked says why


def test_build_reads_only_the_lock_and_never_discovers(small_lock, monkeypatch):
    import harness.discovery.discover as discover

    monkeypatch.setattr(discover, "discover", lambda *a: pytest.fail("discovery at sweep time"))
    built = zoo.build("ViTModel")
    assert built.stratum == "vision_other" and built.fingerprint == zoo.fingerprint("ViTModel")
    with torch.no_grad():
        built.module(**built.inputs)


def test_missing_entry_names_zoo_lock(small_lock):
    with pytest.raises(zoo.LockError, match="flagsweep zoo lock --models LlamaForCausalLM"):
        lock.current().entry("LlamaForCausalLM")
    with pytest.raises(zoo.BuildError, match="zoo lock"):
        zoo.build("LlamaForCausalLM")
    with pytest.raises(zoo.UnknownModel, match="not in the zoo lock"):
        zoo.resolve(["LlamaForCausalLM"])


def test_a_lock_for_another_transformers_is_refused_naming_both(small_lock):
    tmp, version = small_lock
    lock.lock_path(version, tmp).rename(lock.lock_path("4.0.0", tmp))
    lock.load.cache_clear()
    with pytest.raises(zoo.LockError, match=rf"transformers {version}.*transformers 4\.0\.0"):
        lock.current()
    entry = {**lock.read(lock.lock_path("4.0.0", tmp))["entries"]["GPT2Model"], "transformers": "4.0.0"}
    with pytest.raises(zoo.LockError, match=rf"4\.0\.0.*{version}"):
        materialize(entry)


@pytest.mark.parametrize("edit, field", [
    (lambda e: e["spec"]["pixel_values"].update(shape=[1, 3, 8, 8]), "hash"),
    (lambda e: e.update(status="fine"), "status"),
    (lambda e: e.pop("config"), "config"),
    (lambda e: e.update(spec=[1, 2]), "spec"),
])
def test_a_hand_edited_entry_is_named_by_model_and_field(small_lock, edit, field):
    tmp, version = small_lock
    _rewrite(lock.lock_path(version, tmp), "ViTModel", edit)
    with pytest.raises(zoo.CorruptEntry) as err:
        zoo.resolve(["ViTModel"])
    assert err.value.model == "ViTModel" and err.value.field == field
    assert "ViTModel" in str(err.value) and repr(field) in str(err.value)
    with pytest.raises(zoo.BuildError, match="corrupt"):  # never silently rebuilt
        zoo.build("ViTModel")
    assert zoo.resolve(["GPT2Model"])[0].model == "GPT2Model"  # the others still work


def test_comments_and_formatting_do_not_move_fingerprints(tmp_path):
    for name in MATERIALIZE_SOURCES:
        text = (HERE / name).read_text()
        (tmp_path / name).write_text("# a comment\n" + text.replace("\n\n\n", "\n\n\n# another\n\n").replace("):", "):  # note"))
    assert materialize_version(tmp_path) == materialize_version()
    changed = tmp_path / "changed"
    changed.mkdir()
    for name in MATERIALIZE_SOURCES:
        (changed / name).write_text((tmp_path / name).read_text().replace("SEED = 0", "SEED = 1"))
    assert materialize_version(changed) != materialize_version()


def test_changing_one_entry_changes_exactly_one_fingerprint(small_lock):
    tmp, version = small_lock
    before = {m: zoo.fingerprint(m) for m in CHEAP}
    path = lock.lock_path(version, tmp)
    doc = lock.read(path)
    doc["entries"]["ViTModel"]["spec"]["pixel_values"]["kind"] = "rand"
    lock.write(path, version, doc["entries"])
    after = {m: zoo.fingerprint(m) for m in CHEAP}
    assert after["GPT2Model"] == before["GPT2Model"] and after["ViTModel"] != before["ViTModel"]


def test_reading_the_lock_never_imports_torch():
    code = ("import sys; from harness import zoo; from harness.zoo.corpus import corpus; "
            "c = zoo.resolve(['GPT2Model']); zoo.fingerprint('GPT2Model'); corpus(); zoo.zoo_code_version(); "
            "assert 'torch' not in sys.modules, 'torch imported'; print(len(zoo.candidates()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 900


def test_lock_workers_stage_discovered_entries_that_build(tmp_path):
    """The real lock path for one cheap class: discovery in an engine worker, staged, merged, built from the lock."""
    outcomes = locker.run_discovery(["GPT2Model"], tmp_path / "stage", workers=1, timeout=300, python=None, progress=False)
    assert [o.status for o in outcomes] == ["ok"]
    staged = locker.staged(tmp_path / "stage")
    version = staged["GPT2Model"]["transformers"]
    path = lock.lock_path(version, tmp_path / "lock")
    entries = locker.merge(path, version, staged, None, {"GPT2PreTrainedModel": "abstract"})
    fresh = lock.load(version, str(tmp_path / "lock")).entry("GPT2Model")
    assert fresh == entries["GPT2Model"] == lock.current().entry("GPT2Model")  # discovery is deterministic
    assert lock.load(version, str(tmp_path / "lock")).excluded == {"GPT2PreTrainedModel": "abstract"}


def test_staleness_names_added_removed_broken_and_changed():
    old = {"A": {"status": "ok", "hash": "1", "spec": {}}, "B": {"status": "ok", "hash": "2", "spec": {}},
           "C": {"status": "ok", "hash": "3", "spec": {"x": 1}}, "Gone": {"status": "ok", "hash": "4"}}
    new = {"A": {"status": "ok", "hash": "1", "spec": {}}, "B": {"status": "eager_error", "cause": "boom", "hash": "5"},
           "C": {"status": "ok", "hash": "6", "spec": {"x": 2}}}
    report = locker.staleness(old, ["A", "B", "C", "New"], new)
    assert report["added"] == ["New"] and report["removed"] == ["Gone"]
    assert report["no_longer_build"] == [{"model": "B", "status": "eager_error", "cause": "boom"}]
    assert report["would_differ"] == [{"model": "C", "fields": ["spec"]}]
    assert report["stale"] and not locker.staleness(old, list(old), {"A": old["A"]})["stale"]


def test_a_cached_timeout_is_not_reused_under_a_larger_timeout():
    hit = {"fingerprint": "f", "status": "timeout", "timeout_s": 60}
    assert check.reusable(hit, "f", 60) and check.reusable(hit, "f", 30)
    assert not check.reusable(hit, "f", 120)
    assert check.reusable({"fingerprint": "f", "status": "ok"}, "f", 999)
    assert not check.reusable({"fingerprint": "f", "status": "ok"}, "g", 10)


def test_default_corpus_is_a_subset_of_the_lock_that_builds():
    from harness.zoo.corpus import DEFAULT_CORPUS, corpus

    assert corpus("default") == list(DEFAULT_CORPUS)
    with pytest.raises(zoo.LockError, match="unknown corpus"):
        corpus("nope")


def test_zoo_lock_refuses_a_bad_sample_in_one_line(capsys):
    from bot.cli.main import main

    assert main(["zoo", "lock", "--sample", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--sample" in err[0] and "0" in err[0]
