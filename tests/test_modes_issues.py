"""Issues and reproducers carry the mode (issue 46): one tracking issue per (config, mode, signature), titled with a
mode that is not eval's; eval's issues keep their keys and titles; a run of one mode leaves another mode's issues
alone; and, for real, a nightly of two modes files the train crash its own issue whose reproducer runs the train step
and fails as filed.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from bot.issues.context import PlanSettings
from bot.issues.keys import summary_key, tracking_key
from bot.issues.lifecycle import Plan
from bot.issues.plan import plan
from bot.text.render import render
from harness.core.modes import BUILTIN, DEFAULT, Mode
from harness.core.options import RunOptions
from state.links import Link
from tests.fakegithub import scenario as sc
from tests.issueviews import NONE, inputs

CSO = "capture_scalar_outputs"
TRAIN_BF16 = BUILTIN["train-bf16"]


def in_mode(results: dict, mode: Mode, links: dict[str, Link] | None = None):
    """The scenario's run view as a run of `mode`."""
    view = inputs(results, links=links)
    options = RunOptions.from_dict({"backend": "count", **({} if mode.is_default else {"mode": mode.to_dict()})})
    return dataclasses.replace(view, run=dataclasses.replace(view.run, options=options))


def links_after(done: Plan) -> dict[str, Link]:
    """The links a publish of `done` leaves (bot.github.outbox_steps: the action's mode kept with the link)."""
    return {a.key: Link(key=a.key, repo="o/r", number=n, kind=a.kind, config=a.config, signature=a.signature,
                        body_sha=a.material.text(), title=a.title, mode=a.mode)
            for n, a in enumerate((a for a in done.actions if a.action == "create"), 1)}


def test_each_mode_files_its_own_issues_and_eval_keeps_its_keys_and_titles() -> None:
    settings = PlanSettings(min_models=1)
    eval_plan = plan(in_mode(sc.corpus(), DEFAULT), NONE, settings)
    train_plan = plan(in_mode(sc.corpus(), TRAIN_BF16), NONE, settings)
    evals = {a.key: a for a in eval_plan.actions if a.action == "create"}
    trains = {a.key: a for a in train_plan.actions if a.action == "create"}
    # eval: the keys and titles issues had before modes (existing issues still match)
    assert tracking_key(CSO, sc.SIG_A) in evals and summary_key(CSO) in evals
    assert evals[tracking_key(CSO, sc.SIG_A)].title == "capture_scalar_outputs=True crashes 2/10 models with " \
                                                       "PendingUnbackedSymbolNotFound"
    assert all(a.mode == "" and '"mode"' not in a.body for a in evals.values())
    # train bfloat16: the same crashes, each its own issue, the mode in its key, title and hidden meta line
    assert set(trains).isdisjoint(evals) and len(trains) == len(evals)
    assert tracking_key(CSO, sc.SIG_A, TRAIN_BF16) in trains and summary_key(CSO, TRAIN_BF16) in trains
    assert trains[tracking_key(CSO, sc.SIG_A, TRAIN_BF16)].title == \
        "capture_scalar_outputs=True crashes 2/10 models in train bfloat16 with PendingUnbackedSymbolNotFound"
    assert trains[summary_key(CSO, TRAIN_BF16)].title.startswith("flagsweep summary: capture_scalar_outputs=True in "
                                                                 "train bfloat16: 3 crashes")
    assert all(a.mode == "phase=train,dtype=bfloat16" for a in trains.values())
    assert all('"mode": "phase=train,dtype=bfloat16"' in a.body for a in trains.values())
    assert "every compile (the baseline's too) in mode `train-bf16` (train bfloat16)" in \
        trains[tracking_key(CSO, sc.SIG_A, TRAIN_BF16)].body
    assert "## `capture_scalar_outputs=True` on 10 models in train bfloat16\n" in trains[summary_key(CSO, TRAIN_BF16)].body
    assert all("every compile (the baseline's too)" not in a.body for a in evals.values())
    # a mode renamed in the settings is the same mode: its issues keep their keys
    assert tracking_key(CSO, sc.SIG_A, dataclasses.replace(TRAIN_BF16, name="tb")) in trains


