"""Migrations from every earlier schema version, each with realistic rows, to the current one."""
from __future__ import annotations

import dataclasses

import json
import sqlite3

import pytest

from harness.core.model_build import ModelBuild
from harness.core.modes import Mode
from harness.core.options import Accuracy, RunOptions, SweepOptions
from harness.core.outcome import Outcome
from harness.core.model_build import ModelBuild
from state import (budgets, counters, deliveries, flags, gates, history, jobs, leases, links, ranges, resolutions,
                   runs, verdicts, zoo)
from state.db import connect, migrate_to
from state.schema import MIGRATIONS, SCHEMA_VERSION, V20
from tests import historydata as hd

OUTCOME_V1 = {"model": "LlamaForCausalLM", "config": "capture_scalar_outputs", "status": "error", "graphs": None,
              "signature": hd.PENDING, "error_type": "PendingUnbackedSymbolNotFound", "fingerprint": "fp",
              "error_message": hd.PENDING, "a_key_from_an_older_version": 1}


def _fill_v1(conn: sqlite3.Connection) -> None:
    """Rows as the engine wrote them at schema v1 (no nightly/shard columns yet)."""
    conn.execute("INSERT INTO environments (id, key, torch_version, data) VALUES (1, 'k1', '2.12.0', ?)",
                 (json.dumps({"torch_version": "2.12.0"}),))
    for rid in (1, 2):
        conn.execute("INSERT INTO runs (id, kind, environment_id, started_at, finished_at, status, models, configs)"
                     " VALUES (?, 'sweep', 1, ?, ?, 'finished', ?, ?)",
                     (rid, f"2026-10-0{rid}T03:00:00+00:00", f"2026-10-0{rid}T04:00:00+00:00",
                      json.dumps(["LlamaForCausalLM"]), json.dumps(hd.CONFIGS)))
        base = {"model": "LlamaForCausalLM", "config": "baseline", "status": "ok", "graphs": 4, "fingerprint": "fp"}
        for o in (base, OUTCOME_V1):
            conn.execute("INSERT INTO outcomes (run_id, model, config, status, graphs, signature, fingerprint, data,"
                         " recorded_at) VALUES (?,?,?,?,?,?,?,?,?)",
                         (rid, o["model"], o["config"], o["status"], o["graphs"], o.get("signature"), "fp",
                          json.dumps(o), "2026-10-01T03:30:00+00:00"))


def _fill_v2(conn: sqlite3.Connection) -> None:
    """v1 rows plus what v2 added: a nightly run, effects, a signature, an issue link and outbox row."""
    _fill_v1(conn)
    conn.execute("UPDATE runs SET kind = 'nightly', nightly = '2026-10-02' WHERE id = 2")
    conn.execute("INSERT INTO effects (run_id, model, config, stratum, effect, baseline_graphs, config_graphs,"
                 " baseline_signature, config_signature) VALUES (2, 'LlamaForCausalLM', 'capture_scalar_outputs',"
                 " 'decoder_llm', 'crashes', 4, NULL, NULL, ?)", (hd.PENDING,))
    conn.execute("INSERT INTO signatures (config, signature, first_run, last_run, first_seen, last_seen,"
                 " nightlies_seen, models) VALUES ('capture_scalar_outputs', ?, 1, 2, '2026-10-01', '2026-10-02', 2, ?)",
                 (hd.PENDING, json.dumps(["LlamaForCausalLM"])))
    conn.execute("INSERT INTO issue_links (key, repo, number, kind, config, signature) VALUES"
                 " ('crash:capture_scalar_outputs:abc', 'o/r', 7, 'tracking', 'capture_scalar_outputs', ?)", (hd.PENDING,))
    conn.execute("INSERT INTO outbox (batch, seq, key, action, payload, created_at) VALUES"
                 " ('b1', 0, 'crash:capture_scalar_outputs:abc', 'edit', '{}', '2026-10-02T05:00:00+00:00')")


def _fill_v3(conn: sqlite3.Connection) -> None:
    """v3 added only indexes: v2's rows, read through them."""
    _fill_v2(conn)


def _fill_v4(conn: sqlite3.Connection) -> None:
    """v3 rows plus jobs as the service stored them at v4 (no retry columns yet): one done, one queued."""
    _fill_v3(conn)
    conn.execute("INSERT INTO jobs (id, kind, payload, status, created_at, finished_at, result) VALUES"
                 " (1, 'quick', '{\"issue\": 7}', 'done', '2026-10-02T05:00:00+00:00', '2026-10-02T05:00:02+00:00',"
                 " '{\"commands\": []}')")
    conn.execute("INSERT INTO jobs (id, kind, payload, status, created_at) VALUES"
                 " (2, 'command', '{\"issue\": 7}', 'queued', '2026-10-02T05:01:00+00:00')")


