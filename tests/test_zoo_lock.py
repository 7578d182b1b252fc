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
from harness.discovery import caps, check, locker
from harness.discovery.specs import MAX_ID
from harness.engine import engine
from harness.zoo import lock
from harness.zoo.sizes import second_specs
from harness.zoo.build import materialize
from bot.text.render import render
from harness.zoo.fingerprint import HERE, MATERIALIZE_SOURCES, materialize_version
from state import db
from state import zoo as kept

CHEAP = ("GPT2Model", "ViTModel")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def small_lock(tmp_path, monkeypatch):
    """A lock dir holding copies of a few real entries; the zoo in this process reads it instead of the package's."""
    real = lock.current()
    entries = {m: copy.deepcopy(real.entry(m)) for m in CHEAP}
    lock.write(lock.lock_path(real.version, tmp_path), real.version, entries)
    monkeypatch.setattr(lock, "LOCK_DIR", tmp_path)
    lock.load.cache_clear()
    yield tmp_path, real.version
    lock.load.cache_clear()


@pytest.fixture
def scanned_once(transformers_scan, monkeypatch):
    """`zoo lock` in this process reads the session's one real scan (tests/conftest.py)."""
    monkeypatch.setattr(locker, "scan", lambda python=None: copy.deepcopy(transformers_scan))


def _main(capsys, *args: str) -> tuple[int, str, str]:
    """`flagsweep ARGS` in this process: (exit code, stdout, stderr)."""
    from bot.cli.main import main

    return main(list(args)), *capsys.readouterr()


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


def test_the_lock_job_answers_entries_that_build(tmp_path):
    """The real lock path for one cheap class: discovery in an engine worker, its entry as the answer, merged, built."""
    real = lock.current()
    # Mamba2Model's config holds an infinity (time_step_limit [0.0, inf]) that a worker's event refuses as a number:
    # the answer travels as JSON text, and one such class no longer stops the whole lock (it did with issue 45's checks)
    answers = sorted(locker.discover_entries(["GPT2Model", "Mamba2Model"], real.version, {}, workers=2, timeout=300,
                                             python=None, progress=False), key=lambda a: a[0]["model"])
    assert [(e["model"], e["status"], answered) for e, answered in answers] == [("GPT2Model", "ok", True),
                                                                                 ("Mamba2Model", "ok", True)]
    assert answers[1][0]["config"]["time_step_limit"] == [0.0, float("inf")]
    # The caps (harness/discovery/caps.py): GPT-2's vocabulary of 50,257 is capped at 1,024 and its bos/eos id 50,256,
    # above the cap, is moved inside it and above every id the inputs draw; the built model ran in eager (status ok)
    gpt2 = answers[0][0]
    assert gpt2["config"]["vocab_size"] == caps.VOCAB and gpt2["config"]["bos_token_id"] == gpt2["config"]["eos_token_id"] == MAX_ID
    assert gpt2["spec"]["input_ids"]["high"] == MAX_ID and lock.UNCAPPED_FIELD not in gpt2
    answers = answers[:1]
    path = lock.lock_path(real.version, tmp_path / "lock")
    entries = locker.merge(path, real.version, {"GPT2Model": answers[0][0]}, None, {"GPT2PreTrainedModel": "abstract"})
    fresh = lock.load(real.version, str(tmp_path / "lock")).entry("GPT2Model")
    assert fresh == entries["GPT2Model"]
    # Discovery is deterministic: the same entry as the committed one, once the scan's modeling hash is added
    # (a lock run adds it from its scan: locker.with_modeling).
    committed = real.entry("GPT2Model")
    # `zoo lock` seals the second input spec too (the rule's first candidate that runs in eager)
    assert fresh["second_spec"] == second_specs(committed["spec"])[0]
    assert fresh["second_spec"]["input_ids"]["shape"] == [3, 24]
    # and its modes record (harness.zoo.mode_record), the same as the committed one's where that has one
    assert lock.seal({**fresh, "modeling": committed["modeling"]}) == lock.seal({**committed, "modes": fresh["modes"]})
    assert lock.load(real.version, str(tmp_path / "lock")).excluded == {"GPT2PreTrainedModel": "abstract"}


