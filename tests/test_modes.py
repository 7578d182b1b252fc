"""The modes (harness.core.modes): the closed set and its settings, and real compiles run in each mode.

In-process compiles of the test-only `ModePlantedModel` (tests/mode_models.py) for the engine's mode run (dynamic,
marked, train, autocast) and its oracle (harness.engine.step_oracle); one real transformers model for training and
bfloat16 autocast; one `flagsweep sweep --modes` over workers for the per-mode runs.
"""
import copy
import dataclasses

import pytest

from bot import settings as settings_mod
from harness.core.modes import BUILTIN, DEFAULT, Mode, ModeError, named, resolve
from harness.core.options import RunOptions, SweepOptions
from harness.core.outcome import Outcome
from harness.core.record import RecordError

CSO = {"torch._dynamo.config.capture_scalar_outputs": True}


# ---- the closed set, its settings and its stored forms (no torch) -----------------------------------------

def test_a_mode_is_a_closed_set_of_axes():
    assert Mode("t", phase="train", dtype="bfloat16").changed() == {"phase": "train", "dtype": "bfloat16"}
    assert DEFAULT.is_default and not BUILTIN["train-bf16"].is_default
    with pytest.raises(RecordError, match="dtype 'float8' is not one of float32, bfloat16, float16"):
        Mode("x", dtype="float8")
    with pytest.raises(RecordError, match="unknown field 'phases'"):
        Mode.from_dict({"name": "x", "phases": "train"})


def test_named_modes_from_a_settings_file(tmp_path):
    path = tmp_path / "flagsweep.toml"
    path.write_text('[sweep]\nmodes = ["eval", "mine"]\n[modes.mine]\nphase = "train"\ndynamic = "marked"\n')
    s = settings_mod.load(path, env={})
    assert [m.name for m in s.sweep_modes()] == ["eval", "mine"]
    assert s.sweep_modes()[1].axes == ("train", "float32", "marked", "default")
    assert [m.name for m in s.sweep_modes(["dynamic-true"])] == ["dynamic-true"]
    assert settings_mod.load(None, env={}).sweep_modes() == [DEFAULT]


@pytest.mark.parametrize("text, error", [
    ('[sweep]\nmodes = ["nope"]\n', "[sweep] modes: unknown mode 'nope'"),
    ('[modes.train]\nphase = "train"\n', "'train' is a built-in mode"),
    ('[modes.x]\nphase = "training"\n', "phase 'training' is not one of eval, train"),
    ('[sweep]\nmodes = ["train", "y"]\n[modes.y]\nphase = "train"\n', "modes 'train' and 'y' are the same mode"),
])
def test_a_bad_mode_setting_is_one_line(tmp_path, text, error):
    path = tmp_path / "flagsweep.toml"
    path.write_text(text)
    with pytest.raises(settings_mod.SettingsError) as exc:
        settings_mod.load(path, env={})
    assert error in str(exc.value) and "\n" not in str(exc.value)


def test_the_default_mode_is_stored_as_before_modes():
    """An eval run's options and an eval item are stored exactly as before (no new key); another mode round-trips."""
    assert "mode" not in SweepOptions().to_dict() and "backward_graphs" not in Outcome("M", "baseline", "ok").to_dict()
    train = dataclasses.replace(SweepOptions(), mode=BUILTIN["train-bf16"])
    assert RunOptions.from_dict(RunOptions(sweep=train).to_dict()).sweep.mode == BUILTIN["train-bf16"]
    assert RunOptions.from_dict(RunOptions().to_dict()).sweep.mode == DEFAULT
    assert Outcome.from_dict(Outcome("M", "baseline", "ok", backward_graphs=2).to_dict()).backward_graphs == 2
    with pytest.raises(ModeError, match="unknown mode 'x'"):
        resolve(["x"], named({}))