def _fill_v5(conn: sqlite3.Connection) -> None:
    """v5 added job retry columns only: v4's rows."""
    _fill_v4(conn)


def _fill_v6(conn: sqlite3.Connection) -> None:
    """v6 added per-model build data: v5's rows and none of it."""
    _fill_v5(conn)


def _fill_v7(conn: sqlite3.Connection) -> None:
    """v7 added graph-break ids: v6's rows and one recorded graph-break reason."""
    _fill_v6(conn)
    conn.execute("INSERT INTO graph_breaks (run_id, model, config, position, reason, gb_id) VALUES"
                 " (2, 'LlamaForCausalLM', 'baseline', 0, 'Tensor.item', 'GB0124')")


def _fill_v8(conn: sqlite3.Connection) -> None:
    """v8 added regression ranges: v7's rows and one range of run 2's crash."""
    _fill_v7(conn)
    conn.execute("INSERT INTO ranges (run_id, config, signature, kind, status, good_date, bad_date, models, recorded_at)"
                 " VALUES (2, 'capture_scalar_outputs', ?, 'new_crash', 'found', '2026-10-01', '2026-10-02', ?,"
                 " '2026-10-02T06:00:00+00:00')", (hd.PENDING, json.dumps(["LlamaForCausalLM"])))


def _fill_v9(conn: sqlite3.Connection) -> None:
    """v9 added reproducer verdicts: v8's rows and one stored verdict (no run shows it yet)."""
    _fill_v8(conn)
    conn.execute("INSERT INTO verdicts (key, config, signature, model, status, shrunk, shrink, recorded_at) VALUES"
                 " ('k9', 'capture_scalar_outputs', ?, 'LlamaForCausalLM', 'confirmed', 1, ?,"
                 " '2026-10-02T07:00:00+00:00')", (hd.PENDING, OLD_SHRINK))


# A shrink as v9's flagsweep stored it: json.dumps(asdict(Shrink)), its build the worker's plain dict.
OLD_SHRINK = json.dumps({"build": {"model": "LlamaForCausalLM", "config_class": "LlamaConfig",
                                   "config": {"num_hidden_layers": 1}, "spec": {"input_ids": {"kind": "ids"}},
                                   "seed": 0, "fingerprint": "fp", "transformers_version": "4.57.0"},
                         "stats": {"tries": 3, "kept": 1}}, sort_keys=True)


def _fill_v10(conn: sqlite3.Connection) -> None:
    """v10 moved the zoo's results into the store: v9's rows and one `zoo check` result."""
    _fill_v9(conn)
    conn.execute("INSERT INTO zoo_checks (model, fingerprint, status, timeout_s, data, checked_at) VALUES"
                 " ('BertModel', 'fb', 'ok', 120.0, '{\"model\": \"BertModel\", \"status\": \"ok\"}',"
                 " '2026-10-02T08:00:00+00:00')")


def _fill_v11(conn: sqlite3.Connection) -> None:
    """v11 added the environment gate and the issues' resolutions: v10's rows, one gate verdict, one resolution."""
    _fill_v10(conn)
    conn.execute("INSERT INTO run_gates (run_id, verdict, reasons, checked_at) VALUES"
                 " (2, 'ok', '[]', '2026-10-03T08:00:00+00:00')")
    conn.execute("INSERT INTO issue_resolutions (repo, number, key, resolution, state_reason, reopened, seen_at)"
                 " VALUES ('o/old', 3, 't-old', 'completed', 'completed', 0, '2026-10-03T08:00:00+00:00')")


MAINTAINER = verdicts.Maintainer("import torch\n", "eager", "confirmed", "", (verdicts.DynamicRun("None", "fails", "E", 1.0),))


def _fill_v12(conn: sqlite3.Connection) -> None:
    """v12 gave verdicts their maintainer's script: v11's rows, verdict k9 with one (v13 tells pruned effects apart:
    run 2's effects, stored before, have no reason)."""
    _fill_v11(conn)
    conn.execute("UPDATE verdicts SET maintainer = ? WHERE key = 'k9'", (MAINTAINER.to_json(),))


def _fill_v13(conn: sqlite3.Connection) -> None:
    """v13 stored every flag's evidence: v12's rows and one flag key an audit turned pruning off for."""
    _fill_v12(conn)
    conn.execute("INSERT INTO prune_disabled (key, config, model, run_id, traced_status, traced_graphs,"
                 " baseline_graphs, disabled_at) VALUES ('torch._dynamo.config.allow_rnn', 'dynamo.allow_rnn',"
                 " 'LlamaForCausalLM', 2, 'error', NULL, 3, '2026-10-04T07:00:00+00:00')")


