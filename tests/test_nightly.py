"""The nightly pipeline with a cheap sweep twin: provider failure, idempotence, diff between nights, shards and merge."""
import dataclasses
import json
from pathlib import Path

import pytest

from bot.pipeline import merge as merge_mod
from bot.pipeline import nightly
from bot.pipeline import steps as steps_mod
from bot.settings import AccuracySettings, IssueSettings, NightlySettings, Settings, VerifySettings
from state import db, runs
from tests.fakeindex import FakeIndex
from tests.fakesweep import MODELS, World

@pytest.fixture
def env(tmp_path):
    # AlphaModel: a model of the twin's corpus: the night's models stay five
    settings = Settings(state_path=tmp_path / "state.sqlite",
                        nightly=NightlySettings(configs=["capture_scalar_outputs"], canaries=["AlphaModel"]))
    conn = db.connect(settings.state_path)
    yield settings, conn, World(), tmp_path
    conn.close()


def test_a_nightly_is_swept_once_unless_forced(env):
    settings, conn, world, tmp = env
    first = nightly.run_nightly(conn, settings, out_dir=tmp / "out", steps=world.steps())
    assert first.status == "swept" and first.nightly == "2026-11-21" and first.dry_run
    assert first.models == 5 and first.configs == ["baseline", "capture_scalar_outputs"]
    again = nightly.run_nightly(conn, settings, out_dir=tmp / "out", steps=world.steps())
    assert again.status == "reused" and again.run_id == first.run_id
    assert len(world.sweeps) == 1
    assert world.published == [first.run_id, first.run_id]    # it still publishes what it has
    forced = nightly.run_nightly(conn, settings, force=True, out_dir=tmp / "out", steps=world.steps())
    assert forced.status == "swept" and forced.run_id != first.run_id and len(world.sweeps) == 2
    # Other configs are another sweep of the same nightly.
    other = nightly.run_nightly(conn, settings, configs=[], out_dir=tmp / "out", steps=world.steps())
    assert other.status == "swept" and len(world.sweeps) == 3


def test_the_next_night_is_diffed_with_the_last(env):
    settings, conn, world, tmp = env
    first = nightly.run_nightly(conn, settings, out_dir=tmp, steps=world.steps())
    assert first.previous_run is None
    world.version, world.date, world.crashing = "2.14.0.dev20261122+cpu", "2026-11-22", {"GammaModel"}
    second = nightly.run_nightly(conn, settings, out_dir=tmp, steps=world.steps())
    assert second.previous_run == first.run_id
    assert second.transitions == {"new_crash": 1, "unchanged": 9}   # baseline items are compared too
    data = second.to_dict()
    assert data["published"]["run_id"] == second.run_id and data["published"]["dry_run"] is True
    assert json.loads(json.dumps(data)) == data     # JSON-ready: survives a round trip unchanged


def test_provider_failure_is_a_failed_run_not_a_crash(env):
    settings, conn, world, tmp = env
    idx = FakeIndex(tmp / "index")
    try:
        idx.add("2.14.0.dev20261121+cpu", "abc", tag="cp27-cp27m-win32")   # nothing for this Python
        settings = dataclasses.replace(settings, nightly=dataclasses.replace(settings.nightly, index_url=idx.url))
        steps = world.steps()
        steps.provide = steps_mod.provide       # the real provider
        result = nightly.run_nightly(conn, settings, torch="nightly", out_dir=tmp, steps=steps)
    finally:
        idx.close()
    assert result.status == "failed" and "fits this Python" in result.reason
    run = runs.get_run(conn, result.run_id)
    assert run.status == "failed" and run.kind == "nightly" and "fits this Python" in run.reason
    assert world.sweeps == [] and world.published == []