def test_a_run_of_one_mode_leaves_the_other_modes_issues_alone() -> None:
    """A train run that no longer crashes counts quiet nights on train's issues only; eval's are not its to touch."""
    settings = PlanSettings(min_models=1, verify_nightlies=1)
    links = {**links_after(plan(in_mode(sc.corpus(), DEFAULT), NONE, settings)),
             **links_after(plan(in_mode(sc.corpus(), TRAIN_BF16), NONE, settings))}
    fixed = {m: {"baseline": 3} for m in sc.corpus()}
    done = plan(in_mode(fixed, TRAIN_BF16, links), NONE, settings)
    eval_keys = {k for k, l in links.items() if l.mode == ""}
    assert done.actions and not {a.key for a in done.actions} & eval_keys
    assert {a.mode for a in done.actions} == {TRAIN_BF16.key}
    again = plan(in_mode(sc.corpus(), DEFAULT, links), NONE, settings)     # eval: as it was, nothing to write
    assert again.actions == []


def test_a_lost_store_rebuilds_a_train_issues_link_with_its_mode(tmp_path: Path) -> None:
    """The hidden meta line carries the mode, so a link rebuilt from GitHub alone is the train run's again."""
    from bot.github.port import IssueRef
    from bot.github.publish import _listed
    from state import db, links

    created = [a for a in plan(in_mode(sc.corpus(), TRAIN_BF16), NONE, PlanSettings(min_models=1)).actions
               if a.action == "create"]
    conn = db.connect(tmp_path / "state.sqlite")
    links.sync(conn, "o/r", [_listed(IssueRef(n, a.title, a.body, "open", "bot", key=a.key))
                             for n, a in enumerate(created, 1)])
    rebuilt = links.all_links(conn, "o/r")
    assert set(rebuilt) == {a.key for a in created} and {l.mode for l in rebuilt.values()} == {TRAIN_BF16.key}
    again = plan(in_mode(sc.corpus(), TRAIN_BF16, rebuilt), NONE, PlanSettings(min_models=1))
    assert not [a for a in again.actions if a.action == "create"]      # found again by key: nothing filed twice


def test_a_runs_history_ranges_and_verdicts_are_its_modes_own(tmp_path: Path) -> None:
    """The same crash in an eval run and a train run of one night: each mode's signature row, newest regression range
    and stored verdict are its own (a train issue never shows eval's range, history or reproducer)."""
    from harness.core.options import SweepOptions
    from state import db, history, ranges, verdicts
    from tests import historydata as hd

    conn = db.connect(tmp_path / "state.sqlite")
    train = BUILTIN["train"]
    eval_run = hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-20")
    train_run = hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-20",
                             options=RunOptions(SweepOptions(mode=train)))
    for rid, status in ((eval_run, "no_series"), (train_run, "failed")):
        ranges.record(conn, ranges.Range(rid, CSO, hd.PENDING, "new_crash", status))
    key = (CSO, hd.PENDING, "new_crash")
    assert ranges.latest(conn, train_run)[key].status == "no_series"            # eval's: the newest eval range
    assert ranges.latest(conn, train_run, train.key)[key].status == "failed"    # train's own
    rows = {(r.mode, r.signature) for r in history.signature_history(conn)} | \
        {(r.mode, r.signature) for r in history.signature_history(conn, mode=train.key)}
    assert rows == {("", hd.PENDING), (train.key, hd.PENDING)}
    blank = verdicts.Verdict(CSO, hd.PENDING, "M", "fp", "2.13.0", "abc", "confirmed", script="print(1)\n")
    trained = dataclasses.replace(blank, mode=train.key, script="print(2)\n")
    verdicts.put(conn, blank)
    verdicts.put(conn, trained)
    assert blank.key != trained.key and verdicts.get(conn, trained.key).script == "print(2)\n"
    assert verdicts.get(conn, blank.key).mode == ""


def test_a_reproducer_in_a_mode_stays_standalone_and_eval_s_is_as_before() -> None:
    """The mode's script inlines harness/engine/in_mode.py: nothing it runs may import flagsweep (a build's python has
    none; an import under `if TYPE_CHECKING:` never runs), and it stays valid Python. An eval script has no mode part."""
    import ast

    from bot.verify.script import render_script
    from tests.helpers_verify import BUILD

    flag = {"torch._dynamo.config.capture_scalar_outputs": True}
    for name in ("train-bf16", "dynamic-marked", "sdpa"):
        script = render_script(BUILD, flag, mode=BUILTIN[name])
        assert _executed_imports(ast.parse(script)).isdisjoint({"harness", "bot", "state", "tests"}), name
        assert f'"name": "{name}"' in script and "def step(" in script and "prepare(model, MODE)" in script
    plain = render_script(BUILD, flag)
    assert "MODE = " not in plain and "def step(" not in plain and "with torch.no_grad():" in plain