def _fill_v14(conn: sqlite3.Connection) -> None:
    """v14 stored the verify step's cost: v13's rows, one step's cost, and one webhook delivery seen."""
    _fill_v13(conn)
    conn.execute("INSERT INTO verify_steps (run_id, seconds, scripts, workers, groups, pending, recorded_at)"
                 " VALUES (2, 12.5, 3, 2, 1, 0, '2026-10-04T08:00:00+00:00')")
    conn.execute("INSERT INTO deliveries (id, event, received_at, outcome) VALUES"
                 " ('old-delivery', 'issue_comment', '2026-10-04T08:00:00+00:00', 'queued')")


def _fill_v15(conn: sqlite3.Connection) -> None:
    """v15 kept what each user's commands cost: v14's rows and one command spent."""
    _fill_v14(conn)
    conn.execute("INSERT INTO command_spend (login, repo, issue, kind, at) VALUES ('alice', 'o/r', 7, 'run', 1.0)")


def _fill_v16(conn: sqlite3.Connection) -> None:
    """v16 read outcomes strictly (no new table): v15's rows as a v16 engine keeps them (no key an Outcome lacks)."""
    _fill_v15(conn)
    conn.execute("UPDATE outcomes SET data = json_remove(data, '$.a_key_from_an_older_version')")


def _fill_v17(conn: sqlite3.Connection) -> None:
    """v17 judged wrong results and recompiles (two effect columns, no new table): v16's rows and the old run's one
    baseline read set, every window merged."""
    _fill_v16(conn)
    conn.execute("INSERT INTO config_reads (run_id, model, reads) VALUES (2, 'LlamaForCausalLM', ?)",
                 (json.dumps({"torch._dynamo.config.capture_scalar_outputs": False}),))


def _fill_v18(conn: sqlite3.Connection) -> None:
    """v18 kept commit ranges and removed cc logins (none here): v17's rows."""
    _fill_v17(conn)


def _fill_v19(conn: sqlite3.Connection) -> None:
    """v19 kept the later calls' read sets (no run rows changed): v18's rows, run 1's options as an engine before the
    answered later calls stored them (accuracy without its answer fields, no gpu_workers or compile_cache)."""
    _fill_v18(conn)
    old = {"workers": 2, "timeout": 60.0, "backend": "eager", "device": "cpu", "python": "/p/bin/python",
           "max_items_per_worker": 50, "max_rss_mb": 6000.0, "extra_modules": [],
           "accuracy": {"enabled": True, "rtol": 0.01, "atol": 0.002}}
    conn.execute("UPDATE runs SET options = ? WHERE id = 1", (json.dumps(old),))


def _ranged(config: str | None) -> tuple[str, str, tuple]:
    """(column, placeholder, value) that give a commit range its config where the store keeps one (v23 on)."""
    return ("", "", ()) if config is None else ("config, ", "?, ", (config,))


def _fill_v20(conn: sqlite3.Connection, config: str | None = None) -> None:
    """v20 stored a run's options as one record: v19's rows, run 1's options as a v20 engine wrote them (every field
    but accuracy's answer_quarantine, which came in v22), and one commit range whose co-authors are strings, a login
    or a name by their shape (before v21; `config`: where a later store keeps it, the config v23 gave it)."""
    _fill_v19(conn)
    for statement in filter(str.strip, V20.split(";")):   # every other run as v20 left it
        conn.execute(statement)
    stored = RunOptions(SweepOptions(workers=2, timeout=60.0, backend="eager", python="/p/bin/python",
                                     accuracy=Accuracy(rtol=0.01, atol=0.002, answer_audit=0.1))).to_dict()
    del stored["accuracy"]["answer_quarantine"]
    conn.execute("UPDATE runs SET options = ? WHERE id = 1", (json.dumps(stored),))
    commits = [{"sha": "a" * 40, "title": "Fix (#5)", "author": "bob", "files": [], "pr": 5,
                "coauthors": ["carol", "Dana Smith"], "approvers": ["r"], "parent": None},
               {"sha": "b" * 40, "title": "Other", "author": None, "files": [], "pr": None, "coauthors": [],
                "approvers": [], "parent": "a" * 40}]
    column, mark, value = _ranged(config)
    conn.execute(f"INSERT INTO commit_ranges ({column}signature, good_git, bad_git, status, commits, suspects,"
                 f" recorded_at) VALUES ({mark}'S', ?, ?, 'suspects', ?, '[]', '2026-11-27T00:00:00+00:00')",
                 (*value, "1" * 40, "2" * 40, json.dumps(commits)))


