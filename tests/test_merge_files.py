"""Shards on separate hosts: each exports its run to a file; `flagsweep merge FILE...` imports and publishes once.

Two shards swept into two separate stores, merged in a third, give the same
effects and the same planned issues as one unsharded run in a fourth.
"""
import json
from pathlib import Path

import pytest

from bot.pipeline import merge as merge_mod
from bot.pipeline import nightly
from bot.cli.main import main
from bot.settings import IssueSettings, NightlySettings, Settings, VerifySettings
from harness.core.model_build import ModelBuild
from harness.core.modes import BUILTIN, DEFAULT
from state import db, history, runs
from tests.fakesweep import World

CRASHING = {"BetaForCausalLM", "DeltaModel"}
ACCURACY = {"enabled": True, "rtol": 1e-3, "atol": 1e-3}


def _host(tmp: Path, name: str):
    settings = Settings(state_path=tmp / name / "state.sqlite",
                        # AlphaModel: a model of the twin's corpus (the gate's canary)
                        nightly=NightlySettings(configs=["capture_scalar_outputs"], canaries=["AlphaModel"]),
                        verify=VerifySettings(enabled=False),
                        # one-model crashes filed at once (the evidence rule: test_filing.py)
                        issues=IssueSettings(min_models=1))
    return settings, db.connect(settings.state_path)


def _world() -> World:
    world = World()
    world.crashing = set(CRASHING)
    return world


def _shard_file(tmp: Path, i: int) -> Path:
    settings, conn = _host(tmp, f"shard{i}")
    result = nightly.run_nightly(conn, settings, shard=f"{i}/2", out_dir=tmp, steps=_world().steps())
    assert result.status == "shard_done"
    runs.record_model(conn, result.run_id, ModelBuild(f"ModelOfShard{i}", "XConfig", {}, {}, 0))
    path = merge_mod.write_export(conn, result.run_id, tmp / f"shard-{i}.json")
    conn.close()
    return path


def _effects(conn, run_id):
    return sorted((e.model, e.config, e.effect, e.baseline_graphs, e.config_graphs, e.config_signature)
                  for e in history.effects(conn, run_id))


def _plan(out: Path):
    plan = json.loads((out / "plan.json").read_text())
    return [(a["action"], a["key"], a.get("title"), (out / a["file"]).read_text() if a.get("file") else None)
            for a in plan["actions"]]


def test_two_shards_on_separate_stores_merge_like_one_unsharded_run(tmp_path):
    files = [_shard_file(tmp_path, 1), _shard_file(tmp_path, 2)]
    doc = json.loads(files[0].read_text())
    assert doc["format"] == "flagsweep-run" and doc["version"] == 1
    assert doc["run"]["environment"]["torch_version"] == "2.14.0.dev20261121+cpu" and doc["outcomes"]

    pub_settings, pub = _host(tmp_path, "publisher")
    conf = tmp_path / "flagsweep.toml"
    # The fake world's models exist nowhere to re-run; its crashes were stored as confirmed (3 attempts).
    conf.write_text("[verify]\nenabled = false\n[issues]\nmin_models = 1\n"
                    "[nightly]\nconfigs = [\"capture_scalar_outputs\"]\ncanaries = [\"AlphaModel\"]\n[confirm]\nruns = 0\n")
    code = main(["--settings", str(conf), "--state", str(pub_settings.state_path), "merge", *map(str, files),
                 "--dry-run", "--out", str(tmp_path / "merged-out"), "--json"])
    assert code == 0
    merged = max(r.id for r in runs.list_runs(pub))
    run = runs.get_run(pub, merged)
    assert run.status == "finished" and run.shard is None and len(run.models) == 5
    assert set(runs.model_data(pub, merged)) == {"ModelOfShard1", "ModelOfShard2"}   # builds travel too

    one_settings, one = _host(tmp_path, "unsharded")
    single = nightly.run_nightly(one, one_settings, out_dir=tmp_path / "single-out", steps=_world().steps(real_publish=True))
    assert _effects(pub, merged) == _effects(one, single.run_id)
    assert any(e[2] == "crashes" for e in _effects(one, single.run_id))
    merged_plan, single_plan = _plan(tmp_path / "merged-out"), _plan(tmp_path / "single-out")
    assert [p[:3] for p in merged_plan] == [p[:3] for p in single_plan] and len(single_plan) == 2
    assert [p[3] for p in merged_plan] == [p[3] for p in single_plan]
    pub.close()
    one.close()


