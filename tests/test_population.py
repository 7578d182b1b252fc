"""The study's population: only the models that graph-break under the baseline, drawn from a stored run or a
baseline pass, then sampled (stratified, seeded); the method table says what was drawn from what."""
from __future__ import annotations

from pathlib import Path

import pytest

from bot.pipeline import nightly, sampling
from bot.issues import timeline
from bot.issues.context import PlanSettings
from bot.issues.plan import plan as plan_issues
from bot.view.run_view import load
from bot.settings import NightlySettings, Settings, SettingsError, load as load_settings
from harness.core.effects import effects_for
from harness.core.options import RunOptions
from harness.core.outcome import Outcome
from harness.core.population import graph_breaking
from state import db, runs
from tests.fakesweep import MODELS, World
from tests.helpers_cli import one_line, run_cli
from tests.historydata import CONFIGS, ENV, ok, store_run
from harness.core.run_environment import RunEnvironment

TORCH = ENV["torch_version"]
# (model, stratum, baseline graphs): 5 of 8 graph-break; ErrModel's baseline failed, so it tells nothing.
CORPUS = [("LlamaForCausalLM", "decoder_llm", 4), ("GPT2Model", "decoder_llm", 1), ("MistralModel", "decoder_llm", 3),
          ("BertModel", "encoder_decoder", 2), ("T5Model", "encoder_decoder", 1), ("ViTModel", "vision_other", 5),
          ("ResNetModel", "vision_other", 1), ("Qwen2VLModel", "vl_multimodal", 6)]
BREAKING = ["BertModel", "LlamaForCausalLM", "MistralModel", "Qwen2VLModel", "ViTModel"]


def _cands() -> list[sampling.Pick]:
    return [sampling.Pick(m, s) for m, s, _ in CORPUS]


def _store_full(conn, torch: str = TORCH) -> int:
    outs = []
    for model, stratum, graphs in CORPUS:
        outs += [ok(model, "baseline", graphs, stratum), ok(model, "capture_scalar_outputs", 1, stratum)]
    outs.append(Outcome("ErrModel", "baseline", "error", stratum="decoder_llm", graphs=None))
    return store_run(conn, outs, configs=CONFIGS, env={**ENV, "torch_version": torch})


def _no_pass(models: list[str]) -> int:
    raise AssertionError("a stored baseline was there: no baseline pass should run")


def test_graph_breaking_means_more_than_one_graph_at_a_compiled_baseline() -> None:
    outs = [ok("A", "baseline", 2), ok("B", "baseline", 1), ok("C", "capture_scalar_outputs", 3),
            Outcome("D", "baseline", "error"), Outcome("E", "baseline", "create_error")]
    assert graph_breaking(outs) == ["A"]


def test_population_is_read_from_the_latest_stored_run_on_this_torch(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "s.sqlite")
    _store_full(conn, torch="2.12.0")                   # another torch: not comparable
    rid = _store_full(conn)
    drawn = sampling.draw(conn, _cands(), population="graph-breaking", sample=None, seed=0, base_settings={},
                          torch_version=TORCH, baseline_pass=_no_pass)
    assert sorted(drawn.models) == BREAKING
    assert sorted(o.model for o in drawn.prior) == BREAKING and {o.config for o in drawn.prior} == {"baseline"}
    assert drawn.meta["source"] == f"run {rid}" and drawn.meta["size"] == 5 and drawn.meta["candidates"] == 8
    assert drawn.meta["strata"] == {"decoder_llm": [2, 2], "encoder_decoder": [1, 1], "vision_other": [1, 1],
                                    "vl_multimodal": [1, 1]}
    # Sampled from the population, stratified and seeded: the same seed, the same models.
    a = sampling.draw(conn, _cands(), population="graph-breaking", sample=4, seed=3, base_settings={},
                      torch_version=TORCH, baseline_pass=_no_pass)
    b = sampling.draw(conn, _cands(), population="graph-breaking", sample=4, seed=3, base_settings={},
                      torch_version=TORCH, baseline_pass=_no_pass)
    assert a.models == b.models and len(a.models) == 4 and set(a.models) <= set(BREAKING)
    assert a.meta["seed"] == 3 and sum(d for d, _ in a.meta["strata"].values()) == 4
    assert all(d >= 1 for d, _ in a.meta["strata"].values())
    everyone = sampling.draw(conn, _cands(), population="all", sample=None, seed=0, base_settings={},
                             torch_version=None, baseline_pass=_no_pass)
    assert len(everyone.models) == 8 and everyone.meta is None and everyone.prior == []


def test_a_baseline_pass_runs_first_when_nothing_comparable_is_stored(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "s.sqlite")
    _store_full(conn, torch="2.12.0")
    passes: list[list[str]] = []

    def baseline_pass(models: list[str]) -> int:
        passes.append(models)
        graphs = {m: g for m, _, g in CORPUS}
        return store_run(conn, [ok(m, "baseline", graphs[m]) for m in models], configs={"baseline": {}},
                         kind="baseline")

    drawn = sampling.draw(conn, _cands(), population="graph-breaking", sample=None, seed=0, base_settings={},
                          torch_version=TORCH, baseline_pass=baseline_pass)
    assert passes == [[m for m, _, _ in CORPUS]] and sorted(drawn.models) == BREAKING
    assert drawn.meta["source"].startswith("baseline pass (run ")
    # The pass is stored: the next draw on this torch reuses it.
    again = sampling.draw(conn, _cands(), population="graph-breaking", sample=None, seed=0, base_settings={},
                          torch_version=TORCH, baseline_pass=_no_pass)
    assert sorted(again.models) == BREAKING and len(passes) == 1
    with pytest.raises(ValueError, match="'breaking'"):
        sampling.draw(conn, _cands(), population="breaking", sample=None, seed=0, base_settings={},
                      torch_version=TORCH, baseline_pass=_no_pass)