def _fill_v21(conn: sqlite3.Connection, config: str | None = None) -> None:
    """v21's rows: v20's, their commit ranges' co-authors made people as v21 did."""
    _fill_v20(conn, config)
    conn.execute(MIGRATIONS[20].strip().rstrip(";"))


def _fill_v22(conn: sqlite3.Connection, config: str | None = None) -> None:
    """v22's rows: v21's with the answered items' tables, and one more commit range kept per (signature, range), marked
    wrong (before v23 kept it per config too)."""
    _fill_v21(conn, config)
    for statement in filter(str.strip, MIGRATIONS[21].split(";")):   # its tables are made: complete the options
        if statement.strip().startswith("UPDATE"):
            conn.execute(statement)
    column, mark, value = _ranged(config)
    conn.execute(f"INSERT INTO commit_ranges ({column}signature, good_git, bad_git, status, commits, suspects, bisection,"
                 f" reason, wrong_by, wrong_at, recorded_at) VALUES ({mark}'T', ?, ?, 'found', '[]', '[]', NULL, NULL,"
                 " 'maya', NULL, '2026-10-02T04:00:00+00:00')", (*value, "1" * 40, "2" * 40))


def _fill_v23(conn: sqlite3.Connection) -> None:
    """v23's rows: v22's, their commit ranges kept under config '' as v23 moved them (before v24 gave issue links,
    verdicts and the signature history a mode: every row is eval's)."""
    _fill_v22(conn, config="")


def _fill_v24(conn: sqlite3.Connection) -> None:
    """v24's rows: v23's, and one more commit range under config 'capture_scalar_outputs' (before v25 kept commit ranges
    per mode: each is eval's)."""
    _fill_v23(conn)
    conn.execute("INSERT INTO commit_ranges (config, signature, good_git, bad_git, status, commits, suspects,"
                 " recorded_at) VALUES ('capture_scalar_outputs', 'T', ?, ?, 'suspects', '[]', '[]',"
                 " '2026-11-28T00:00:00+00:00')", ("1" * 40, "2" * 40))


def _fill_v25(conn: sqlite3.Connection) -> None:
    """v25's rows: v24's, and an entry an interrupted `zoo lock` kept (before v26 kept `--reverify`'s and
    `--modes-probe`'s apart)."""
    _fill_v24(conn)
    conn.execute("INSERT INTO zoo_lock_entries (transformers, model, entry, recorded_at) VALUES ('4.57.1', 'GPT2Model',"
                 " '{\"model\": \"GPT2Model\"}', '2026-11-28T00:00:00+00:00')")


FILLERS = {1: _fill_v1, 2: _fill_v2, 3: _fill_v3, 4: _fill_v4, 5: _fill_v5, 6: _fill_v6, 7: _fill_v7, 8: _fill_v8,
           9: _fill_v9, 10: _fill_v10, 11: _fill_v11, 12: _fill_v12, 13: _fill_v13, 14: _fill_v14, 15: _fill_v15,
           16: _fill_v16, 17: _fill_v17, 18: _fill_v18, 19: _fill_v19, 20: _fill_v20, 21: _fill_v21,
           22: _fill_v22, 23: _fill_v23, 24: _fill_v24, 25: _fill_v25}


def _build_at(path, version: int) -> None:
    conn = connect(path, migrate=False)
    migrate_to(conn, version)
    conn.execute("BEGIN")
    FILLERS.get(version, lambda c: None)(conn)
    conn.execute("COMMIT")
    conn.close()


def test_every_earlier_version_has_a_builder():
    # A new migration must come with a builder of realistic rows at the version before it.
    assert set(FILLERS) | {0} == set(range(SCHEMA_VERSION))