def test_the_nightly_refuses_an_unknown_mode_and_publish_takes_any_mode(tmp_path, capsys):
    """Issues carry their mode: the nightly sweeps [sweep] modes (an unknown one refused in one line before anything
    runs; a shard sweeps every mode, as `merge` joins each mode's shards: test_merge_files.py), and `publish` takes a
    run of any mode."""
    from bot.cli.main import main
    from harness.core.run_environment import RunEnvironment
    from state import db, runs

    path = tmp_path / "flagsweep.toml"
    path.write_text(f'state_path = "{tmp_path / "s.sqlite"}"\n[sweep]\nmodes = ["eval", "train"]\n')
    s = settings_mod.load(path, env={})
    conn = db.connect(s.state_path)
    assert main(["--settings", str(path), "nightly", "--modes", "nope", "--dry-run", "--out", str(tmp_path)]) == 2
    assert "flagsweep nightly: --modes: unknown mode 'nope'" in capsys.readouterr().err
    options = RunOptions(sweep=dataclasses.replace(SweepOptions(), mode=BUILTIN["train"]))
    run_id = runs.create_run(conn, environment=RunEnvironment(), models=["M"], configs={}, options=options)
    runs.finish_run(conn, run_id)
    capsys.readouterr()
    assert main(["--state", str(s.state_path), "publish", str(run_id), "--dry-run", "--out", str(tmp_path)]) == 0
    assert "only eval runs" not in capsys.readouterr().err


# ---- real compiles in a mode (in-process) ---------------------------------------------------------------

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def planted():
    from tests import mode_models
    from harness import zoo

    return zoo.build("ModePlantedModel"), mode_models


def _run(built, mode, settings=None, backend="count"):
    from harness.engine import backend as be, in_mode

    module = copy.deepcopy(built.module)
    in_mode.prepare(module, mode)
    inputs = {k: v.clone() for k, v in built.inputs.items()}
    return module, be.compile_and_run(module, inputs, settings=settings or {}, backend=backend, mode=mode)


@pytest.mark.compile
@pytest.mark.parametrize("mode, recompiles", [("eval", 1), ("dynamic-true", 0), ("dynamic-marked", 0)])
def test_a_second_size_recompiles_only_in_the_default_mode(planted, mode, recompiles):
    built, models = planted
    _, done = _run(built, BUILTIN[mode])
    assert done.error is None
    with done.again():
        done.compiled(**models.inputs(3, 9))
    assert done.stats.recompiles == recompiles


@pytest.mark.compile
def test_train_compiles_the_backward_and_judges_gradients_against_eager(planted):
    """Train: dropout off, the backward compiled and counted; the planted gradient-only bug is wrong in train and
    invisible in eval."""
    from harness.core.options import Accuracy
    from harness.engine.step_oracle import ModeReference

    built, _ = planted
    train = BUILTIN["train"]
    module, baseline = _run(built, train)
    assert module.training and module.dropout.p == 0.0 and module.drop_prob == 0.0
    assert baseline.counts["backward_graphs"] >= 1 and baseline.grads["linear.weight"] is not None
    prepared = copy.deepcopy(built.module)
    from harness.engine import in_mode
    in_mode.prepare(prepared, train)
    ref = ModeReference(dataclasses.replace(built, module=prepared), train, "cpu", Accuracy())
    assert ref.judge(baseline.output, baseline.grads).accuracy in ("exact", "close")
    _, flagged = _run(built, train, CSO)
    verdict = ref.judge(flagged.output, flagged.grads)
    assert verdict.accuracy == "wrong" and verdict.output.startswith("grad.embed.weight")
    _, eval_flagged = _run(built, DEFAULT, CSO)
    assert "backward_graphs" not in eval_flagged.counts
    assert torch.equal(eval_flagged.output, _run(built, DEFAULT)[1].output)


@pytest.mark.compile
def test_a_real_model_trains_and_runs_in_bfloat16():
    """GPT2Model: a train step's gradients against eager's at training tolerance; bfloat16 autocast close to eager
    (float64 arbitrating) within half-precision tolerance."""
    from harness import zoo
    from harness.core.options import Accuracy
    from harness.engine import in_mode
    from harness.engine.step_oracle import ModeReference

    built = zoo.build("GPT2Model")
    for name in ("train", "bf16"):
        mode = BUILTIN[name]
        prepared = copy.deepcopy(built.module)
        in_mode.prepare(prepared, mode)
        ref = ModeReference(dataclasses.replace(built, module=prepared), mode, "cpu", Accuracy())
        _, done = _run(built, mode)
        assert done.error is None
        assert ref.judge(done.output, done.grads).accuracy in ("exact", "close"), name
        if name == "train":
            assert done.counts["backward_graphs"] >= 1 and len(done.grads) > 10
        else:   # autocast ran its matmuls in bfloat16 (the last layer norm returns float32): not float32's answer
            with torch.no_grad():
                fp32 = built.module(**built.inputs).last_hidden_state
            assert not torch.equal(done.output.last_hidden_state, fp32)