def test_nightly_sweeps_flags_only_on_the_breaking_models_and_reuses_their_baseline(tmp_path: Path) -> None:
    world = World()
    world.one_graph = {"AlphaModel", "GammaModel", "EpsilonModel"}
    # no canaries: the drawn models only (canaries stay in a drawn night: test_gate)
    settings = Settings(state_path=tmp_path / "s.sqlite", nightly=NightlySettings(canaries=[]))
    conn = db.connect(settings.state_path)
    result = nightly.run_nightly(conn, settings, torch="current", configs=["capture_scalar_outputs"], dry_run=True,
                                 out_dir=tmp_path / "out", steps=world.steps(real_publish=True),
                                 population="graph-breaking")
    assert [sorted(s[2]) for s in world.sweeps] == [sorted(MODELS), ["BetaForCausalLM", "DeltaModel"]]
    assert world.compiles == 5 + 2                      # five baselines, then only the flag on the two breaking ones
    run = runs.get_run(conn, result.run_id)
    assert sorted(run.models) == ["BetaForCausalLM", "DeltaModel"] and result.models == 2
    assert run.options.population["size"] == 2 and run.options.population["candidates"] == 5
    # The summary issue's method table says what was drawn from what.
    [summary] = [p for p in (tmp_path / "out").glob("*.md") if p.read_text().startswith("# flagsweep summary")]
    body = summary.read_text()
    assert "| decoder\\_llm | 2 | 2 |" in body and "graph-break under the baseline" in body


def test_method_table_shows_strata_sample_population_and_seed(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "s.sqlite")
    meta = {"population": "graph-breaking", "source": "run 1", "seed": 7, "candidates": 8, "size": 5, "sample": 3,
            "strata": {"decoder_llm": [2, 3], "vision_other": [1, 2]}}
    outs = [ok("LlamaForCausalLM", "baseline", 4), Outcome("LlamaForCausalLM", "capture_scalar_outputs", "error",
                                                            stratum="decoder_llm", signature="RuntimeError: boom",
                                                            error_type="RuntimeError", error_message="boom")]
    rid = runs.create_run(conn, environment=RunEnvironment.from_dict(ENV), models=["LlamaForCausalLM"], configs=CONFIGS, options=RunOptions(population=meta))
    for o in outs:
        runs.record_outcome(conn, rid, o)
    runs.finish_run(conn, rid)
    view = load(conn, rid)
    plan = plan_issues(view, timeline.gather(conn, view), PlanSettings())
    assert len(effects_for(outs)) == 1
    for action in plan.actions:
        assert "| decoder\\_llm | 2 | 3 |" in action.body and "| vision\\_other | 1 | 2 |" in action.body
        assert "3 of a population of 5, a stratified sample with seed 7" in action.body


@pytest.mark.parametrize("args", [["sweep", "--models", "GPT2Model", "--population", "breaking"],
                                  ["nightly", "--population", "some"]])
def test_cli_refuses_a_bad_population(tmp_path: Path, capsys, args) -> None:
    state = tmp_path / "s.sqlite"
    code, err = run_cli(capsys, "--state", str(state), *args)
    assert code == 2 and "--population" in one_line(err) and repr(args[-1]) in err
    assert not state.exists()


def test_population_setting_is_checked(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text('[sweep]\npopulation = "breaking"\n')
    with pytest.raises(SettingsError, match="sweep.population.*'breaking'"):
        load_settings(toml, env={})
    toml.write_text('[sweep]\npopulation = "graph-breaking"\n')
    assert load_settings(toml, env={}).sweep.population == "graph-breaking"


@pytest.mark.compile
def test_real_baseline_pass_then_the_flag_only_on_the_breaking_model(tmp_path: Path) -> None:
    import torch

    from harness.engine.configs import BUILTIN
    from harness.engine.engine import SweepOptions, SweepRequest, sweep

    conn = db.connect(tmp_path / "s.sqlite")
    options = SweepOptions(workers=1, timeout=120, extra_modules=["tests.fault_models"])
    cands = [sampling.Pick("TinyItemModel", "decoder_llm"), sampling.Pick("Fault_raise", "decoder_llm"),
             sampling.Pick("BrokenCreateModel", "encoder_decoder")]

    def baseline_pass(models: list[str]) -> int:
        return sweep(conn, SweepRequest(models=models, configs={"baseline": {}}, options=options, kind="baseline",
                                        progress=False)).run.id

    drawn = sampling.draw(conn, cands, population="graph-breaking", sample=None, seed=0, base_settings={},
                          torch_version=torch.__version__, baseline_pass=baseline_pass)
    assert "TinyItemModel" in drawn.models and "BrokenCreateModel" not in drawn.models   # create_error: no baseline
    assert sorted(drawn.models) == sorted(o.model for o in drawn.prior if (o.graphs or 0) > 1) and drawn.meta["candidates"] == 3
    configs = {"baseline": {}, "capture_scalar_outputs": BUILTIN["capture_scalar_outputs"]}
    rid = sweep(conn, SweepRequest(models=drawn.models, configs=configs, options=options, progress=False,
                                   prior=drawn.prior, population=drawn.meta)).run.id
    outs = {o.config: o for o in runs.outcomes(conn, rid) if o.model == "TinyItemModel"}
    assert outs["baseline"] == next(o for o in drawn.prior if o.model == "TinyItemModel")   # reused, not compiled again
    assert (outs["baseline"].graphs, outs["capture_scalar_outputs"].graphs) == (2, 1)
    assert [e.effect for e in effects_for(list(outs.values()))] == ["reduces_graphs"]
    assert runs.get_run(conn, rid).options.population["source"].startswith("baseline pass")