def test_v0_empty_file_is_created_at_current_version(tmp_path):
    path = tmp_path / "state.sqlite"
    path.write_bytes(b"")  # e.g. `touch state.sqlite`
    conn = connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"runs", "outcomes", "effects", "signatures", "outbox", "jobs", "deliveries"} <= names


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_migrate_from_earlier_version_keeps_rows(tmp_path, version):
    path = tmp_path / f"v{version}.sqlite"
    _build_at(path, version)
    conn = connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    # Old rows read through today's API.
    run = runs.get_run(conn, 2)
    assert run is not None and run.status == "finished" and run.models == ["LlamaForCausalLM"]
    assert run.nightly == ("2026-10-02" if version >= 2 else None)
    outs = runs.outcomes(conn, 2)
    assert [o.status for o in outs] == ["ok", "error"] and outs[1].signature == hd.PENDING
    # v16: a key no Outcome has is dropped from the stored form (outcomes read strictly); the rest is as stored.
    stored = json.loads(conn.execute("SELECT data FROM outcomes WHERE run_id = 2 AND status = 'error'").fetchone()[0])
    assert stored == {k: v for k, v in OUTCOME_V1.items() if k != "a_key_from_an_older_version"}
    if version >= 2:
        # v17: an effect stored before calls were judged has neither axis (not judged, never "same").
        old = [e for e in history.effects(conn, 2) if e.config == "capture_scalar_outputs"]
        assert [(e.effect, e.correctness, e.recompile) for e in old] == [("crashes", None, None)]
    # The migrated store takes new work: a run, its finalization, and history over old and new rows.
    rid = hd.store_run(conn, hd.night(), kind="nightly" if version >= 2 else "sweep", nightly="2026-10-03")
    assert history.previous_comparable_run(conn, rid) == 2
    sig = {(s.config, s.signature): s for s in history.signature_history(conn)}[
        ("capture_scalar_outputs", hd.PENDING)]
    assert sig.first_seen == "2026-10-01T03:00:00+00:00"  # run 1 was a plain sweep: its start time
    assert sig.last_seen == "2026-10-03" and sig.nightlies_seen == 3
    assert sig.models == ("Qwen2VLForConditionalGeneration",)
    if version >= 2:
        assert conn.execute("SELECT number FROM issue_links").fetchone()[0] == 7
        assert conn.execute("SELECT count(*) FROM outbox WHERE status = 'pending'").fetchone()[0] == 1
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "outcomes_config_signature" in indexes
    # v4: no run of an older store is held by anyone; a lease can be taken on it.
    assert conn.execute("SELECT count(*) FROM run_leases").fetchone()[0] == 0
    leases.acquire(conn, 2).release(conn)
    if version >= 4:
        # Stored jobs read back with no outage behind them, and the queued one is still claimed.
        assert jobs.get(conn, 1).attempts == 0 and jobs.get(conn, 1).result == {"commands": []}
        claimed = jobs.claim_next(conn)
        assert claimed.id == 2 and claimed.retry_at is None and claimed.payload == {"issue": 7}
    # v6: per-model build data of a run, what reproducers are rendered from.
    assert runs.model_data(conn, 2) == {}
    built = ModelBuild("LlamaForCausalLM", "LlamaConfig", {"vocab_size": 99}, {}, 0)
    runs.record_model(conn, rid, built)
    assert runs.model_data(conn, rid) == {"LlamaForCausalLM": built}
    # Graph-break ids: old outcomes have none; a new outcome stores each reason with its id.
    assert conn.execute("SELECT count(*) FROM outcomes WHERE gb_id IS NOT NULL").fetchone()[0] == 0
    runs.record_outcome(conn, rid, Outcome(model="M", config="baseline", status="ok", break_reasons=["r1", "r2"],
                                           break_ids=["GB0124", None]))
    assert [b for b in runs.graph_breaks(conn, rid) if b[0] == "M"] == [
        ("M", "baseline", "r1", "GB0124"), ("M", "baseline", "r2", None)]
    # v8: regression ranges: none for old runs, and a new run's range is stored and read back.
    old_ranges = ranges.latest(conn, rid)
    assert [(k, r.run_id, r.status) for k, r in old_ranges.items()] == (
        [] if version < 8 else [(("capture_scalar_outputs", hd.PENDING, "new_crash"), 2, "found")])
    ranges.record(conn, ranges.Range(rid, "capture_scalar_outputs", hd.PENDING, "new_crash", "no_series",
                                     reason="current torch"))
    assert [r.status for r in ranges.for_run(conn, [rid])] == ["no_series"]
    assert [(r.status, r.good.date) for r in ranges.for_run(conn, [2])] == ([("found", "2026-10-01")] if version >= 8 else [])
    # v9: reproducer verdicts: none for old runs (a JSON file beside the store held them, it is not read);
    # a new run's verdict and its run row are stored and read back.
    assert verdicts.for_run(conn, 2) == {} and verdicts.components(conn) == {}
    assert [k for k in ('k9',) if verdicts.get(conn, k)] == (['k9'] if version >= 9 else [])
    # ... and a shrink stored then reads back as a ModelBuild, written again byte for byte.
    old = [verdicts.get(conn, k).shrink for k in ('k9',) if verdicts.get(conn, k)]
    assert [(s.build.config_class, s.build.config, s.stats["tries"], s.to_json()) for s in old] == (
        [("LlamaConfig", {"num_hidden_layers": 1}, 3, OLD_SHRINK)] if version >= 9 else [])
    v = verdicts.Verdict("capture_scalar_outputs", hd.PENDING, "LlamaForCausalLM", "fp", "2.12.0", None, "confirmed",
                         script="print(1)\n", component=verdicts.Component("dynamo", "count", True))
    verdicts.put(conn, v)
    verdicts.record_run(conn, rid, [verdicts.RunVerdict(v.config, v.signature, v, v.component)])
    assert verdicts.get(conn, v.key) == v
    assert verdicts.for_run(conn, rid)[(v.config, v.signature)].verdict == v
    # v10: the zoo's results live in the store: none in an older one, and it keeps them now.
    assert sorted(zoo.check_results(conn)) == ([] if version < 10 else ["BertModel"])
    assert zoo.lock_entries(conn, "5.0.0") == {}
    # v12: a verdict's maintainer's script: none in an older one (it is tried once by the next verify step).
    assert [verdicts.get(conn, k).maintainer for k in ('k9',) if verdicts.get(conn, k)] == (
        [MAINTAINER] if version >= 12 else [None] if version >= 9 else [])
    m = verdicts.Maintainer("import torch\n", "eager", "confirmed", "", (verdicts.DynamicRun("None", "fails", "E", 1.0),
                                                                         verdicts.DynamicRun("False", "passes", None, 1.0)))
    verdicts.put(conn, dataclasses.replace(v, maintainer=m))
    assert verdicts.get(conn, v.key).maintainer == m and m.static_passes
    zoo.record_checks(conn, [{"model": "GPT2Model", "fingerprint": "f", "status": "ok", "timeout_s": 120.0}])
    zoo.keep_lock_entry(conn, "5.0.0", {"model": "GPT2Model", "status": "ok"})
    assert zoo.check_results(conn)["GPT2Model"]["status"] == "ok"
    assert zoo.lock_entries(conn, "5.0.0") == {"GPT2Model": {"model": "GPT2Model", "status": "ok"}}
    # v11: the environment gate and the issues' resolutions: none for old runs; stored and read back now.
    assert (gates.get(conn, 2) is not None) == (version >= 11)
    assert resolutions.tally(conn, "o/old").counts["completed"] == (1 if version >= 11 else 0)
    gates.record(conn, gates.EnvironmentVerdict(rid, gates.SUSPECT, [{"kind": "canary", "model": "GPT2Model", "status": "error"}]))
    assert gates.is_suspect(conn, rid) and not gates.is_suspect(conn, 2)
    resolutions.record(conn, "o/r", [resolutions.Resolution(7, "t1", "not_planned", "not_planned")])
    assert resolutions.tally(conn, "o/r").to_dict()["precision"] == 0.0
    # v13: pruned effects are told apart; an older run's effects have no reason, and no build has a config space.
    assert [r[0] for r in conn.execute("SELECT DISTINCT reason FROM effects")] in ([], [None])
    assert conn.execute("SELECT COUNT(*) FROM config_spaces").fetchone()[0] == 0
    assert flags.disabled_keys(conn) == ({"torch._dynamo.config.allow_rnn"} if version >= 13 else set())
    # v14: a verdict's carry and cost: none for an older verdict; no verify step recorded for an older run.
    old = verdicts.get(conn, "k9")
    assert old is None or (old.carried_from, old.reminimised) == (None, None)
    assert conn.execute("SELECT COUNT(*) FROM verify_steps").fetchone()[0] == (1 if version >= 14 else 0)
    # v15: the command budget and the dry-run counter start empty; an older delivery has no comment key, and a new
    # one is a duplicate by its comment key under another delivery id.
    assert budgets.spend(conn, "u", ("o/r", 7), "run", at=1.0, per_hour=1)
    assert not budgets.spend(conn, "U", ("o/r", 8), "refused", at=2.0, per_hour=1)
    assert budgets.told(conn, "u", "run", since=0.0, where=("o/r", 7))
    assert counters.take(conn, "c") == 1 and counters.take(conn, "c", above=9) == 10
    assert deliveries.record(conn, "new-1", "issue_comment", "queued", "5:abc")
    assert not deliveries.record(conn, "new-2", "issue_comment", "queued", "5:abc")
    assert (deliveries.get(conn, "old-delivery") is not None) == (version >= 14)
    # v19: read sets per call window and the answered items' audit: none for an older run (its merged read set is
    # kept as it was); a new run's are stored and read back.
    assert flags.windows(conn, 2, "LlamaForCausalLM") == {} and flags.answer_audit(conn, 2) == []
    assert flags.reads(conn, 2) == ({"LlamaForCausalLM": {"torch._dynamo.config.capture_scalar_outputs": False}}
                                    if version >= 17 else {})
    windows = {"first": {"torch._dynamo.config.verbose": True}, "second_size": {"torch._dynamo.config.error_on_recompile": None}}
    flags.record_windows(conn, rid, "M", windows)
    assert flags.windows(conn, rid, "M") == windows
    flags.record_answer_audit(conn, rid, [flags.AnswerFinding("M", "c", "hook_added: accuracy 'wrong' answered, 'exact' traced")])
    assert [f.disagreement is not None for f in flags.answer_audit(conn, rid)] == [True]
    # v20: a run's options are one record; a run stored before an option existed was given it once (nothing judged or
    # answered before [accuracy], nothing answered before the answered later calls), the rest read as stored.
    assert runs.get_run(conn, 2).options == RunOptions(SweepOptions(accuracy=Accuracy(enabled=False, answer=False)))
    stored = json.loads(conn.execute("SELECT options FROM runs WHERE id = 2").fetchone()[0])
    assert stored == RunOptions.from_dict(stored).to_dict()
    one = runs.get_run(conn, 1).options.sweep
    assert (one.backend, one.workers, one.gpu_workers, one.accuracy) == (
        ("eager", 2, 2, Accuracy(rtol=0.01, atol=0.002, answer_audit=0.1)) if version >= 20 else
        ("eager", 2, 2, Accuracy(rtol=0.01, atol=0.002, answer=False)) if version == 19 else
        ("count", 0, 2, Accuracy(enabled=False, answer=False)))
    # v22: answered items with their rule, and the quarantined flags (every older run ran with 7 nights).
    assert one.accuracy.answer_quarantine == 7 and flags.answered(conn, 1) == {}
    # v24: issue links, verdicts and signatures carry a mode: every older row is eval's (its key unchanged), and a
    # train run's crash is its own history row beside eval's.
    assert {l.mode for l in links.all_links(conn).values()} <= {""}
    assert [v.mode for v in [verdicts.get(conn, "k9")] if v] == ([""] if version >= 9 else [])
    train = Mode("train", phase="train")
    tid = hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-10-04",
                       options=RunOptions(SweepOptions(mode=train)))
    assert runs.get_run(conn, tid).options.sweep.mode == train
    assert [(s.nightlies_seen, s.last_seen) for s in history.signature_history(conn, mode=train.key)
            if s.signature == hd.PENDING] == [(1, "2026-10-04")]
    assert [s.last_seen for s in history.signature_history(conn) if s.signature == hd.PENDING] == ["2026-10-03"]
    flags.record_answered(conn, rid, "M", "c", "a rule")
    flags.quarantine(conn, rid, None, 3, [flags.AnswerFinding("M", "c", "second_size: differs")])
    assert flags.answered(conn, rid) == {("M", "c"): "a rule"} and [q.config for q in flags.quarantined(conn, None)] == ["c"]