@pytest.mark.compile
def test_bfloat16_autocast_is_close_to_float64_and_finds_a_planted_cast_bug():
    """bf16: the compiled step within half-precision tolerance of a float64 run (and judged close to eager); under the
    flag the planted cast bug (float16 where bfloat16 was meant) is wrong; eval, without autocast, never sees it."""
    from harness import zoo
    from harness.core.options import Accuracy
    from harness.engine import in_mode
    from harness.engine.scenarios import double_copy, to_fp64
    from harness.core.modes import HALF_TOL
    from harness.engine.step_oracle import ModeReference
    from tests import mode_models  # noqa: F401  (registers ModeCastModel)

    built, bf16 = zoo.build("ModeCastModel"), BUILTIN["bf16"]
    prepared = copy.deepcopy(built.module)
    in_mode.prepare(prepared, bf16)
    ref = ModeReference(dataclasses.replace(built, module=prepared), bf16, "cpu", Accuracy())
    _, clean = _run(built, bf16)
    with torch.no_grad():
        fp64 = double_copy(built.module)(**to_fp64(built.inputs))
    assert clean.output.dtype == torch.bfloat16 and not torch.equal(clean.output.double(), fp64)  # ran in half
    torch.testing.assert_close(clean.output.double(), fp64, rtol=HALF_TOL, atol=HALF_TOL)
    assert ref.judge(clean.output, clean.grads).accuracy in ("exact", "close")
    _, planted = _run(built, bf16, CSO)
    verdict = ref.judge(planted.output, planted.grads)
    assert verdict.accuracy == "wrong", verdict
    assert torch.equal(_run(built, DEFAULT, CSO)[1].output, _run(built, DEFAULT)[1].output)


# ---- a sweep over modes: one run each, each with its own baseline (workers) ---------------------------------