def test_a_title_names_each_axis_not_at_its_default() -> None:
    words = {name: render("mode_words.txt.j2", mode=mode).strip() for name, mode in BUILTIN.items()}
    assert words == {"eval": "", "train": "train", "bf16": "bfloat16", "fp16": "float16",
                     "train-bf16": "train bfloat16", "dynamic-true": "dynamic=True",
                     "dynamic-marked": "marked dynamic", "sdpa": "sdpa attention",
                     "eager-attention": "eager attention"}


def test_the_verify_step_and_its_shrink_run_every_script_in_the_runs_mode(tmp_path: Path) -> None:
    """Every script the verify step renders for a train run (the checks, each shrink step) is rendered in train; its
    verdict is stored under train's key, apart from eval's verdict of the same group, and the script carries the mode."""
    from bot.verify import reproducers
    from bot.verify.context import StepContext
    from bot.verify.script import render_script
    from bot.verify.steps import VerifySteps
    from harness.core.options import SweepOptions
    from state import db, verdicts
    from tests.helpers_verify import RUN, Twin, sig_twin, verify_setup

    outs, groups, builds = verify_setup()
    conn = db.connect(tmp_path / "state.sqlite")
    seen: list[Mode] = []
    twin = sig_twin(Twin())

    def runner(b, under, *rest):
        seen.append(under.mode)
        script, result = twin(b, under, *rest)
        return render_script(b, under.settings, baseline=under.baseline, mode=under.mode), result

    train = dataclasses.replace(RUN, options=RunOptions(SweepOptions(mode=TRAIN_BF16)))
    found = reproducers.verify_all(StepContext.of(conn, train, builds, seams=VerifySteps(run=runner),
                                                  shrink_budget=600.0), groups, outs)
    assert len(seen) > len(groups) and set(seen) == {TRAIN_BF16}              # verified, then shrunk, in train
    for verdict in found.values():
        assert verdict.status == "confirmed" and verdict.shrunk and verdict.mode == TRAIN_BF16.key
        assert '"phase": "train"' in verdict.script and verdicts.get(conn, verdict.key) == verdict
    evals = reproducers.verify_all(StepContext.of(conn, RUN, builds, seams=VerifySteps(run=runner)), groups, outs)
    assert {v.key for v in evals.values()}.isdisjoint(v.key for v in found.values())     # eval's: its own verdicts
    assert seen[-1] == DEFAULT and all('"phase": "train"' not in v.script for v in evals.values())


