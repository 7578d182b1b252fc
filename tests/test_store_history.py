"""state.history: effects stored at finalize, signature history, comparable runs, shards as one run."""
from __future__ import annotations

import pytest

from state import history, runs
from state.db import connect
from tests import historydata as hd
from harness.core.run_environment import RunEnvironment

CSO = "capture_scalar_outputs"


@pytest.fixture
def conn(tmp_path):
    return connect(tmp_path / "state.sqlite")


def _sig(conn, config=CSO, sig=hd.PENDING):
    return {(s.config, s.signature): s for s in history.signature_history(conn)}.get((config, sig))


def test_finalize_stores_effects(conn):
    rid = hd.store_run(conn, hd.night(graphs_a=2, b_crashes=True, c_crashes=False))
    effs = {e.model: e for e in history.effects(conn, rid)}
    assert {m: e.effect for m, e in effs.items()} == {
        "BertModel": "crashes", "LlamaForCausalLM": "reduces_graphs", "Qwen2VLForConditionalGeneration": "reduces_graphs"}
    assert (effs["LlamaForCausalLM"].baseline_graphs, effs["LlamaForCausalLM"].config_graphs) == (4, 2)
    assert effs["BertModel"].config_signature == hd.PENDING and effs["BertModel"].stratum == "encoder_decoder"
    # Finalizing twice changes nothing.
    history.finalize_run(conn, rid)
    assert len(history.effects(conn, rid)) == 3
    assert history.effect_counts(conn, [rid]) == {rid: {CSO: {"crashes": 1, "reduces_graphs": 2}}}


def test_signature_history_over_nightlies(conn):
    r1 = hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-01")
    s = _sig(conn)
    assert (s.first_seen, s.last_seen, s.nightlies_seen, s.models) == (
        "2026-11-01", "2026-11-01", 1, ("Qwen2VLForConditionalGeneration",))
    assert s.error_type == "PendingUnbackedSymbolNotFound" and s.torch_frame.startswith("torch/_dynamo")
    assert hd.PENDING in s.example_message
    history.finalize_run(conn, r1)  # idempotent
    assert _sig(conn).nightlies_seen == 1
    hd.store_run(conn, hd.night(b_crashes=True), kind="nightly", nightly="2026-11-02")
    r3 = hd.store_run(conn, hd.night(b_crashes=True, c_crashes=False), kind="nightly", nightly="2026-11-03")
    s = _sig(conn)
    assert (s.first_seen, s.last_seen, s.nightlies_seen, s.last_run) == ("2026-11-01", "2026-11-03", 3, r3)
    assert s.models == ("BertModel",)  # the latest run's models only
    assert history.signature_history(conn, config="baseline") == []


def test_older_run_finalized_late_does_not_move_last_seen(conn):
    hd.store_run(conn, hd.night(b_crashes=True), kind="nightly", nightly="2026-11-05")
    hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-01")  # a backfill
    s = _sig(conn)
    assert (s.first_seen, s.last_seen, s.nightlies_seen) == ("2026-11-01", "2026-11-05", 2)
    assert s.models == ("BertModel", "Qwen2VLForConditionalGeneration")


def test_shards_of_one_nightly_are_one_run(conn):
    out = hd.night(b_crashes=True)
    s1 = hd.store_run(conn, out[:2], kind="nightly", nightly="2026-11-01", shard="1/2")   # Llama
    s2 = hd.store_run(conn, out[2:], kind="nightly", nightly="2026-11-01", shard="2/2")   # Bert, Qwen
    assert history.run_group(conn, s1) == [s1, s2]
    assert len(history.effects(conn, s1)) == 3
    assert [o.model for o in history.group_outcomes(conn, s2)][::2] == [
        "BertModel", "LlamaForCausalLM", "Qwen2VLForConditionalGeneration"]
    assert _sig(conn).nightlies_seen == 1
    n1 = hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-02")
    assert history.previous_comparable_run(conn, n1) == s2
    assert _sig(conn).nightlies_seen == 2
    assert [r.id for r in history.latest_runs(conn, 5)] == [n1, s2]
    # Shards of the same nightly are never each other's previous run.
    assert history.previous_comparable_run(conn, s2) is None


def test_a_config_unavailable_in_one_torch_keeps_the_runs_comparable(conn):
    both = {**hd.CONFIGS, "gone_flag": {"torch._inductor.config.gone_flag": 0.5}}
    first = hd.store_run(conn, hd.night(), configs=both, kind="nightly", nightly="2026-11-01")
    second = runs.create_run(conn, environment=RunEnvironment.from_dict(hd.ENV), models=sorted({o.model for o in hd.night()}),
                             configs=hd.CONFIGS, kind="nightly", nightly="2026-11-02",
                             unavailable={"gone_flag": {"settings": both["gone_flag"], "missing": ["gone_flag"]}})
    for o in hd.night():
        runs.record_outcome(conn, second, o)
    runs.finish_run(conn, second)
    assert history.previous_comparable_run(conn, second) == first
    other = hd.store_run(conn, hd.night(), configs=hd.CONFIGS, kind="nightly", nightly="2026-11-03")
    assert history.previous_comparable_run(conn, other) == second   # the same configs swept


