"""The sweep engine over real workers: real compiles of tiny models and injected faults, in one stored sweep.

One module-scoped sweep (2 workers) holds every case, so the workers' torch
import is paid once; the tests then read the stored run. The fault models are in
tests/fault_models.py and misbehave only under capture_scalar_outputs.
"""
import sys

import pytest

from harness.engine.configs import BUILTIN
from harness.engine.engine import (EAGER, SweepOptions, SweepRequest, collect_environment, eager_check, run_items,
                                   run_job, sweep)
from harness.core.effects import effects_for
from harness.engine.events import Result
from harness.engine.pool import Group, Pool
from state import db, runs

MODELS = ["TinyItemModel", "TinyDynamicOutputModel", "Fault_raise", "Fault_segfault", "Fault_abort", "Fault_hang",
          "Fault_oom", "Fault_sigkill", "BrokenCreateModel", "BrokenEagerModel"]
FAULTS = {"Fault_raise": "error", "Fault_segfault": "killed", "Fault_abort": "killed", "Fault_hang": "timeout",
          "Fault_oom": "killed", "Fault_sigkill": "killed"}
OPTIONS = SweepOptions(workers=2, timeout=15, max_rss_mb=1000, extra_modules=["tests.fault_models"])

pytestmark = pytest.mark.compile


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    conn = db.connect(tmp_path_factory.mktemp("engine") / "state.sqlite")
    run_id = sweep(conn, SweepRequest(models=MODELS, configs=dict(BUILTIN), base_settings={}, options=OPTIONS, progress=False)).run.id
    outs = {(o.model, o.config): o for o in runs.outcomes(conn, run_id)}
    return conn, run_id, outs


def test_every_item_is_stored_and_the_run_finished(stored):
    conn, run_id, outs = stored
    assert set(outs) == {(m, c) for m in MODELS for c in BUILTIN}
    run = runs.get_run(conn, run_id)
    assert run.status == "finished"
    assert run.environment.torch_version.startswith("2.") and run.environment.torch_git
    assert run.environment.python_version == ".".join(map(str, sys.version_info[:3]))


def test_real_graph_break_reduction_under_capture_scalar_outputs(stored):
    _, _, outs = stored
    base, flag = outs["TinyItemModel", "baseline"], outs["TinyItemModel", "capture_scalar_outputs"]
    assert (base.status, base.graphs, base.graph_breaks) == ("ok", 2, 1)
    assert any("item" in r.lower() or "scalar" in r.lower() for r in base.break_reasons), base.break_reasons
    assert (flag.status, flag.graphs, flag.graph_breaks) == ("ok", 1, 0)
    assert flag.ops and flag.ops_per_graph == [flag.ops]
    assert base.compile_s > 0 and base.build_s is not None and flag.peak_mem_mb > 0
    assert base.stratum == "decoder_llm" and base.fingerprint


def test_real_crash_under_capture_dynamic_output_shape_ops(stored):
    _, _, outs = stored
    base = outs["TinyDynamicOutputModel", "baseline"]
    crash = outs["TinyDynamicOutputModel", "capture_dynamic_output_shape_ops"]
    assert base.status == "ok" and base.graph_breaks >= 1
    assert crash.status == "error"
    assert crash.error_type == "PendingUnbackedSymbolNotFound"
    assert crash.signature == "PendingUnbackedSymbolNotFound: Pending unbacked symbols {uN} not in returned outputs"
    assert crash.torch_frame and crash.torch_frame.startswith("torch/")
    assert "Traceback" in crash.traceback


@pytest.mark.parametrize("model,status", sorted(FAULTS.items()))
def test_each_fault_gets_its_status_and_the_models_other_items_are_correct(stored, model, status):
    _, _, outs = stored
    hit = outs[model, "capture_scalar_outputs"]
    assert hit.status == status, (hit.error_message, hit.traceback)
    assert hit.signature
    for config in ("baseline", "capture_dynamic_output_shape_ops"):
        other = outs[model, config]
        assert (other.status, other.graphs, other.graph_breaks) == ("ok", 2, 1), (config, other)


def test_fault_signatures(stored):
    _, _, outs = stored
    sig = {m: outs[m, "capture_scalar_outputs"].signature for m in FAULTS}
    assert sig["Fault_raise"] == "RuntimeError: injected fault at 0xADDR in layer 3"
    assert sig["Fault_segfault"] == "killed: SIGSEGV"
    assert sig["Fault_abort"] == "killed: SIGABRT"
    assert sig["Fault_sigkill"] == "killed: SIGKILL"
    assert sig["Fault_oom"] == "killed: memory limit"
    assert sig["Fault_hang"] == "timeout"
    # faulthandler's dump of the dying worker is kept as its traceback.
    assert "Segmentation fault" in (outs["Fault_segfault", "capture_scalar_outputs"].traceback or "")
    # A killed item keeps what the worker said about its model.
    assert outs["Fault_segfault", "capture_scalar_outputs"].stratum == "decoder_llm"