def test_a_worker_without_an_answer_gets_an_entry_saying_why(tmp_path):
    """A class whose lock job hangs past the timeout is locked as a timeout with its cause, in the stratum known."""
    result = engine.JobResult("Qwen2VLForConditionalGeneration", "timeout", None,
                              "no result after 600 s (while building the model)")
    entry = locker.unanswered_entry(result, "5.0.0", "vl_multimodal")
    assert lock.check_entry("Qwen2VLForConditionalGeneration", entry, "5.0.0") == entry
    assert (entry["status"], entry["stratum"], entry["kind"]) == ("timeout", "vl_multimodal", "conditional_generation")
    assert entry["cause"] == "no result after 600 s (while building the model)"
    broke = locker.unanswered_entry(engine.JobResult("GPT2Model", "error", None, "ImportError: x"), "5.0.0", None)
    assert (broke["status"], broke["stratum"], broke["cause"]) == ("create_error", "decoder_llm", "ImportError: x")


def test_zoo_lock_with_a_relative_state_and_lock_dir_writes_whole_entries_and_resumes(tmp_path, monkeypatch, capsys,
                                                                                      scanned_once):
    """`zoo lock` from another directory, --state and --lock-dir relative: the entries come back from the workers
    whole (no stage folder that the workers, started in the project root, would resolve elsewhere), and an entry
    an interrupted lock kept in the store is reused, then forgotten once the lock file has it."""
    from bot.cli.main import main
    from state import db
    from state import zoo as kept

    real = lock.current()
    planted = lock.seal({**real.entry("ViTModel"), "cause": "kept by an interrupted lock"})
    monkeypatch.chdir(tmp_path)
    conn = db.connect(tmp_path / "run" / "state.sqlite")
    kept.keep_lock_entry(conn, real.version, planted)
    rc = main(["--state", "run/state.sqlite", "zoo", "lock", "--models", "GPT2Model,ViTModel", "--lock-dir", "locks",
               "--workers", "1", "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["locked"], doc["resumed"], doc["ok"]) == (["GPT2Model"], ["ViTModel"], 2)
    written = lock.load(real.version, str(tmp_path / "locks"))
    got = written.entry("GPT2Model")   # whole: config class, config, spec, hash; its sealed second spec, modes record
    assert got == lock.seal({**real.entry("GPT2Model"), "modes": got["modes"]})
    assert got["second_spec"] == second_specs(got["spec"])[0]
    assert written.entry("GPT2Model")["config_class"] == "GPT2Config"
    assert written.entry("ViTModel") == planted
    assert kept.lock_entries(conn, real.version) == {}
    assert not (ROOT / "run").exists() and not (ROOT / "locks").exists()


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


@pytest.mark.parametrize("flag, value", [("--sample", "0"), ("--timeout", "-1"), ("--timeout", "0"),
                                         ("--workers", "-1"), ("--timeout", "soon")])
def test_zoo_lock_refuses_a_bad_value_in_one_line_and_leaves_the_lock_alone(tmp_path, capsys, flag, value):
    from bot.cli.main import main

    real = lock.current()
    shutil.copy(real.path, tmp_path / real.path.name)
    with pytest.raises(SystemExit) as done:
        main(["--state", str(tmp_path / "s.sqlite"), "zoo", "lock", "--models", "BertModel", flag, value,
              "--lock-dir", str(tmp_path)])
    assert done.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0] and repr(value) in err[0]
    assert (tmp_path / real.path.name).read_bytes() == real.path.read_bytes()


# --- issue 21: the lock's check re-hashes and refuses hollow entries -----------------------------------

def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """The real `flagsweep` in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_zoo_lock_check_re_hashes_a_hand_edited_entry(tmp_path, capsys, scanned_once):
    """A hand edit that left the stored hash alone is stale for `--check` (rc 1, naming model and field), as for sweeps."""
    real = lock.current()
    shutil.copy(real.path, tmp_path / real.path.name)
    _rewrite(tmp_path / real.path.name, "BertModel", lambda e: e["config"].update(hidden_size=128))
    rc, out, err = _main(capsys, "--state", str(tmp_path / "s.sqlite"), "zoo", "lock", "--check", "--models",
                         "BertModel", "--lock-dir", str(tmp_path), "--workers", "1")
    assert rc == 1, out + err
    assert "is stale" in out and "corrupt entry: BertModel (field 'hash'" in out


@pytest.mark.parametrize("field, empty", [("config_class", ""), ("config", {})])
def test_a_hollow_ok_entry_is_refused_by_loading_and_by_the_check(small_lock, field, empty):
    tmp, version = small_lock
    path = lock.lock_path(version, tmp)
    doc = json.loads(path.read_text())
    doc["entries"]["ViTModel"] = lock.seal({**doc["entries"]["ViTModel"], field: empty})   # a consistent hash
    path.write_text(json.dumps(doc))
    lock.load.cache_clear()
    with pytest.raises(zoo.CorruptEntry) as err:
        lock.current().entry("ViTModel")
    assert (err.value.model, err.value.field) == ("ViTModel", field) and "\n" not in str(err.value)
    bad = locker.corrupt_entries(doc["entries"], version)
    assert [(b["model"], b["field"]) for b in bad] == [("ViTModel", field)]
    report = locker.staleness(doc["entries"], list(doc["entries"]), {}, bad)
    assert report["stale"] and report["corrupt"] == bad
    text = render("zoo_lock_check.txt.j2", report={**report, "transformers": version})
    assert [ln for ln in text.splitlines() if "ViTModel" in ln] == [f"  corrupt entry: ViTModel (field '{field}': empty in an entry with status ok)"]


def test_a_relock_that_times_out_keeps_the_good_entry_and_says_so(tmp_path, capsys, scanned_once):
    """A worker that gave no answer says nothing about the class: the good entry stays, a warning names it, rc 1."""
    real = lock.current()
    shutil.copy(real.path, tmp_path / real.path.name)
    rc, out, err = _main(capsys, "--state", str(tmp_path / "s.sqlite"), "zoo", "lock", "--models", "BertModel",
                         "--timeout", "0.01", "--workers", "1", "--lock-dir", str(tmp_path))
    assert rc == 1, out + err
    warning = [ln for ln in err.splitlines() if ln.startswith("WARNING: BertModel")]
    assert len(warning) == 1 and "timeout" in warning[0] and "good entry is kept" in warning[0]
    assert lock.load(real.version, str(tmp_path)).entry("BertModel") == real.entry("BertModel")


def test_an_answered_failure_of_a_good_entry_replaces_it_and_is_reported():
    old = {"A": {"status": "ok"}, "B": {"status": "ok"}, "C": {"status": "eager_error"}}
    fresh = {"A": {"status": "eager_error", "cause": "boom"}, "B": {"status": "ok", "cause": None},
             "C": {"status": "timeout", "cause": "slow"}, "D": {"status": "timeout", "cause": "slow"}}
    assert locker.downgrades(old, fresh, unanswered={"C", "D"}) == [
        {"model": "A", "status": "eager_error", "cause": "boom", "kept": False}]
    assert locker.downgrades(old, {"A": fresh["D"]}, unanswered={"A"})[0]["kept"] is True


@pytest.mark.parametrize("edit, named", [
    (lambda d: d.update(format=99), "lock format 99; this flagsweep reads format 1"),
    (lambda d: d.update(notes="hand-made"), "'notes' is not a lock key"),
    (lambda d: d.update(excluded=["BarkModel"]), "'excluded' must map class names to reasons, got list"),
])
def test_a_lock_file_of_another_format_or_shape_is_refused_in_one_line(small_lock, capsys, edit, named):
    from bot.cli.main import main

    tmp, version = small_lock
    path = lock.lock_path(version, tmp)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    lock.load.cache_clear()
    assert main(["zoo", "list"]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err and named in lines[0] and path.name in lines[0]


def test_zoo_lock_check_of_a_model_missing_from_the_lock_reports_it_stale(tmp_path, capsys, scanned_once):
    real = lock.current()
    doc = json.loads(real.path.read_text())
    del doc["entries"]["BertModel"]
    (tmp_path / real.path.name).write_text(json.dumps(doc))
    rc, out, err = _main(capsys, "zoo", "lock", "--check", "--models", "BertModel", "--lock-dir", str(tmp_path),
                         "--workers", "1")
    assert rc == 1, err
    assert "1 class(es) not in the lock: BertModel" in out


def test_zoo_lock_with_an_interpreter_without_transformers_is_one_line(tmp_path):
    import venv

    venv.create(tmp_path / "bare", with_pip=False)      # a real Python, without transformers
    (tmp_path / "s.toml").write_text(f'[sweep]\npython = "{tmp_path / "bare" / "bin" / "python"}"\n')
    done = _cli("--settings", str(tmp_path / "s.toml"), "zoo", "lock", "--check", "--lock-dir", str(tmp_path))
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "cannot scan transformers in" in lines[0] and "No module named" in lines[0]


def test_zoo_lock_reverify_seals_the_second_spec_without_discovering_again(tmp_path, capsys):
    """--reverify builds the locked entry again (workers read the package lock) and seals its second spec; the
    result is written to a copy of the lock here (the CLI writes the package's), every other entry untouched, and the
    build hash (what the night-to-night diff compares) unchanged."""
    real = lock.current()
    path = lock.lock_path(real.version, tmp_path)
    doc = lock.read(lock.lock_path(real.version, lock.LOCK_DIR))
    unsealed = {m: {k: v for k, v in e.items() if k != "second_spec"} for m, e in doc["entries"].items()}
    lock.write(path, real.version, unsealed, doc["excluded"])          # as locked before the second spec was sealed
    result = locker.reverify_corpus(db.connect(tmp_path / "state.sqlite"), patterns=["GPT2Model"], sample_n=None,
                                    seed=0, workers=1, timeout=300, python=None, progress=False, lock_dir=tmp_path)
    assert (result.locked, result.downgraded) == (["GPT2Model"], [])
    written = lock.load(real.version, str(tmp_path))
    got, was = written.entry("GPT2Model"), real.entry("GPT2Model")
    assert got["second_spec"] == second_specs(was["spec"])[0] and got == lock.seal({**was, "modes": got["modes"]})
    assert lock.build_hash(got) == lock.build_hash(unsealed["GPT2Model"])
    assert {m: e for m, e in written.entries.items() if m != "GPT2Model"} == \
        {m: lock.seal(e) for m, e in unsealed.items() if m != "GPT2Model"}


def test_a_modes_probe_stopped_after_one_entry_resumes_with_only_what_is_left(tmp_path, monkeypatch):
    """`--modes-probe` over the two cheap entries, interrupted (Ctrl-C) as soon as the first is answered: the store
    keeps that entry and the lock file is untouched; the rerun probes only the other, writes both, and forgets what it
    kept. Kept for the other beforehand: an entry whose lock entry has changed since, and `--reverify`'s own; neither
    is reused."""
    real = lock.current()
    path = lock.lock_path(real.version, tmp_path)
    doc = lock.read(lock.lock_path(real.version, lock.LOCK_DIR))
    unprobed = {m: {k: v for k, v in e.items() if k != "modes"} for m, e in doc["entries"].items()}
    lock.write(path, real.version, unprobed, doc["excluded"])            # as locked before the modes record
    before, old = path.read_text(), lock.read(path)["entries"]
    conn = db.connect(tmp_path / "state.sqlite")
    asked, discover = [], locker.discover_entries

    def recorded(models, *args, **kwargs):
        asked.append(list(models))
        yield from discover(models, *args, **kwargs)

    def interrupted(models, *args, **kwargs):
        for answer in recorded(models, *args, **kwargs):
            yield answer
            raise KeyboardInterrupt
    probe = dict(patterns=list(CHEAP), sample_n=None, seed=0, workers=1, timeout=300, python=None, progress=False,
                 lock_dir=tmp_path, job=locker.MODES_JOB)
    monkeypatch.setattr(locker, "discover_entries", interrupted)
    with pytest.raises(KeyboardInterrupt):
        locker.reverify_corpus(conn, **probe)
    (first,) = kept.probe_entries(conn, locker.MODES_JOB, real.version)
    assert path.read_text() == before
    (other,) = set(CHEAP) - {first}
    kept.keep_probe_entry(conn, locker.MODES_JOB, real.version, kept.KeptProbe("0" * 16, old[other]))
    kept.keep_probe_entry(conn, locker.REVERIFY_JOB, real.version, kept.KeptProbe(old[other]["hash"], old[other]))
    monkeypatch.setattr(locker, "discover_entries", recorded)
    result = locker.reverify_corpus(conn, **probe)
    assert (asked, result.locked, result.resumed) == ([sorted(CHEAP), [other]], [other], [first])
    written = lock.load(real.version, str(tmp_path))
    for model in CHEAP:
        got = written.entry(model)
        assert got == lock.seal({**unprobed[model], "modes": got["modes"]}) and set(got["modes"]) == {"attention",
                                                                                                      "dtype", "phase"}
    assert kept.probe_entries(conn, locker.MODES_JOB, real.version) == {}
    assert set(kept.probe_entries(conn, locker.REVERIFY_JOB, real.version)) == {other}    # --reverify's to resume


def test_zoo_lock_reverify_refuses_a_lock_dir_in_one_line(capsys):
    from bot.cli.main import main

    assert main(["zoo", "lock", "--reverify", "--lock-dir", "elsewhere"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--reverify works on the package's lock alone" in err


def test_the_committed_lock_seals_a_second_spec_for_nine_in_ten_good_entries_and_says_why_for_the_rest():
    entries = lock.current().entries
    good = [e for e in entries.values() if e["status"] == "ok"]
    sealed = [e for e in good if "second_spec" in e]
    assert len(sealed) >= 0.9 * len(good)
    assert all(e.get("second_spec_why") for e in good if "second_spec" not in e)