def test_each_migration_is_one_transaction(tmp_path):
    # A migration that fails half-way leaves the store at the version before it, not half-migrated.
    path = tmp_path / "s.sqlite"
    _build_at(path, 1)
    conn = connect(path, migrate=False)
    MIGRATIONS.append("CREATE TABLE half (x INTEGER); THIS IS NOT SQL")
    try:
        migrate_to(conn, len(MIGRATIONS))
    except sqlite3.OperationalError:
        pass
    else:
        raise AssertionError("a broken migration must raise")
    finally:
        MIGRATIONS.pop()
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'half'").fetchone()[0] == 0


def test_v18_commit_ranges_and_removed_cc_start_empty_and_take_a_range(tmp_path):
    """A store from before culprits names none; a commit range stored after the migration reads back as written."""
    from harness.core.commits import Commit, FileChange
    from state import culprits
    path = tmp_path / "v17.sqlite"
    _build_at(path, 17)
    conn = connect(path)
    assert culprits.wrong_count(conn) == (0, 0) and culprits.removed(conn) == {}
    commit = Commit("a" * 40, "Fix (#5)", "bob", (FileChange("torch/x.py", "modified"),), pr=5, approvers=("r",))
    stored = culprits.CommitRange("S", "1" * 40, "2" * 40, "found", commits=[commit],
                                  suspects=[culprits.SuspectRow(commit.sha, 100, ["why"])],
                                  bisection=culprits.Bisection(commit.sha, "1" * 40,
                                                               [culprits.ProbeRow(commit.sha, ["S"] * 3, "new")]))
    culprits.record(conn, stored)
    back = culprits.get(conn, "S", "1" * 40, "2" * 40)
    assert back.commits == [commit] and back.culprit == commit and back.bisection == stored.bisection
    culprits.remove_cc(conn, "k", ["@Bob"])
    assert culprits.removed(conn) == {"k": frozenset({"bob"})}


