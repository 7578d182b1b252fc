"""The maintainer's script: what a person would write, rendered from a build's plain data.

Cheap checks (no compile): over every model of the default corpus, the script renders from the lock entry's
build data in at most 60 lines (40 typical), parses, and its input lines make tensors of the same names, shapes,
dtypes and literal values (prefixes, grids, token types) as the sweep's own inputs (harness/zoo/inputs.py). The
planner embeds a confirmed one as *the* reproducer, folds the harness script, shows the dynamic ablation and adds
`[issues] dynamic_label` when dynamic=False makes it pass.
"""
from __future__ import annotations

import ast
import statistics

import pytest

from bot.issues.context import PlanSettings
from bot.issues.keys import tracking_key
from bot.issues.plan import plan
from bot.verify import ablation, maintainer
from bot.verify.overrides import overrides
from harness.core.model_build import ModelBuild
from harness.engine.script_runner import ScriptResult
from harness.zoo.corpus import DEFAULT_CORPUS
from state.verdicts import Component, DynamicRun, Maintainer, RunVerdict, Verdict
from tests.fakegithub import scenario as sc
from tests.issueviews import NONE, inputs

CSO = "capture_scalar_outputs"
FLAG = {"torch._dynamo.config.capture_scalar_outputs": True, "torch._inductor.config.triton.cudagraphs": False}


def corpus_builds() -> dict[str, ModelBuild]:
    """What a worker stores per model of the default corpus (harness/engine/worker.py _repro_data), from the lock."""
    from harness.zoo.build import SEED, entry

    return {m: ModelBuild(m, entry(m)["config_class"], entry(m)["config"], entry(m)["spec"], SEED,
                          transformers_version="5.23.0") for m in DEFAULT_CORPUS}


def test_every_default_corpus_model_renders_in_at_most_60_lines_with_the_sweeps_inputs() -> None:
    import torch

    from harness.zoo.inputs import make_inputs

    counts = {}
    for model, built in corpus_builds().items():
        script = maintainer.render_script(built, overrides(built.config_class, built.config), FLAG, "eager",
                                          "E: boom")
        ast.parse(script)
        counts[model] = len(script.rstrip("\n").splitlines())
        assert "torch._dynamo.config.capture_scalar_outputs = True" in script
        assert "torch._inductor.config.triton.cudagraphs = False" in script
        assert 'torch.compile(model, backend="eager")' in script and "flagsweep" not in script
        theirs = make_inputs(built.spec, 0)
        ours = {name: eval(maintainer.input_expr(spec), {"torch": torch}) for name, spec in built.spec.items()}
        assert list(ours) == list(theirs)
        for name, value in theirs.items():
            assert (ours[name].shape, ours[name].dtype) == (value.shape, value.dtype), (model, name)
            spec = built.spec[name]
            if spec["kind"] in ("tensor", "typed", "ones", "zeros"):
                assert torch.equal(ours[name], value), (model, name)
            if spec["kind"] == "ids":
                fixed = sum(n for _, n in spec.get("prefix", []))
                assert torch.equal(ours[name][:, :fixed], value[:, :fixed]), (model, name)
                assert not torch.isin(ours[name][:, fixed:], torch.tensor(spec.get("avoid") or [-1])).any()
    assert max(counts.values()) <= 60, counts
    assert statistics.median(counts.values()) <= 40, counts


def test_a_config_is_written_as_its_non_default_fields_with_sub_configs_as_dicts() -> None:
    built = corpus_builds()["Qwen2VLForConditionalGeneration"]
    fields = overrides(built.config_class, built.config)
    # the sub-configs, and the special ids the zoo's vocabulary cap moved inside 1024 (harness.discovery.caps)
    moved = {"image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"}
    assert set(fields) == {"text_config", "vision_config", *moved} and fields["vision_config"]["depth"] == 2
    assert all(1000 <= fields[name] < 1024 for name in moved)
    import transformers

    from bot.verify.overrides import IGNORED

    def kept(config: dict) -> dict:
        return {k: kept(v) if isinstance(v, dict) and "model_type" in v else v for k, v in config.items()
                if k not in IGNORED}

    rebuilt = transformers.Qwen2VLConfig(**fields).to_dict()
    stored = transformers.Qwen2VLConfig.from_dict(built.config).to_dict()
    assert kept(rebuilt) == kept(stored)


def test_the_backend_named_follows_the_component() -> None:
    assert [maintainer.backend_for(c, "count") for c in ("dynamo", "aot_autograd", "inductor", None)] == [
        "eager", "aot_eager", "inductor", "eager"]
    assert maintainer.backend_for("undetermined", "inductor") == "inductor"