def test_build_failures(stored):
    _, _, outs = stored
    for config in BUILTIN:
        created = outs["BrokenCreateModel", config]
        assert created.status == "create_error" and "hidden_size" in created.error_message
        eager = outs["BrokenEagerModel", config]
        assert eager.status == "eager_error" and eager.error_type == "RuntimeError"
        assert eager.stratum == "vl_multimodal"


def test_effects_of_the_stored_run(stored):
    _, _, outs = stored
    effects = {(e.model, e.config): e.effect for e in effects_for(list(outs.values()))}
    assert effects["TinyItemModel", "capture_scalar_outputs"] == "reduces_graphs"
    assert effects["TinyItemModel", "capture_dynamic_output_shape_ops"] == "no_effect"
    assert effects["TinyDynamicOutputModel", "capture_dynamic_output_shape_ops"] == "crashes"
    assert all(effects[m, "capture_scalar_outputs"] == "crashes" for m in FAULTS)
    assert effects["BrokenCreateModel", "capture_scalar_outputs"] == "create_error"
    assert effects["BrokenEagerModel", "capture_scalar_outputs"] == "create_error"


def test_base_settings_apply_to_baseline_too_and_fresh_workers():
    # capture_scalar_outputs as a base setting: the baseline itself has one graph.
    items = [("TinyItemModel", "baseline"), ("TinyItemModel", "baseline")]
    outs = run_items(items, configs=dict(BUILTIN), base_settings={"torch._dynamo.config.capture_scalar_outputs": True},
                     options=SweepOptions(workers=1, timeout=60, extra_modules=["tests.fault_models"]),
                     fresh_workers=True)
    assert [(o.model, o.config, o.status, o.graphs) for o in outs] == [("TinyItemModel", "baseline", "ok", 1)] * 2
    # A fresh worker per item: both paid their own build.
    assert all(o.build_s > 0 for o in outs)


def test_eager_mode_and_recycling():
    pool = Pool(SweepOptions(workers=1, timeout=60, max_items_per_worker=1, extra_modules=["tests.fault_models"]))
    try:
        groups = [Group("TinyItemModel", [(0, EAGER, {})], "eager"), Group("BrokenEagerModel", [(1, EAGER, {})], "eager")]
        got = {e.index: e.outcome for e in pool.run(groups) if isinstance(e, Result)}
    finally:
        pool.close()
    assert got[0].status == "ok" and got[0].graphs is None
    assert got[1].status == "eager_error"
    assert pool.stats["spawned"] == 2 and pool.stats["recycled"] == 2


def test_eager_check_builds_and_runs_one_forward_per_model():
    outs = eager_check(["BrokenCreateModel", "TinyItemModel", "BrokenEagerModel"],
                       options=SweepOptions(workers=2, timeout=60, extra_modules=["tests.fault_models"]))
    assert [(o.model, o.config, o.status) for o in outs] == [
        ("BrokenCreateModel", EAGER, "create_error"), ("TinyItemModel", EAGER, "ok"), ("BrokenEagerModel", EAGER, "eager_error")]
    assert outs[1].graphs is None and outs[1].compile_s > 0 and outs[1].stratum == "decoder_llm"
    assert "hidden_size" in outs[0].error_message and outs[2].error_type == "RuntimeError"


def test_run_items_has_no_pseudo_config():
    # An eager check is its own entry point: no config name stands for "no config" (nor starts a worker).
    with pytest.raises(KeyError, match="'-' is not in the configs given"):
        run_items([("TinyItemModel", "-")], configs={}, base_settings={}, options=OPTIONS)


def test_run_job_calls_the_callers_function_by_module_path_in_workers():
    job = "tests.zoo_extra_models:what_it_is"
    results = {r.model: r for r in run_job(job, ["BertModel", "ViTModel"], options=SweepOptions(workers=2, timeout=120))}
    bert, vit = results["BertModel"], results["ViTModel"]
    assert (bert.status, bert.error) == ("ok", None)
    assert bert.data["stratum"] == "decoder_llm" and "input_ids" in bert.data["inputs"] and bert.data["parameters"] > 0
    assert vit.data["stratum"] == "vision_other" and vit.data["inputs"] == ["pixel_values"]
    one = SweepOptions(workers=1, timeout=5)
    (broke,) = run_job("tests.zoo_extra_models:no_answer", ["BertModel"], options=one)
    assert (broke.status, broke.data) == ("error", None) and "no answer for BertModel" in broke.error
    (hung,) = run_job("tests.zoo_extra_models:never_ends", ["BertModel"], options=one)
    assert (hung.status, hung.data) == ("timeout", None) and hung.error.startswith("no result after 5 s")