def test_v21_a_stored_co_author_becomes_a_name_without_a_login(tmp_path):
    """A co-author stored as one string (a login or a name, guessed by shape) is kept as a name: never mentioned."""
    from harness.core.commits import Person
    from state import culprits
    path = tmp_path / "v20.sqlite"
    _build_at(path, 20)
    conn = connect(path)
    first, second = culprits.get(conn, "S", "1" * 40, "2" * 40).commits
    assert first.coauthors == (Person("carol"), Person("Dana Smith")) and first.approvers == ("r",)
    assert (first.author, second.coauthors, second.parent) == ("bob", (), "a" * 40)


def test_v23_keeps_each_commit_range_under_config_blank(tmp_path):
    """A range stored per (signature, range) is kept, marked wrong as it was, under config '' (searched again by a
    config's next ask); a range under another config is its own row."""
    from state import culprits
    path = tmp_path / "v22.sqlite"
    _build_at(path, 22)
    conn = connect(path)
    kept = culprits.get(conn, "T", "1" * 40, "2" * 40)
    assert (kept.config, kept.status, kept.wrong_by) == ("", "found", "maya")
    assert culprits.get(conn, "T", "1" * 40, "2" * 40, "capture_scalar_outputs") is None
    culprits.record(conn, culprits.CommitRange("T", "1" * 40, "2" * 40, "suspects", config="capture_scalar_outputs"))
    assert culprits.get(conn, "T", "1" * 40, "2" * 40).status == "found"


