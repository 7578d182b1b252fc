"""The lock knows the modes (harness.zoo.mode_record): each entry's record of the modes it runs in eager, probed for
real by `zoo lock` (harness.engine.mode_probe.probe), sealed outside the build hash, checked where a sweep uses it.

The sweep that skips a mode its record says cannot run is tests/test_modes.py's (ModeRecordedModel in `sdpa`).
"""
from __future__ import annotations

import pytest

from harness.core.modes import BUILTIN, DEFAULT
from harness.core.outcome import Outcome
from harness.zoo import lock, mode_record, registry
from harness.zoo.errors import CorruptEntry

RECORD = {"attention": {"eager": None, "sdpa": "ValueError: no sdpa"}, "dtype": {"bfloat16": None},
          "phase": {"train": "ValueError: cannot train"}}


def test_the_record_enters_no_fingerprint_and_passes_the_entry_checks():
    """Sealing a record changes the entry's own hash, never its build hash (what fingerprints and the nightly diff
    compare): a lock filled with records keeps every night's results comparable."""
    real = lock.current()
    entry = {k: v for k, v in real.entry("BertModel").items() if k != mode_record.FIELD}
    recorded = lock.seal({**entry, mode_record.FIELD: RECORD})
    assert lock.check_entry("BertModel", recorded, real.version) == recorded
    assert lock.build_hash(recorded) == lock.build_hash(entry)
    assert recorded["hash"] != lock.seal(entry)["hash"]


@pytest.mark.parametrize("record, field", [
    ([], "modes"),
    ({"dynamic": {"true": None}}, "modes.dynamic"),
    ({"attention": {"flash": None}}, "modes.attention.flash"),
    ({"dtype": {"bfloat16": ""}}, "modes.dtype.bfloat16"),
    ({"phase": ["train"]}, "modes.phase"),
])
def test_a_malformed_record_is_named_by_model_and_field(record, field):
    with pytest.raises(CorruptEntry) as err:
        mode_record.check("BertModel", record)
    assert err.value.field == field


def test_a_mode_is_skipped_for_the_first_axis_its_record_says_cannot_run():
    """Each changed axis looked up alone; a value the record does not name (or no record at all) runs as before."""
    registry.register("RecordedForTest", "decoder_llm", lambda device: None, modes=RECORD)
    try:
        why = mode_record.cannot_run("RecordedForTest", BUILTIN["train-bf16"])
        assert why == "the lock records that RecordedForTest cannot run phase train in eager: ValueError: cannot train"
        assert "attention sdpa" in mode_record.cannot_run("RecordedForTest", BUILTIN["sdpa"])
        for runs in ("eval", "bf16", "eager-attention", "fp16", "dynamic-true"):   # fp16, dynamic: not recorded
            assert mode_record.cannot_run("RecordedForTest", BUILTIN[runs]) is None, runs
        registry.MODES["RecordedForTest"] = {"phase": {"train": 3}}
        with pytest.raises(CorruptEntry):
            mode_record.cannot_run("RecordedForTest", BUILTIN["train"])
        assert mode_record.cannot_run("RecordedForTest", DEFAULT) is None   # eval never reads the record
    finally:
        registry.EXTRA.pop("RecordedForTest")
        registry.MODES.pop("RecordedForTest")
    assert mode_record.cannot_run("NoSuchModelForTest", BUILTIN["train"]) is None   # its build says why


@pytest.mark.compile
def test_modes_probe_records_what_a_real_model_cannot_run_and_changes_nothing_else():
    """`zoo lock --modes-probe`'s job on ReformerModel (built for real, one eager step per probed axis value): its
    train step fails in eager (its axial position shape must multiply to the sequence length in training), the rest
    runs; the entry is otherwise the locked one, its build hash unchanged."""
    from harness.discovery.lockjob import modes_entry

    was = lock.current().entry("ReformerModel")
    got = modes_entry("ReformerModel", "cpu")
    record = got[mode_record.FIELD]
    assert mode_record.check("ReformerModel", record) == record
    assert record["phase"]["train"].startswith("ValueError: If training, make sure that config.axial_pos_shape")
    assert record["attention"] == {"eager": None, "sdpa": None}
    assert record["dtype"] == {"bfloat16": None, "float16": None}
    assert {k: v for k, v in got.items() if k not in ("hash", "modes")} == \
        {k: v for k, v in was.items() if k not in ("hash", "modes")}
    assert lock.build_hash(got) == lock.build_hash(was) and got == lock.seal(got)


def test_a_skipped_item_is_not_comparable_with_a_measured_one():
    """A model skipped one night and measured the next (its record probed again) is neither fixed nor broken."""
    from harness.core.diff import classify

    ran = Outcome("GPT2Model", "baseline", "ok", graphs=1)
    skipped = Outcome("GPT2Model", "baseline", "skipped", error_message="the lock records ...")
    assert classify(skipped, ran) == classify(ran, skipped) == "not_comparable"


def test_zoo_lock_modes_probe_refuses_a_lock_dir_or_reverify_in_one_line(capsys):
    from bot.cli.main import main

    for extra in (["--lock-dir", "elsewhere"], ["--reverify"]):
        assert main(["zoo", "lock", "--modes-probe", *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "works on the package's lock alone" in err, err


def test_zoo_lock_check_does_not_call_an_entry_without_a_record_stale():
    """An entry locked before the record differs from its rediscovery only by it: not stale (`--modes-probe` fills
    it); a record that changed is."""
    from harness.discovery.locker import staleness

    old = {k: v for k, v in lock.current().entry("BertModel").items() if k != mode_record.FIELD}
    probed = lock.seal({**old, mode_record.FIELD: RECORD})
    assert not staleness({"BertModel": old}, ["BertModel"], {"BertModel": probed})["stale"]
    changed = lock.seal({**old, mode_record.FIELD: {"phase": {"train": None}}})
    report = staleness({"BertModel": probed}, ["BertModel"], {"BertModel": changed})
    assert report["stale"] and report["would_differ"] == [{"model": "BertModel", "fields": ["modes"]}]