@pytest.mark.compile
def test_a_sweep_over_modes_stores_one_run_per_mode(tmp_path, capsys):
    """`--modes train,sdpa`: the planted gradient bug is a wrong_result in train; sdpa, which the model cannot
    run, is create_error with its reason where its entry has no modes record (not crashed), and skipped with the
    record's reason, before its build, where it has one; --json gives each mode's items, seconds and skipped models."""
    import json

    from bot.cli.main import main
    from state import db, history, runs

    state = str(tmp_path / "s.sqlite")
    assert main(["--state", state, "sweep", "--import", "tests.mode_models", "--models",
                 "ModePlantedModel,ModeRecordedModel", "--configs", "capture_scalar_outputs", "--modes", "train,sdpa",
                 "--workers", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    train, sdpa = doc["modes"]
    assert train["mode"]["phase"] == "train" and sdpa["mode"]["attention"] == "sdpa"
    assert len(train["outcomes"]) == 4 and train["seconds"] > 0 and train["skipped"] == {}
    flagged = [e for e in train["effects"] if e["config"] == "capture_scalar_outputs"]
    assert [e["correctness"] for e in flagged] == ["wrong_result", "wrong_result"]   # the record says train runs
    assert all(o["backward_graphs"] >= 1 for o in train["outcomes"])
    status = {(o["model"], o["status"]) for o in sdpa["outcomes"]}
    assert status == {("ModePlantedModel", "create_error"), ("ModeRecordedModel", "skipped")}
    unrecorded = next(o for o in sdpa["outcomes"] if o["model"] == "ModePlantedModel")
    assert "cannot run in mode sdpa in eager" in unrecorded["error_message"]
    why = "the lock records that ModeRecordedModel cannot run attention sdpa in eager: PlantedModel has no attention"
    assert sdpa["skipped"]["ModeRecordedModel"].startswith(why)
    recorded = [o for o in sdpa["outcomes"] if o["model"] == "ModeRecordedModel"]
    assert all(o["build_s"] == 0 and o["signature"] is None for o in recorded)   # never built, never a crash
    assert {e["effect"] for e in sdpa["effects"]} == {"create_error"}           # untestable, never filed
    conn = db.connect(state)
    stored = {r.id: r.options.sweep.mode.name for r in runs.list_runs(conn, limit=5)}
    assert sorted(stored.values()) == ["sdpa", "train"]
    # each mode its own history: neither run is the other's previous one
    assert history.previous_comparable_run(conn, max(stored)) is None
    # the report names the mode, its items and seconds (an eval report reads as before: no mode line)
    for fmt in ("md", "html"):
        out = tmp_path / f"report.{fmt}"
        assert main(["--state", state, "report", str(min(stored)), "-o", str(out)]) == 0
        assert "mode train (phase train): 4 items, " in out.read_text()
        assert main(["--state", state, "report", str(max(stored)), "-o", str(out)]) == 0
        assert "skipped: " in out.read_text() and "cannot run attention sdpa in eager" in out.read_text()
    # a resumed train run continues in train (the command line's options are eval's)
    train_id = min(stored)
    with conn:
        conn.execute("DELETE FROM outcomes WHERE run_id = ? AND config = 'capture_scalar_outputs'", (train_id,))
        conn.execute("UPDATE runs SET status = 'interrupted', finished_at = NULL WHERE id = ?", (train_id,))
    assert main(["--state", state, "sweep", "--import", "tests.mode_models", "--resume", str(train_id), "--workers",
                 "1", "--json"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    again = [o for o in resumed["outcomes"] if o["config"] == "capture_scalar_outputs"]
    assert len(again) == 2 and all(o["backward_graphs"] >= 1 and o["calls"][0]["accuracy"] == "wrong" for o in again)


@pytest.mark.compile
def test_pruning_pooling_and_the_screen_read_each_modes_own_baseline(tmp_path):
    """Keys AOTAutograd reads only where there is a backward: pruned (not_read) against dynamic=True's baseline,
    compiled in train, pooled there (together, the same as train's baseline); the screen answers a config's later
    calls from its mode's own baseline: the second size does not recompile under dynamic=True (in eval it does:
    test_a_second_size_recompiles_only_in_the_default_mode)."""
    from harness.core.options import Accuracy, SweepOptions
    from harness.engine.engine import SweepRequest, sweep
    from harness.engine.flags.pruning import Pruning
    from state import db, runs

    conn = db.connect(tmp_path / "s.sqlite")
    configs = {"baseline": {}, "aot_debug": {"torch._functorch.config.debug_assert": True},
               "donated": {"torch._functorch.config.donated_buffer": False},
               "rng": {"torch._functorch.config.functionalize_rng_ops": False}}
    prune = Pruning(frozenset({"aot_debug", "donated"}), audit=0.0, audit_min=0)
    outs = {}
    for name in ("train", "dynamic-true"):
        options = SweepOptions(workers=1, timeout=300, extra_modules=["tests.mode_models"], mode=BUILTIN[name],
                               accuracy=Accuracy())
        run = sweep(conn, SweepRequest(models=["ModeSizedModel"], configs=configs, options=options, progress=False,
                                       pruning=prune)).run
        outs[name] = {o.config: o for o in runs.outcomes(conn, run.id)}
    assert {outs["dynamic-true"][c].reason for c in ("aot_debug", "donated")} == {"not_read"}
    train = outs["train"]
    assert {train[c].reason for c in ("aot_debug", "donated")} == {"pooled"}
    assert train["aot_debug"].backward_graphs == train["baseline"].backward_graphs >= 1
    assert train["rng"].reason is None and [c.scenario for c in train["rng"].calls] == ["first"]   # its only call

    def second(outcome):
        return next(c for c in outcome.calls if c.scenario == "second_size")

    rng, base = outs["dynamic-true"]["rng"], outs["dynamic-true"]["baseline"]
    assert rng.reason == "answered" and second(rng).recompiles == second(base).recompiles == 0
    assert second(base).accuracy in ("exact", "close")