def test_v25_keeps_each_commit_range_as_evals_and_takes_another_modes_beside_it(tmp_path):
    """A range stored per (config, signature, range) is kept as eval's (mode ''), marked wrong as it was; train's range
    over the same builds is its own row, and a wrong-culprit on train's marks only train's."""
    from state import culprits
    path = tmp_path / "v24.sqlite"
    _build_at(path, 24)
    conn = connect(path)
    kept = culprits.get(conn, "T", "1" * 40, "2" * 40)
    assert (kept.config, kept.mode, kept.status, kept.wrong_by) == ("", "", "found", "maya")
    other = culprits.get(conn, "T", "1" * 40, "2" * 40, "capture_scalar_outputs")
    assert (other.mode, other.status) == ("", "suspects")
    assert culprits.get(conn, "T", "1" * 40, "2" * 40, "capture_scalar_outputs", "phase=train") is None
    culprits.record(conn, culprits.CommitRange("T", "1" * 40, "2" * 40, "found", config="capture_scalar_outputs",
                                               mode="phase=train"))
    assert culprits.get(conn, "T", "1" * 40, "2" * 40, "capture_scalar_outputs").status == "suspects"
    assert culprits.mark_wrong(conn, "capture_scalar_outputs", "T", "ann", "phase=train").wrong_by == "ann"
    assert culprits.get(conn, "T", "1" * 40, "2" * 40, "capture_scalar_outputs").wrong_by is None


def test_v26_keeps_a_zoo_locks_entry_as_its_own_and_no_probe_entry(tmp_path):
    """The entry an interrupted `zoo lock` kept is still `zoo lock`'s to resume; no `--modes-probe` takes it."""
    from state import zoo

    path = tmp_path / "v25.sqlite"
    _build_at(path, 25)
    conn = connect(path)
    assert zoo.lock_entries(conn, "4.57.1") == {"GPT2Model": {"model": "GPT2Model"}}
    assert zoo.probe_entries(conn, "harness.discovery.lockjob:modes_entry", "4.57.1") == {}


def test_v16_drops_only_the_keys_no_outcome_has_and_keeps_every_json_type(tmp_path):
    """Booleans stay booleans, lists stay lists, nulls stay null: only the unknown key goes."""
    path = tmp_path / "v15.sqlite"
    _build_at(path, 15)
    kept = {"model": "M", "config": "baseline", "status": "ok", "text_only": True, "graphs": 2, "compile_s": 0.5,
            "break_reasons": ["r1"], "break_ids": [None], "ops_per_graph": [3, 4], "signature": None}
    raw = sqlite3.connect(path)
    raw.execute("INSERT INTO outcomes (run_id, model, config, status, graphs, signature, fingerprint, data, recorded_at)"
                " VALUES (2, 'M', 'baseline', 'ok', 2, NULL, 'fp', ?, '2026-10-02T04:00:00+00:00')",
                (json.dumps({**kept, "config_reads": {"k": 1}}),))
    raw.commit()
    raw.close()
    conn = connect(path)
    stored = conn.execute("SELECT data FROM outcomes WHERE model = 'M'").fetchone()[0]
    assert json.loads(stored) == kept and '"text_only":true' in stored.replace(" ", "")
    assert [o for o in runs.outcomes(conn, 2) if o.model == "M"] == [Outcome(**kept)]