def test_repro_takes_one_known_mode_and_refuses_the_rest_in_one_line(capsys) -> None:
    from bot.cli.main import main

    for args, said in [(["--modes", "warp"], "--modes: unknown mode 'warp' (known: bf16,"),
                       (["--modes", "eval,train"], "--modes eval,train: a reproducer runs in one mode; name one"),
                       (["--modes", "train,sdpa", "--wrong", "first:last_hidden_state"],
                        "--modes train,sdpa: a reproducer runs in one mode; name one")]:
        assert main(["repro", "BertModel", "--config", CSO, *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"flagsweep repro: {said}") and err.count("\n") == 1


def _executed_imports(tree) -> set[str]:
    """The top-level packages a script imports when it runs (an import under `if TYPE_CHECKING:` never runs)."""
    import ast

    found: set[str] = set()
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            continue
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add((node.module or "").split(".")[0])
        found |= _executed_imports(node)
    return found


GRAD = "wrong_result: first: grad.embeddings.word_embeddings.weight"


def test_a_wrong_results_accuracy_reproducer_runs_in_its_mode_standalone() -> None:
    """In a mode the accuracy reproducer writes the mode as the maintainer's crash script does (the same lines, from
    bot.verify.maintainer.mode_lines: `model.train()` with dropout 0, the loss and its backward, autocast, dynamic=True
    or marked inputs, the attention implementation), never inlining harness/engine/in_mode.py (torch and transformers
    only); the WHOLE script stays under 100 lines. It runs the step on eager and the compiled model, picks a gradient
    by its parameter's name, compares at the mode's tolerance with float64 arbitrating in train and half precision,
    and names aot_eager in train (the sweep's backward goes through AOTAutograd). A later call in train is not
    renderable (the mode makes the first call only); an eval script has no mode part."""
    import ast

    from bot.verify import maintainer
    from bot.verify.script import NotRenderable
    from bot.verify.wrong_script import Case, model_output, render_wrong
    from harness.core.calls import Call, output_path
    from tests.helpers_verify import BUILD

    flag = {"torch._dynamo.config.capture_scalar_outputs": True}
    for name, sig in (("train", GRAD), ("train-bf16", GRAD), ("bf16", "wrong_result: first: output.last_hidden_state"),
                      ("dynamic-true", "wrong_result: hook_added: last_hidden_state"),
                      ("dynamic-marked", "wrong_result: first: last_hidden_state"),
                      ("sdpa", "wrong_result: weights_updated: last_hidden_state")):
        mode = BUILTIN[name]
        script = render_wrong(BUILD, Case(sig, flag, {}, "count", "cpu", 1e-3, 1e-3, mode=mode))
        assert _executed_imports(ast.parse(script)) == {"copy", "torch", "transformers"}, name
        assert len(script.splitlines()) < 100, (name, len(script.splitlines()))
        assert not any(word in script for word in ("in_mode", "def step(", "prepare(", "MODE = ")), name
        assert f"# In mode {name} (" in script and "torch.compile(model" in script
        assert ("torch._dynamo.utils.same(" in script) == (mode.train or mode.half), name
        # the mode's lines are the maintainer's crash script's, word for word
        crash = maintainer.render_script(BUILD, {}, flag, "eager", "E: boom", mode=mode)
        for part in ("prepare", "labels", "loss", "mark"):
            for line in maintainer.mode_lines(part, mode, model=BUILD.model, spec=BUILD.spec):
                assert line in script and line in crash, (name, part, line)
        assert (".train()" in script, "loss.backward()" in script, "owner.p = 0.0" in script) == (mode.train,) * 3
        assert ('torch.autocast("cpu", dtype=torch.bfloat16, enabled=half)' in script) == mode.half, name
        assert ("torch._dynamo.maybe_mark_dynamic(value, 1)" in script) == (name == "dynamic-marked")
        assert (', dynamic=True)' in script) == (name == "dynamic-true")
        assert ('model.set_attn_implementation("sdpa")' in script) == (name == "sdpa")
    train = render_wrong(BUILD, Case(GRAD, flag, {}, "count", "cpu", 1e-3, 1e-3, mode=BUILTIN["train"]))
    assert 'compiled_out["grad"]["embeddings.word_embeddings.weight"]' in train and "TOL = 0.01" in train
    assert 'backend="aot_eager"' in train
    # a gradient of a layer's parameter (its name has the layer's index): a call's output path, picked by its name
    layered = "grad.encoder.layer.0.attention.self.query.weight"
    assert Call("first", accuracy="wrong", output=layered).output == layered
    assert output_path(layered) == ("grad", "encoder", "layer", "0", "attention", "self", "query", "weight")
    script = render_wrong(BUILD, Case(f"wrong_result: first: {layered}", flag, {}, "count", "cpu", 1e-3, 1e-3,
                                      mode=BUILTIN["train"]))
    assert 'compiled_out["grad"]["encoder.layer.0.attention.self.query.weight"]' in script
    with pytest.raises(NotRenderable, match="mode train makes the first call only, not second_size"):
        render_wrong(BUILD, Case("wrong_result: second_size: output", flag, {}, "count", "cpu", 1e-3, 1e-3,
                                 mode=BUILTIN["train"]))
    assert [model_output(o, BUILTIN["train"]) for o in ("output.logits", "output[0]", "output", "grad.a.weight")] == \
        ["logits", "[0]", None, None]
    assert model_output("logits", BUILTIN["dynamic-true"]) == "logits" and model_output("output", DEFAULT) == "output"
    plain = render_wrong(BUILD, Case("wrong_result: first: last_hidden_state", flag, {}, "count", "cpu", 1e-3, 1e-3))
    assert "# In mode" not in plain and "with torch.no_grad():" in plain and "from __future__" not in plain


@pytest.mark.parametrize("model, parameter", [("BertModel", "embeddings.word_embeddings.weight"),
                                              ("ElectraForCausalLM", "electra.embeddings.word_embeddings.weight")])
def test_a_train_reproducers_own_lines_make_the_sweeps_step(model: str, parameter: str, monkeypatch) -> None:
    """The train accuracy reproducer writes the sweep's step (harness/engine/in_mode.py) in its own lines: run in eager
    (torch.compile the identity), in_mode's prepare finds no dropout left to zero on its model, it gives labels to a
    head with its own loss and to no other, and its output and every gradient equal in_mode.step's on the same module
    and inputs, bit for bit (the loss is the model's own, else the sweep's fixed reduction). No compile."""
    import copy

    import torch

    from bot.verify import maintainer
    from bot.verify.wrong_script import Case, render_wrong
    from harness.engine import in_mode
    from tests.helpers_verify import stored_build

    # the script's rules are read from in_mode's source, not copied: what the reader finds is what the worker runs
    assert maintainer.train_rules() == maintainer.TrainRules(in_mode.OWN_LOSS, in_mode.RANDOM_IN_TRAINING)
    train = BUILTIN["train"]
    script = render_wrong(stored_build(model), Case(f"wrong_result: first: grad.{parameter}", {}, {}, "eager", "cpu",
                                                    1e-3, 1e-3, mode=train))
    monkeypatch.setattr(torch, "compile", lambda module, **kwargs: module)
    scope: dict = {}
    exec(compile(script, "repro.py", "exec"), scope)      # noqa: S102 - the script under test, rendered here
    ref = copy.deepcopy(scope["eager"])

    def floats(module: torch.nn.Module) -> list:
        return [(name, k, v) for name, sub in [*module.named_modules(), ("config", module.config)]
                for k, v in vars(sub).items() if isinstance(v, float)]

    assert any(isinstance(sub, torch.nn.Dropout) for sub in ref.modules())
    before = floats(ref)
    in_mode.prepare(ref, train)
    assert floats(ref) == before and ref.training
    assert ("labels" in scope["inputs"]) == model.endswith("ForCausalLM")
    found = in_mode.step(ref, ref, {k: v for k, v in scope["inputs"].items() if k != "labels"}, train)
    ours = scope["eager_out"]
    assert ours["grad"].keys() == {k for k, g in found.grads.items() if g is not None} and parameter in ours["grad"]
    for name, grad in ours["grad"].items():
        torch.testing.assert_close(grad, found.grads[name], rtol=0, atol=0)
    torch.testing.assert_close(ours["output"].to_tuple(), found.output.to_tuple(), rtol=0, atol=0)


STANDIN_WRONG = Path(__file__).with_name("modes_standin_wrong")


@pytest.mark.compile
def test_a_planted_backward_only_wrong_result_gets_a_train_reproducer_that_fails_as_filed(tmp_path: Path) -> None:
    """tests/modes_standin_wrong plants a backward-only wrong result under capture_scalar_outputs (every gradient of
    AOTAutograd's backward plus one): the train accuracy reproducer of BertModel, checked as the verify step checks
    it (each check a fresh interpreter of the stand-in), passes in eager and with the flag off (the baseline) and fails
    in assert_close under the flag."""
    from bot.verify import oracle
    from bot.verify.steps import render_and_check
    from bot.verify.wrong_script import MISMATCH, Case
    from tests.helpers_verify import stored_build

    python = tmp_path / "python"     # as the crash test's stand-in: `-I` would drop PYTHONPATH, so it becomes `-s`
    python.write_text(
        '#!/bin/sh\n[ "$1" = "-I" ] && { shift; set -- -s "$@"; }\n'
        f'PYTHONPATH="{STANDIN_WRONG}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    flag = {"torch._dynamo.config.capture_scalar_outputs": True}
    case = Case(GRAD, flag, {}, "count", "cpu", 1e-3, 1e-3, mode=BUILTIN["train"])
    judged = oracle.judge_wrong(stored_build(MODEL), case, str(python), check=render_and_check, timeout=900)
    assert judged.passed, (judged.failed, judged.reason)
    assert judged.result.status == "error" and judged.result.exception == MISMATCH
    assert "loss.backward()" in judged.script and "BertModel(config).train()" in judged.script
    assert "def step(" not in judged.script and len(judged.script.splitlines()) < 100


# ---- a real nightly of two modes ---------------------------------------------------------------------------------

STANDIN = Path(__file__).with_name("modes_standin")
MODEL = "BertModel"     # a quick-start model that trains on the CPU in seconds
PLANTED = "RuntimeError: stand-in build: the backward of a graph with captured scalars"


@pytest.mark.compile
def test_a_nightly_of_two_modes_files_the_train_crash_with_a_reproducer_of_the_train_step(tmp_path: Path) -> None:
    """tests/modes_standin plants a backward-only bug under capture_scalar_outputs: eval never meets it, train does.
    A dry-run nightly of eval and train files one tracking issue, train's, titled with its mode; its reproducer, run
    by the verify step in the stand-in's fresh interpreters, fails as filed in train (its eager and baseline checks
    run the same train step), and the same script rendered in eval runs clean. Under `[sweep] backend = "eager"`,
    whose train step the worker compiles through AOTAutograd as under `count` (Mode.compiles_under): the crash is
    isolated as AOTAutograd's and the maintainer's script names `aot_eager` and fails as filed (it named `eager`,
    whose backward nothing compiles, and passed). tests/test_train_eager_repro.py ran that nightly on its own."""
    from bot.pipeline import nightly
    from bot.settings import (AccuracySettings, ConfirmSettings, IssueSettings, NightlySettings, Settings,
                              SweepSettings, VerifySettings)
    from bot.verify.script import render_script
    from harness.engine.script_runner import run_script
    from state import db, links, runs, verdicts

    python = tmp_path / "python"     # the stand-in build's interpreter: reproducers run `python -I`, which would
    python.write_text(             # drop its PYTHONPATH; the stand-in is the build here, so `-I` becomes `-s`
        '#!/bin/sh\n[ "$1" = "-I" ] && { shift; set -- -s "$@"; }\n'
        f'PYTHONPATH="{STANDIN}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    settings = Settings(state_path=tmp_path / "state.sqlite", nightly=NightlySettings(configs=[CSO], canaries=[]),
                        sweep=SweepSettings(workers=1, modes=["eval", "train"], backend="eager"),
                        issues=IssueSettings(min_models=1), confirm=ConfirmSettings(runs=1),
                        verify=VerifySettings(shrink_budget=0), accuracy=AccuracySettings(enabled=False))
    conn = db.connect(settings.state_path)
    result = nightly.run_nightly(conn, settings, torch=str(python), models=[MODEL], dry_run=True,
                                 out_dir=tmp_path / "out", progress=False)
    evals, train = result.each
    assert (evals.mode, train.mode) == ("eval", "train") and evals.run_id != train.run_id
    assert runs.get_run(conn, train.run_id).options.sweep.mode == BUILTIN["train"]
    outcome = {o.config: o for o in runs.outcomes(conn, train.run_id)}[CSO]
    assert outcome.status == "error" and outcome.signature == PLANTED
    assert {o.status for o in runs.outcomes(conn, evals.run_id)} == {"ok"}
    # one tracking issue, train's: its key carries the mode, its title names it, its summary is train's own
    key = tracking_key(CSO, PLANTED, BUILTIN["train"])
    made = json.loads((tmp_path / "out" / "train" / "plan.json").read_text())
    created = {a["key"]: a for a in made["actions"] if a["action"] == "create"}
    assert created[key]["title"] == f"capture_scalar_outputs=True crashes 1/1 models in train with RuntimeError"
    assert summary_key(CSO, BUILTIN["train"]) in created
    eval_made = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert [a["key"] for a in eval_made["actions"] if a["action"] == "create"] == [summary_key(CSO)]
    # its reproducer: run by the verify step in fresh interpreters of the stand-in (eager and the baseline ran the
    # train step, the flag failed with the signature), and what it embeds runs the train step
    found = verdicts.for_run(conn, train.run_id)[(CSO, PLANTED)].verdict
    assert found.status == "confirmed" and found.mode == BUILTIN["train"].key, found.reason
    assert "MODE = types.SimpleNamespace" in found.script and '"phase": "train"' in found.script
    assert found.component.component == "aot_autograd"      # isolated: passes under eager, fails under aot_eager
    assert found.maintainer.backend == "aot_eager" and found.maintainer.status == "confirmed", found.maintainer
    assert 'backend="aot_eager"' in found.maintainer.script and "loss.backward()" in found.maintainer.script
    body = (tmp_path / "out" / "train" / created[key]["file"]).read_text()
    assert "loss.backward()" in body       # the maintainer's form of the train step, as the issue shows it
    built = runs.model_data(conn, train.run_id)[MODEL]
    flag = {"torch._dynamo.config.capture_scalar_outputs": True}
    clean = run_script(render_script(built, flag), str(python), timeout=600)      # the same model in eval
    assert clean.status == "ok", clean
    assert (tmp_path / "out" / "train" / "report.html").is_file() and (tmp_path / "out" / "report.html").is_file()
    conn.close()