def test_shards_split_deterministically_and_merge_into_one_run(env):
    settings, conn, world, tmp = env
    world.crashing = {"BetaForCausalLM"}
    r1 = nightly.run_nightly(conn, settings, shard="1/2", out_dir=tmp, steps=world.steps())
    r2 = nightly.run_nightly(conn, settings, shard="2/2", out_dir=tmp, steps=world.steps())
    assert r1.status == r2.status == "shard_done" and world.published == []
    s1, s2 = set(world.sweeps[0][2]), set(world.sweeps[1][2])
    assert not s1 & s2 and s1 | s2 == set(MODELS)
    assert nightly.shard_slice(MODELS, (1, 2)) == sorted(s1)
    merged = merge_mod.merge(conn, [r1.run_id, r2.run_id])
    run = runs.get_run(conn, merged)
    assert run.shard is None and sorted(run.models) == sorted(MODELS) and run.status == "finished"
    assert len(runs.outcomes(conn, merged)) == 10
    assert {runs.get_run(conn, r).status for r in (r1.run_id, r2.run_id)} == {"merged"}
    with pytest.raises(merge_mod.MergeError, match="merged, not finished"):
        merge_mod.merge(conn, [r1.run_id, r2.run_id])


def test_merge_refuses_mismatched_runs(env):
    settings, conn, world, tmp = env
    a = nightly.run_nightly(conn, settings, shard="1/2", out_dir=tmp, steps=world.steps())
    plain = nightly.run_nightly(conn, settings, out_dir=tmp, steps=world.steps())
    with pytest.raises(merge_mod.MergeError, match="not a shard"):
        merge_mod.merge(conn, [a.run_id, plain.run_id])
    world.date = "2026-11-22"
    b = nightly.run_nightly(conn, settings, shard="2/2", out_dir=tmp, steps=world.steps())
    with pytest.raises(merge_mod.MergeError, match="nightly 2026-11-22"):
        merge_mod.merge(conn, [a.run_id, b.run_id])


def test_bad_shard_text():
    for text in ("0/2", "3/2", "x", "1/0"):
        with pytest.raises(nightly.NightlyError):
            nightly.parse_shard(text)


@pytest.mark.compile
def test_a_real_tiny_nightly_end_to_end_in_dry_run(env):
    """The installed torch, the real engine on two test models, finalize, plan, dry-run publish and report."""
    import tests.fault_models  # noqa: F401  (registers the test models here; workers import it too)
    from harness.engine import engine

    settings, conn, world, tmp = env
    settings = dataclasses.replace(
        settings,
        verify=VerifySettings(enabled=False),   # test models exist only where tests.fault_models is imported
        nightly=dataclasses.replace(settings.nightly, canaries=["TinyItemModel"]),   # one of the night's two models
        issues=IssueSettings(min_models=1),     # its one crashing model is filed at once (test_filing.py)
        accuracy=AccuracySettings(enabled=False))   # the flake re-runs' later calls: this night is about crashes

    def real_sweep(conn, request):
        options = engine.SweepOptions(workers=1, timeout=120, python=request.options.python,
                                      extra_modules=["tests.fault_models"])
        return engine.sweep(conn, dataclasses.replace(request, options=options, progress=False)).run

    steps = steps_mod.Steps(sweep=real_sweep)
    result = nightly.run_nightly(conn, settings, torch="current", models=["TinyItemModel", "Fault_raise"],
                                 dry_run=True, out_dir=tmp / "out", progress=False, steps=steps)
    import torch

    assert result.status == "swept" and result.torch["version"] == torch.__version__ and result.torch["current"]
    outs = {(o.model, o.config): o for o in runs.outcomes(conn, result.run_id)}
    assert outs[("TinyItemModel", "baseline")].status == "ok" and outs[("TinyItemModel", "baseline")].graphs >= 1
    assert outs[("Fault_raise", "capture_scalar_outputs")].status == "error"
    stored_tb = outs[("Fault_raise", "capture_scalar_outputs")].traceback
    import sys
    assert 'File "torch/' in stored_tb and sys.prefix not in stored_tb and "site-packages" not in stored_tb
    assert Path(result.report).is_file() and "Fault_raise" in Path(result.report).read_text()
    assert (tmp / "out" / "plan.json").is_file()
    plan = json.loads((tmp / "out" / "plan.json").read_text())
    tracking = [a for a in plan["actions"] if a["action"] == "create" and "crashes 1/2 models" in a["title"]]
    assert len(tracking) == 1 and "Fault_raise" in (tmp / "out" / tracking[0]["file"]).read_text()
    again = nightly.run_nightly(conn, settings, torch="current", models=["TinyItemModel", "Fault_raise"],
                                dry_run=True, out_dir=tmp / "out", progress=False, steps=steps)
    assert again.status == "reused" and again.run_id == result.run_id