def test_importing_a_file_twice_keeps_one_run_and_bad_files_are_named(tmp_path):
    path = _shard_file(tmp_path, 1)
    _, conn = _host(tmp_path, "publisher")
    first = merge_mod.import_file(conn, path)
    assert merge_mod.import_file(conn, path) == first and len(runs.list_runs(conn)) == 1
    stored = runs.get_run(conn, first)
    assert stored.shard == "1/2" and stored.status == "finished" and len(runs.outcomes(conn, first)) == 6
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**json.loads(path.read_text()), "version": 99}))
    for bad, words in ((tmp_path / "none.json", "no such file"), (newer, "format version 99"),
                       (tmp_path / "shard1" / "state.sqlite", "not a flagsweep run export")):
        with pytest.raises(merge_mod.MergeError, match=words) as info:
            merge_mod.import_file(conn, bad)
        assert str(bad) in str(info.value)
    conn.close()


def test_merge_cli_names_a_bad_file_with_exit_2(tmp_path, capsys):
    bad = tmp_path / "shard.json"
    bad.write_text("{}")
    code = main(["--state", str(tmp_path / "s.sqlite"), "merge", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and f"{bad}: not a flagsweep run export" in err and "Traceback" not in err


def test_the_actions_workflow_passes_shard_files_not_a_shared_disk():
    text = (Path(__file__).parent.parent / "ops" / "github-actions-nightly.yml").read_text()
    assert "--export" in text and "upload-artifact" in text and "download-artifact" in text
    assert "flagsweep merge shards/" in text
    assert "share a persistent state" not in text
    # the GPU shards sweep GPU_MODES (a file per mode, merged per mode); the CPU fallback sweeps eval alone
    gpu, cpu = text.split("\n  sweep-cpu:")[0].split("\n  sweep:")[1], text.split("\n  sweep-cpu:")[1]
    assert 'GPU_MODES: "eval,train-bf16,dynamic-true"' in text
    assert "--modes ${{ env.GPU_MODES }}" in gpu and "shard-${{ matrix.shard }}.*flagsweep.json" in gpu
    assert "--modes" not in cpu.split("\n  merge-and-publish:")[0]


def test_merge_torch_installs_the_shards_build_here_and_refuses_another(tmp_path, capsys):
    """`merge --torch V`: reproducers are verified on this host's venv of the shards' torch, same git or refused."""
    from tests.fakeindex import FakeIndex

    files = [str(_shard_file(tmp_path, 1)), str(_shard_file(tmp_path, 2))]   # torch 2.14.0.dev20261121+cpu, git "g"
    idx = FakeIndex(tmp_path / "index")
    try:
        idx.add("2.14.0.dev20261121+cpu", "g")
        idx.add("2.14.0.dev20261120+cpu", "other")
        conf = tmp_path / "flagsweep.toml"
        conf.write_text(f'[verify]\nenabled = false\n[issues]\nmin_models = 1\n[nightly]\nindex_url = "{idx.url}"\n'
                        f'venv_dir = "{tmp_path / "venvs"}"\ntransformers_pin = ""\nextra_index_url = ""\n'
                        'no_deps = true\npip_args = ["--isolated"]\ncanaries = ["AlphaModel"]\n')
        state = str(tmp_path / "publisher.sqlite")
        base = ["--settings", str(conf), "--state", state, "merge", *files, "--dry-run", "--out", str(tmp_path / "o")]
        assert main(base + ["--torch", "2026-11-20"]) == 2
        err = capsys.readouterr().err
        assert "is torch 2.14.0.dev20261120+cpu (git other); the shards ran 2.14.0.dev20261121+cpu (git g)" in err
        assert main(base + ["--torch", "2.14.0.dev20261121", "--json"]) == 0     # nothing was merged by the refusal
    finally:
        idx.close()
    conn = db.connect(state)
    merged = runs.list_runs(conn, limit=1)[0]
    assert merged.shard is None and merged.environment.python.endswith("torch-2.14.0.dev20261121+cpu/bin/python")
    conn.close()


# --- issue 21 A: run files validated against one schema before anything is imported ----------------

@pytest.mark.parametrize("edit, named", [
    (lambda d: d["run"].update(shard="2"), "run.shard '2' is not i/N"),
    (lambda d: d["run"].update(shard="3/2"), "run.shard '3/2' is not i/N"),
    (lambda d: d["run"].update(environment=["cpu"]), "run.environment: expected dict, got list"),
    (lambda d: d["run"].update(options="fast"), "run.options: expected dict, got str"),
    (lambda d: d["run"].update(models="BertModel"), "run.models: expected list, got str"),
    (lambda d: d["run"].update(models=[1, 2]), "run.models: expected a list of model names"),
    (lambda d: d.update(builds=[]), "builds: expected dict, got list"),
    (lambda d: d.update(outcomes={"a": 1}), "outcomes: expected list, got dict"),
    (lambda d: d.update(outcomes=[{"model": "x"}]), "outcome 1: missing field 'config'"),
    (lambda d: d["run"].pop("configs"), "run.configs is missing"),
    # issue 38: a shard export is foreign input (closed sets, ranges, unknown keys, outcomes whole, torch named)
    (lambda d: d["outcomes"][0].update(status="pwned"), "outcome: status 'pwned' is not one of ok, error"),
    (lambda d: d["outcomes"][0].pop("calls"), "outcome 1: missing field 'calls'"),
    (lambda d: d["outcomes"][0].update(graphs=-3), "outcome: graphs -3 is not an integer >= 0"),
    (lambda d: d["outcomes"][0].update(calls=[{"scenario": "first", "output": "x\nimport os #"}]),
     "output 'x\\nimport os #' is not an output path"),
    (lambda d: d["outcomes"][0].update(model="NoSuchModel"), "NoSuchModel under "),
    (lambda d: d.update(extra=1), "unknown key 'extra' at the top level"),
    (lambda d: d["run"].update(note="hi"), "run.note: unknown field"),
    (lambda d: d["run"]["options"].update(fast=True), "run.options: sweep options: unknown field 'fast'"),
    (lambda d: d["run"]["options"].update(accuracy={**ACCURACY, "loose": True}), "accuracy options: unknown field 'loose'"),
    (lambda d: d["run"]["options"].update(workers=-2), "sweep options: workers -2 is out of range"),
    (lambda d: d["run"]["options"].update(accuracy={**ACCURACY, "rtol": -1}), "accuracy options: rtol -1 is out of range"),
    (lambda d: d["run"].update(status="pwned"), "run: status 'pwned' is not one of running, finished"),
    (lambda d: d["run"].update(started_at="yesterday"), "run.started_at 'yesterday' is not an ISO 8601 time"),
    (lambda d: d["run"]["configs"].update(evil={"torch._dynamo.config.x\nimport os": True}),
     "a key is dotted Python identifiers"),
    (lambda d: d["run"]["environment"].pop("torch_version"), "torch_version is missing: a shard names the torch"),
    (lambda d: d["run"]["environment"].update(torch_version=2.14), "torch_version 2.14 is not a torch version string"),
    (lambda d: d["run"]["environment"].update(device="gpu"), "device 'gpu' is not one of cpu, cuda"),
    (lambda d: d["builds"].update(other=d["builds"]["ModelOfShard1"]), "builds.other is the build of"),
    # issue 45: a shard never chooses the modules the merging host imports; numbers a store holds; names and dates
    (lambda d: d["run"]["options"].update(extra_modules=["this"]),
     "run.options.extra_modules names 'this', a module this host's settings do not import"),
    (lambda d: d["outcomes"][0].update(graphs=10**30), f"outcome: graphs: {10**30} is past the range of a stored"),
    (lambda d: d["outcomes"][0].update(ops_per_graph=[3, -2**64]), "outcome: ops_per_graph[1]: -18446744073709551616"),
    (lambda d: d["outcomes"][0].update(calls=[{"scenario": "first", "recompiles": 2**63}]),
     "call: recompiles: 9223372036854775808 is past"),
    (lambda d: d["run"]["base_settings"].update({"torch._dynamo.config.cache_size_limit": 10**20}),
     "run: base_settings.torch._dynamo.config.cache_size_limit: 100000000000000000000 is past"),
    (lambda d: d["builds"]["ModelOfShard1"].update(seed=10**30), "stored build: seed: 1000000000000000000000000000000"),
    (lambda d: d["outcomes"][0].update(compile_s=float("nan")), "outcome: compile_s: nan is not a finite number"),
    (lambda d: d["outcomes"][0].update(peak_mem_mb=float("inf")), "outcome: peak_mem_mb: inf is not a finite number"),
    (lambda d: d["run"]["options"].update(population={"seed": float("nan")}), "population.seed: nan is not a finite"),
    (lambda d: d["run"]["models"].append("X\nimport os"), "run.models: model 'X\\nimport os' is not a model name"),
    (lambda d: d["outcomes"][0].update(model="A\nimport os #"), "outcome: model 'A\\nimport os #' is not a model name"),
    (lambda d: d["builds"].update(X=dict(d["builds"]["ModelOfShard1"], model="X; import os")),
     "stored build: model 'X; import os' is not a model name"),
    (lambda d: d["run"].update(nightly="2026-13-45"), "run: nightly '2026-13-45' is not a date YYYY-MM-DD"),
    (lambda d: d["run"].update(nightly="2026-1-5"), "run: nightly '2026-1-5' is not a date YYYY-MM-DD"),
])
def test_a_badly_typed_run_file_is_one_line_exit_2_and_nothing_is_imported(tmp_path, capsys, edit, named):
    good = _shard_file(tmp_path, 1)
    doc = json.loads(good.read_text())
    edit(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    state = tmp_path / "pub.sqlite"
    code = main(["--state", str(state), "merge", str(good), str(bad), "--dry-run", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert str(bad) in lines[0] and named in lines[0] and "mismatch" not in lines[0] and "used torch" not in lines[0]
    conn = db.connect(state)
    assert runs.list_runs(conn) == []      # every file is read before any is imported: nothing of either stays
    conn.close()


def test_a_merge_refused_after_the_files_read_keeps_nothing_of_them(tmp_path, capsys):
    files = [_shard_file(tmp_path, 1), _shard_file(tmp_path, 2)]
    doc = json.loads(files[1].read_text())
    doc["run"]["environment"]["torch_version"] = "2.14.0.dev20261120+cpu"
    files[1].write_text(json.dumps(doc))
    state = tmp_path / "pub.sqlite"
    code = main(["--state", str(state), "merge", *map(str, files), "--dry-run", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "used torch 2.14.0.dev20261120+cpu" in err
    conn = db.connect(state)
    assert runs.list_runs(conn) == []      # the imports and the merge are one transaction
    conn.close()


def test_a_stored_shard_label_without_a_slash_is_refused_by_merge(tmp_path):
    _, conn = _host(tmp_path, "publisher")
    ids = [merge_mod.import_file(conn, _shard_file(tmp_path, i)) for i in (1, 2)]
    conn.execute("UPDATE runs SET shard = '2' WHERE id = ?", (ids[1],))
    with pytest.raises(merge_mod.MergeError, match="shard '2' is not i/N"):
        merge_mod.merge(conn, ids)
    conn.close()


def test_merging_only_some_shards_says_which_are_missing_and_exits_1(tmp_path, capsys):
    conf = tmp_path / "flagsweep.toml"
    # The fake world's models exist nowhere to re-run; its crashes were stored as confirmed (3 attempts).
    conf.write_text("[verify]\nenabled = false\n[issues]\nmin_models = 1\n"
                    "[nightly]\nconfigs = [\"capture_scalar_outputs\"]\ncanaries = [\"AlphaModel\"]\n[confirm]\nruns = 0\n")
    code = main(["--settings", str(conf), "--state", str(tmp_path / "pub.sqlite"), "merge",
                 str(_shard_file(tmp_path, 1)), "--dry-run", "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert code == 1
    assert [ln.strip() for ln in out.splitlines() if "missing" in ln] == [
        "WARNING: shard(s) 2/2 missing from this merge: their models are untested in this nightly "
        "(never counted as fixed)"]
    assert merge_mod.missing_shards(["1/3", "3/3"]) == ["2/3"] and merge_mod.missing_shards(["1/1"]) == []


def test_the_options_a_real_sweep_stores_read_back_as_a_shards(tmp_path):
    """What the engine stores with a run (SweepOptions, the population drawn, configs set aside) passes the reader."""
    from harness.core.options import RunOptions, SweepOptions

    options = Settings(state_path=tmp_path / "s.sqlite").sweep_options("/usr/bin/python3").to_dict()
    assert SweepOptions.from_dict(options).to_dict() == options
    stored = {**options, "population": {"population": "all", "source": None, "seed": 0, "candidates": 3, "size": 3,
                                        "sample": 2, "strata": {"decoder_llm": [2, 3]}},
              "unavailable_configs": {"x": {"settings": {"torch._dynamo.config.x": True}, "missing": ["x"]}}}
    assert RunOptions.from_dict(stored).to_dict() == stored


def test_a_stored_shard_whose_workers_imported_a_module_is_refused_by_merge(tmp_path):
    """Issue 45: the merged run's flake confirmation imports each of its `extra_modules` on this host (the one holding
    the GitHub token); a shard naming one this host's settings do not is refused, by run, before anything is merged."""
    _, conn = _host(tmp_path, "publisher")
    ids = [merge_mod.import_file(conn, _shard_file(tmp_path, i)) for i in (1, 2)]
    conn.execute("UPDATE runs SET options = json_set(options, '$.extra_modules', json('[\"this\"]')) WHERE id = ?",
                 (ids[1],))
    with pytest.raises(merge_mod.MergeError, match=f"run {ids[1]}: run.options.extra_modules names 'this'"):
        merge_mod.merge(conn, ids)
    assert [r.status for r in runs.list_runs(conn)] == ["finished", "finished"]    # neither shard marked merged
    merged = merge_mod.merge(conn, ids, modules=["this"])     # a module this host's settings import is allowed
    assert runs.get_run(conn, merged).status == "finished"
    conn.close()


# ---- a night of two modes, sharded: one file per mode, one merged run per mode -------------------------------------

TWO_MODES = ["eval", "train"]


def _two_mode_world() -> World:
    world = _world()
    world.crashing_in = {"train": {"GammaModel"}}     # a crash only in train: the modes' results differ
    return world


def _two_mode_shard_files(tmp: Path, i: int) -> list[Path]:
    """Shard i/2 of a night of eval and train, swept in a store of its own, exported as `nightly --export` does."""
    settings, conn = _host(tmp, f"shard{i}")
    result = nightly.run_nightly(conn, settings, shard=f"{i}/2", out_dir=tmp, steps=_two_mode_world().steps(),
                                 modes=TWO_MODES)
    assert [r.status for r in result.each] == ["shard_done", "shard_done"] and len({r.run_id for r in result.each}) == 2
    paths = merge_mod.export_night(conn, [r.run_id for r in result.each], tmp / f"shard-{i}.flagsweep.json")
    conn.close()
    return paths


def test_a_sharded_night_of_two_modes_merges_into_one_run_per_mode_like_the_unsharded_night(tmp_path, capsys):
    files = _two_mode_shard_files(tmp_path, 1) + _two_mode_shard_files(tmp_path, 2)
    assert [f.name for f in files] == ["shard-1.flagsweep.json", "shard-1.train.flagsweep.json",
                                       "shard-2.flagsweep.json", "shard-2.train.flagsweep.json"]
    assert [merge_mod.read_export(f).run.options.sweep.mode.name for f in files] == TWO_MODES * 2
    pub_settings, pub = _host(tmp_path, "publisher")
    conf = tmp_path / "flagsweep.toml"
    conf.write_text("[verify]\nenabled = false\n[issues]\nmin_models = 1\n"
                    "[nightly]\nconfigs = [\"capture_scalar_outputs\"]\ncanaries = [\"AlphaModel\"]\n[confirm]\nruns = 0\n")
    code = main(["--settings", str(conf), "--state", str(pub_settings.state_path), "merge", *map(str, reversed(files)),
                 "--dry-run", "--out", str(tmp_path / "merged-out"), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and [result["mode"]] + [o["mode"] for o in result["others"]] == TWO_MODES
    merged = [result["run_id"], result["others"][0]["run_id"]]
    assert [runs.get_run(pub, m).options.sweep.mode.name for m in merged] == TWO_MODES
    assert all(runs.get_run(pub, m).shard is None and len(runs.get_run(pub, m).models) == 5 for m in merged)
    assert {r.status for r in runs.list_runs(pub) if r.id not in merged} == {"merged"}   # all four shards

    one_settings, one = _host(tmp_path, "unsharded")
    single = nightly.run_nightly(one, one_settings, out_dir=tmp_path / "single-out", modes=TWO_MODES,
                                 steps=_two_mode_world().steps(real_publish=True))
    for m, s in zip(merged, [r.run_id for r in single.each]):
        assert _effects(pub, m) == _effects(one, s)
    assert ("GammaModel", "capture_scalar_outputs") in {e[:2] for e in _effects(pub, merged[1]) if e[2] == "crashes"}
    assert "GammaModel" not in {e[0] for e in _effects(pub, merged[0]) if e[2] == "crashes"}
    for sub in ("", "train"):      # each mode published on its own, in its own folder, as the unsharded night
        merged_plan, single_plan = _plan(tmp_path / "merged-out" / sub), _plan(tmp_path / "single-out" / sub)
        assert merged_plan == single_plan and merged_plan
    assert _plan(tmp_path / "merged-out") != _plan(tmp_path / "merged-out" / "train")
    pub.close()
    one.close()


def test_a_two_mode_shard_set_missing_a_modes_file_is_refused_in_one_line_and_keeps_nothing(tmp_path, capsys):
    files = _two_mode_shard_files(tmp_path, 1) + _two_mode_shard_files(tmp_path, 2)
    state = tmp_path / "pub.sqlite"
    code = main(["--state", str(state), "merge", *map(str, files[:3]), "--dry-run", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines() == ["flagsweep merge: shard 2/2 has no run in mode train, which other shards "
                                        "swept: a shard set holds every mode's run of each shard"]
    conn = db.connect(state)
    assert runs.list_runs(conn) == []      # the imports and the merges are one transaction
    with pytest.raises(merge_mod.MergeError, match="runs of modes eval, train: one merge joins one mode's shards"):
        merge_mod.merge(conn, merge_mod.resolve_runs(conn, [str(f) for f in files]))
    assert merge_mod.export_path("a/s-1.flagsweep.json", BUILTIN["train-bf16"]) == Path("a/s-1.train-bf16.flagsweep.json")
    assert merge_mod.export_path("a/s-1.flagsweep.json", DEFAULT) == Path("a/s-1.flagsweep.json")
    assert merge_mod.export_path("s-1", BUILTIN["dynamic-true"]) == Path("s-1.dynamic-true")
    conn.close()