def _judged(results: dict[str, dict]) -> Maintainer:
    """ablation.judge over a twin driver answering each mode from `results` (the real driver: tests/test_maintainer_real.py)."""
    return ablation.judge("import torch\n", "eager", "E: boom", "python", 60, drive=lambda s, p, t, mode: results[mode])


def test_the_oracle_keeps_a_script_only_when_eager_runs_and_compiled_fails_the_same_way() -> None:
    ok, boom, other = ScriptResult(status="ok"), ScriptResult(status="error", signature="E: boom"), ScriptResult(status="error", signature="F")
    kept = _judged({"eager": ok, "None": boom, "False": ok, "True": other})
    assert kept.status == "confirmed" and [(r.dynamic, r.result) for r in kept.runs] == [
        ("None", "fails"), ("False", "passes"), ("True", "other")] and kept.static_passes
    bad_eager = _judged({"eager": ScriptResult(status="error", signature="RuntimeError: split_with_sizes")})
    assert bad_eager.status == "unconfirmed" and bad_eager.reason.startswith("eager failed") and not bad_eager.runs
    drifted = _judged({"eager": ok, "None": other})
    assert drifted.status == "unconfirmed" and "another signature: F" in drifted.reason and len(drifted.runs) == 1


def _body_and_labels(m: Maintainer | None, label: str = "module: dynamic shapes") -> tuple[str, list[str]]:
    v = Verdict(CSO, sc.SIG_A, "Model00ForCausalLM", "fp", "2.13.0", "abc", "confirmed", script="# HARNESS\n",
                torch_version="2.13.0", maintainer=m)
    comp = Component("dynamo", "count", True)
    done = plan(inputs(sc.corpus(), verdicts=[RunVerdict(CSO, sc.SIG_A, v, comp)]), NONE,
                PlanSettings(dynamic_label=label))
    action = next(a for a in done.actions if a.key == tracking_key(CSO, sc.SIG_A))
    return action.body, action.labels


SCRIPT = "import torch\nimport transformers\n# the maintainer's script\n"


def test_the_issue_embeds_the_maintainers_script_and_its_dynamic_ablation() -> None:
    m = Maintainer(SCRIPT, "eager", "confirmed", "", (DynamicRun("None", "fails", "E"), DynamicRun("False", "passes"),
                                                     DynamicRun("True", "fails", "E")))
    body, labels = _body_and_labels(m)
    assert "```python\n" + SCRIPT.rstrip("\n") + "\n```" in body and "(3 lines)" in body
    assert "# HARNESS" not in body and "left out of this issue to keep it to one screen" in body   # one script shown
    assert "| `eager` | fails | passes | fails |" in body and "With `dynamic=False` it passes" in body
    assert "`TORCH_TRACE=./trace python repro.py`, then `tlparse ./trace`" in body
    assert "module: dynamic shapes" in labels
    assert "module: dynamic shapes" not in _body_and_labels(m, label="")[1]          # "" adds none
    still = Maintainer(SCRIPT, "eager", "confirmed", "", (DynamicRun("None", "fails", "E"),
                                                         DynamicRun("False", "fails", "E"), DynamicRun("True", "fails")))
    body, labels = _body_and_labels(still)
    assert "With `dynamic=False` it still fails" in body and "module: dynamic shapes" not in labels


def test_a_maintainers_script_the_oracle_refused_is_not_embedded_and_says_why() -> None:
    m = Maintainer("import torch\n# refused\n", "eager", "unconfirmed", "eager failed: the script fails without torch.compile (RuntimeError: x)")
    body, labels = _body_and_labels(m)
    assert "# refused" not in body and "eager failed: the script fails without torch.compile" in body
    assert "The harness script below is the verified reproducer" in body and "# HARNESS" in body
    assert "dynamic=False" not in body and "module: dynamic shapes" not in labels


@pytest.mark.parametrize("value,ok", [("module: dynamic shapes", True), ("", True), (" x", False), ("a,b", False)])
def test_the_dynamic_label_setting_refuses_bad_values_in_one_line(tmp_path, value, ok) -> None:
    from bot.settings import SettingsError, load

    path = tmp_path / "s.toml"
    path.write_text(f'[issues]\ndynamic_label = "{value}"\n')
    if ok:
        assert load(str(path)).issues.dynamic_label == value
    else:
        with pytest.raises(SettingsError, match="dynamic_label"):
            load(str(path))
