"""Nothing foreign becomes code (issue 38): every script template rendered with every field set to hostile text
parses to the same statements, on as many lines, as with plain text; names that are not names and outputs that
are not output paths are refused; a raw value printed by a script template is an error. Pure rendering: no run.
"""
from __future__ import annotations

import ast
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import pytest

from bot.text import render as render_mod
from bot.text.render import render
from bot.text.scripts import RawValue, ScriptValueError, comment, python_literal, shell_word
from bot.verify import maintainer
from bot.verify.script import HARNESS, module_source, render_script
from bot.verify.wrong_script import Case, render_wrong
from harness.core.calls import SCENARIOS
from harness.core.model_build import ModelBuild
from harness.core.modes import BUILTIN
from harness.core.record import RecordError
from tests import accuracy_models as am

# Newlines of every kind, quotes of every kind, `#`, `"""`, jinja2's own syntax, and an encoding declaration that
# would turn the rest of a first-lines comment into code (PEP 263: `+AAo-` is a newline in UTF-7).
HOSTILE = ('x\n"""\'\'\'#{{ y }}{% if 1 %}\r\nimport os; os.system("echo pwned") #\\\x0c\x85\u2028'
           ' -*- coding: utf-7 -*- +AAo-print(1)')
PLAIN = "plain"
KEY = "plain key"            # a config key that is no Python name, as the hostile one is not (the same code form)


def _build(v: str) -> ModelBuild:
    config = {**am.CONFIG, "note": v, KEY: v, "nested": {"a": v, KEY: [v, 1]}}
    spec = {**am.SPEC, "extra": {"kind": "value", "value": v}, "odd name": {"kind": "value", "value": [v]}}
    return ModelBuild("TinyLM", "TinyLMConfig", config, spec, 0, v, v)


def _settings(v: str) -> dict[str, Any]:
    return {"torch._dynamo.config.capture_scalar_outputs": True, "torch._dynamo.config.note": v,
            "torch._inductor.config.other": [v]}


def _case(v: str, scenario: str) -> Case:
    return Case(f"wrong_result: {scenario}: logits", _settings(v), {"torch._dynamo.config.note": v + "!"}, v, v,
                1e-3, 1e-3)


_SIGNATURES = module_source(HARNESS / "core" / "signature.py")

# Every script template, with every way the bot renders it; each takes the text every foreign field is set to.
RENDERS: dict[str, list[Callable[[str], str]]] = {
    "repro_script.py.j2": [lambda v: render_script(_build(v), _settings(v), backend=v, device=v,
                                                   baseline={"torch._dynamo.config.note": v})],
    "repro_wrong.py.j2": [lambda v, s=s, b=b: render_wrong(_build(v), _case(v, s), baseline=b)
                          for s in SCENARIOS for b in (False, True)],
    "maintainer_script.py.j2": [lambda v: maintainer.render_script(
        _build(v), {"note": v, KEY: v, "nested": {"a": v, KEY: v}}, _settings(v), v, v, device=v)],
    # a mode's lines (bot.verify.maintainer.mode_lines), in both scripts that write them
    "mode_lines.py.j2": [f(m) for m in ("train-bf16", "dynamic-marked", "dynamic-true", "sdpa") for f in (
        lambda m: lambda v: maintainer.render_script(_build(v), {"note": v}, _settings(v), v, v, device=v,
                                                     mode=BUILTIN[m]),
        lambda m: lambda v: render_wrong(_build(v), replace(_case(v, "first"), mode=BUILTIN[m],
                                                            signature="wrong_result: first: output.logits")))],
    "wrong_driver.py.j2": [lambda v: render("wrong_driver.py.j2", mismatch=v, signature_source=_SIGNATURES)],
    "maintainer_driver.py.j2": [lambda v: render("maintainer_driver.py.j2", signature_source=_SIGNATURES)],
}


class _Constants(ast.NodeTransformer):
    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        return ast.copy_location(ast.Constant(value=None), node)


def _statements(script: str) -> str:
    """The script's code as Python reads its bytes (an encoding declaration honoured), every constant blanked."""
    return ast.dump(_Constants().visit(ast.parse(script.encode("utf-8"))))


def test_every_script_template_is_rendered_here() -> None:
    names = {p.name for p in render_mod.TEMPLATE_DIR.glob(f"*{render_mod.SCRIPT}")}
    assert names == set(RENDERS), "a script template without a hostile-values case here"


@pytest.mark.parametrize("name, index", [(n, i) for n, fns in RENDERS.items() for i in range(len(fns))])
def test_hostile_text_in_every_field_parses_to_the_same_statements_as_plain_text(name: str, index: int) -> None:
    plain, hostile = RENDERS[name][index](PLAIN), RENDERS[name][index](HOSTILE)
    assert _statements(hostile) == _statements(plain)
    assert len(hostile.splitlines()) == len(plain.splitlines()) and "\nimport os; os.system" not in hostile
    # and the text went in: each hostile script holds it (escaped), as code or comment
    assert "pwned" in hostile or name == "maintainer_driver.py.j2"


def test_a_name_that_is_no_name_a_setting_key_that_is_no_key_and_an_output_that_is_no_path_are_refused() -> None:
    bad = ModelBuild("TinyLM(config)\nimport os\nx = TinyLM", "TinyLMConfig", dict(am.CONFIG), am.SPEC, 0)
    with pytest.raises(ScriptValueError, match="is not a Python name"):
        render_wrong(bad, _case(PLAIN, "first"))
    with pytest.raises(ScriptValueError, match="is not a Python name"):
        maintainer.render_script(bad, {}, {}, "eager", "E: boom")
    with pytest.raises(ScriptValueError, match="is not a dotted Python name"):
        maintainer.render_script(_build(PLAIN), {}, {"torch._dynamo.config.x = 1\nimport os #": 1}, "eager", "E")
    output = "logits\nimport os; os.system('echo pwned') #"
    with pytest.raises(RecordError, match="is not an output path"):
        render_wrong(_build(PLAIN), Case(f"wrong_result: first: {output}", {}, {}, "eager", "cpu", 1e-3, 1e-3))


def test_a_script_template_refuses_a_value_no_helper_made_safe() -> None:
    """The script environment's finalize: a forgotten filter (or a line built without the helpers) fails loudly."""
    with pytest.raises(RawValue, match="raw str"):
        render("maintainer_driver.py.j2", signature_source="print('not ours')")
    assert "tojson" not in render_mod.script_environment().filters


def test_each_context_helper_keeps_its_value_whole() -> None:
    for value in (HOSTILE, "", "'", '"', "\\", 1.5, float("inf"), None, [HOSTILE, {"k": True}], {HOSTILE: 2}):
        assert eval(python_literal(value)) == value                  # noqa: S307 - our own literal, read back
    assert "\n" not in comment(HOSTILE) and "coding:" not in comment(HOSTILE)
    assert shlex.split(f"python {shell_word(HOSTILE)} x") == ["python", HOSTILE, "x"]
    with pytest.raises(ScriptValueError):
        python_literal(Path("/"))