def test_a_call_in_another_interpreter_answers_in_json_and_says_why_it_failed():
    from harness.engine.interpreter import CallFailed, call

    sig = call("harness.core.signature:signature", "RuntimeError", "fault at 0xdeadbeef in layer 3", "")
    assert sig == "RuntimeError: fault at 0xADDR in layer 3"
    with pytest.raises(CallFailed) as broke:
        call("harness.core.signature:no_such_function")
    assert broke.value.started and "AttributeError" in broke.value.why and "no_such_function" in broke.value.why
    with pytest.raises(CallFailed) as absent:
        call("harness.core.signature:signature", python="/nonexistent/python3")
    assert not absent.value.started and str(absent.value).startswith("/nonexistent/python3: ")


def test_collect_environment_in_a_worker_interpreter():
    env = collect_environment(sys.executable)
    import transformers

    assert env["transformers_version"] == transformers.__version__
    assert env["device"] == "cpu" and env["recipe_fingerprint"]


def test_the_parent_side_never_imports_torch():
    # Workers own torch (and CUDA); the parent only plans, times and stores.
    import subprocess

    code = "import sys, harness.engine.engine, harness.engine.configs, harness.engine.pool; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_graph_break_ids_from_the_torch_under_test(stored):
    # The worker looked each reason's gb_type up in torch 2.13's graph_break_registry.json.
    conn, run_id, outs = stored
    base, flag = outs["TinyItemModel", "baseline"], outs["TinyItemModel", "capture_scalar_outputs"]
    assert base.break_ids == ["GB0124"] and flag.break_ids == []
    assert len(base.break_ids) == len(base.break_reasons)
    # The fault models' @torch.compiler.disable breaks have an id as well, and the store keeps each id beside its reason.
    stored_breaks = runs.graph_breaks(conn, run_id)
    assert ("TinyItemModel", "baseline", base.break_reasons[0], "GB0124") in stored_breaks
    assert all(gb_id and gb_id.startswith("GB") for m, c, _, gb_id in stored_breaks if m.startswith("Fault_"))


def test_what_capture_scalar_outputs_removes_on_a_real_reduction(stored):
    from harness.core.graph_breaks import flag_breaks, leverage

    _, run_id, outs = stored
    breaks = flag_breaks(list(outs.values()), dict(BUILTIN))["capture_scalar_outputs"]
    removed = {b.gb_id: b for b in breaks.removes}
    assert removed["GB0124"].models == ("TinyItemModel",)
    assert removed["GB0124"].gb_type == "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    assert "GB0124" not in {b.gb_id for b in breaks.introduces}
    lev = leverage(list(outs.values()))
    assert "TinyItemModel" in {b.gb_id: b for b in lev["baseline"].breaks}["GB0124"].models
    assert "GB0124" not in {b.gb_id for b in lev["capture_scalar_outputs"].breaks}
    # Each fault model is blocked by its own crash under the flag; the build failures block nothing.
    blocked = dict(lev["capture_scalar_outputs"].crashes)
    assert blocked["RuntimeError: injected fault at 0xADDR in layer 3"] == ("Fault_raise",)
    assert not any("Broken" in m for ms in blocked.values() for m in ms)


def test_a_sweep_returns_its_run_with_the_builds_and_config_space_it_stored(tmp_path):
    """What the workers built and listed comes back from `sweep` (typed events, not pool side tables), as stored."""
    from state import flags

    conn = db.connect(tmp_path / "state.sqlite")
    swept = sweep(conn, SweepRequest(models=["BertModel"], configs={}, options=SweepOptions(workers=1, timeout=300),
                                     progress=False))
    assert swept.run.status == "finished" and swept.run.models == ["BertModel"]
    assert set(swept.builds) == {"BertModel"} and swept.builds["BertModel"].config_class == "BertConfig"
    assert runs.model_data(conn, swept.run.id) == swept.builds
    assert "torch._dynamo.config.capture_scalar_outputs" in swept.config_space.entries
    assert flags.space_of_run(conn, swept.run.id) == (sorted(swept.config_space.modules), swept.config_space.entries)