def test_previous_comparable_run_rules(conn):
    n1 = hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-01")
    other_configs = dict(hd.CONFIGS, capture_dynamic_output_shape_ops={"torch._dynamo.config.x": True})
    hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-02", configs=other_configs)
    hd.store_run(conn, [hd.ok("T5Model", "baseline", 1), hd.ok("T5Model", CSO, 1)], kind="nightly",
                 nightly="2026-11-03")  # no model in common
    hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-04", finish=False)  # interrupted
    adhoc = hd.store_run(conn, hd.night())  # an ad-hoc sweep: never the previous run of a nightly
    n5 = hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-05")
    assert history.previous_comparable_run(conn, n5) == n1
    assert history.previous_comparable_run(conn, n1) is None
    # An ad-hoc sweep compares with whatever came before it.
    assert history.previous_comparable_run(conn, adhoc) == n1
    assert history.latest_comparable_pair(conn) == (n1, n5)
    assert history.previous_comparable_run(conn, 999) is None


def test_flaky_crashes_are_not_believed_in_signature_history(conn):
    out = hd.night(c_crashes=False)
    flaky = hd.crash("BertModel", CSO)
    flaky.flaky_rate, flaky.attempts = 0.5, 3
    out[3] = flaky
    hd.store_run(conn, out)
    assert _sig(conn) is None
    # Re-recording it as a confirmed crash and finalizing again brings it in.
    flaky.flaky_rate = None
    runs.record_outcome(conn, 1, flaky)
    history.finalize_run(conn, 1)
    assert _sig(conn).models == ("BertModel",)


def test_merged_nightly_stands_for_its_shards(conn):
    from bot.pipeline.merge import merge

    out = hd.night(b_crashes=True)
    s1 = hd.store_run(conn, out[:2], kind="nightly", nightly="2026-11-01", shard="1/2")
    s2 = hd.store_run(conn, out[2:], kind="nightly", nightly="2026-11-01", shard="2/2")
    merged = merge(conn, [s1, s2])                # merge finalizes the run it ends
    assert [r.id for r in history.latest_runs(conn, 5)] == [merged]
    assert history.run_group(conn, merged) == [merged]
    assert len(history.effects(conn, merged)) == 3
    n2 = hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-02")
    assert history.previous_comparable_run(conn, n2) == merged
    s = _sig(conn)
    assert s.nightlies_seen == 2 and s.first_seen == "2026-11-01"   # shards and merged run: one night


def test_finalize_inside_a_callers_transaction_is_all_or_nothing(conn):
    rid = hd.store_run(conn, hd.night(b_crashes=True), finish=False)
    conn.execute("BEGIN IMMEDIATE")
    history.finalize_run(conn, rid)          # nests as a savepoint
    conn.execute("ROLLBACK")
    assert history.effects(conn, rid) == [] and _sig(conn) is None
    history.finalize_run(conn, rid)
    assert len(history.effects(conn, rid)) == 3 and _sig(conn).models == ("BertModel", "Qwen2VLForConditionalGeneration")


def test_shards_swept_again_with_force_replace_their_earlier_runs(tmp_path, capsys):
    """Issue 21 A, major 3: `nightly --shard i/N --force` twice over a swept date. Each shard run's group is the latest
    run of each shard, a replaced run is alone, and diff, publish (the run view), `runs show` and `export` read that."""
    import json

    from bot.cli.main import main
    from bot.view import run_view
    from bot.view.stored_diff import diff_stored

    path = tmp_path / "state.sqlite"
    conn = connect(path)
    night = hd.night()
    llama = [o for o in night if o.model == "LlamaForCausalLM"]
    others = [o for o in night if o.model != "LlamaForCausalLM"]
    before = hd.store_run(conn, night, kind="nightly", nightly="2026-11-01")
    old = [hd.store_run(conn, part, kind="nightly", nightly="2026-11-02", shard=s)
           for part, s in ((llama, "1/2"), (others, "2/2"))]
    new = [hd.store_run(conn, part, kind="nightly", nightly="2026-11-02", shard=s)
           for part, s in ((llama, "1/2"), (others, "2/2"))]
    assert history.run_group(conn, old[0]) == [old[0]] and history.run_group(conn, old[1]) == [old[1]]
    assert history.run_group(conn, new[0]) == history.run_group(conn, new[1]) == new
    keys = [(o.model, o.config) for o in history.group_outcomes(conn, new[1])]
    assert len(keys) == len(set(keys)) == len(night)
    assert history.previous_comparable_run(conn, new[0]) == before      # never the same night's replaced shards
    assert len(diff_stored(conn, before, new[1]).transitions) == len(night)
    view = run_view.load(conn, new[0])
    assert view.group == tuple(new) and len(view.outcomes) == len(night) and view.previous.id == before
    conn.close()

    assert main(["--state", str(path), "runs", "show", str(old[0])]) == 0
    assert f"items     {len(llama)} " in capsys.readouterr().out
    assert main(["--state", str(path), "export", str(old[0]), "--format", "jsonl"]) == 0
    rows = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert len(rows) == len(llama) and {r["model"] for r in rows} == {"LlamaForCausalLM"}