def test_a_nightly_sweeps_every_flag_of_a_named_set_with_pruning_and_an_audit(env):
    """[nightly] configs may name a set: it expands in the night's torch (here the installed one), and the sweep
    may prune the flips, with an audit seeded by the night's date."""
    settings, conn, world, tmp = env
    result = nightly.run_nightly(conn, settings, configs=["capture_scalar_outputs", "all-dynamo"],
                                 out_dir=tmp / "out", progress=False, steps=world.steps())
    swept = runs.get_run(conn, result.run_id).configs
    flips = {n for n in swept if n.startswith("dynamo.")}
    assert len(flips) > 30 and "capture_scalar_outputs" in swept and "capture_dynamic_output_shape_ops" in swept
    assert swept["dynamo.allow_rnn"] == {"torch._dynamo.config.allow_rnn": True}
    assert "dynamo.verbose" not in swept                         # the exclusion table holds
    assert world.pruning is not None and world.pruning.seed == 20261121
    assert world.pruning.configs == flips | {"capture_scalar_outputs", "capture_dynamic_output_shape_ops"}
    assert set(result.configs) == set(swept)


def test_a_named_set_the_backend_cannot_run_is_refused_before_anything_runs(env):
    from harness.engine.configs import ConfigError

    settings, conn, world, tmp = env
    with pytest.raises(ConfigError, match=r"all-inductor needs \[sweep\] backend = \"inductor\" "):
        nightly.run_nightly(conn, settings, configs=["all-inductor"], out_dir=tmp / "out",
                            steps=dataclasses.replace(world.steps(), select_configs=steps_mod.select_configs))
    assert world.sweeps == [] and runs.list_runs(conn) == []


def test_the_summary_ends_by_saying_where_the_issues_and_report_are(env):
    from bot.text.render import render

    settings, conn, world, tmp = env
    result = nightly.run_nightly(conn, settings, out_dir=tmp / "out", steps=world.steps())
    text = render("nightly_summary.txt.j2", r=result)
    lines = text.strip().splitlines()
    assert lines[0] == "flagsweep nightly 2026-11-21: torch 2.14.0.dev20261121+cpu (g21)"
    assert f"rendered issues are in {tmp / 'out'}/" in lines[-2] and lines[-1].strip() == f"report: {tmp / 'out' / 'report.html'}"
    failed = nightly.NightlyResult(status="failed", run_id=7, nightly="2026-11-30", reason="no nightly for 2026-11-30")
    assert render("nightly_summary.txt.j2", r=failed).strip() == \
        "flagsweep nightly: FAILED for 2026-11-30 (run 7): no nightly for 2026-11-30"


def test_merge_cli_joins_shards_and_publishes_once_as_json(env, capsys):
    from bot.cli.main import main

    settings, conn, world, tmp = env
    world.crashing = {"GammaModel"}
    ids = [nightly.run_nightly(conn, settings, shard=f"{i}/2", out_dir=tmp, steps=world.steps()).run_id for i in (1, 2)]
    conf = tmp / "flagsweep.toml"
    # The fake world's models exist nowhere to re-run; its crashes were stored as confirmed (3 attempts).
    conf.write_text('[verify]\nenabled = false\n[issues]\nmin_models = 1\n[nightly]\ncanaries = ["AlphaModel"]\n'
                    '[confirm]\nruns = 0\n')
    code = main(["--settings", str(conf), "--state", str(settings.state_path), "merge", *map(str, ids),
                 "--dry-run", "--out", str(tmp / "merged-out"), "--json"])
    out = capsys.readouterr().out
    assert code == 0
    data = json.loads(out)                      # nothing but JSON on stdout
    assert data["status"] == "swept" and data["models"] == 5 and data["nightly"] == "2026-11-21"
    assert any("crashes 1/5 models" in row["title"] for row in data["published"]["rows"])
    assert Path(data["report"]).is_file()
    assert main(["--state", str(settings.state_path), "merge", *map(str, ids)]) == 2   # already merged
