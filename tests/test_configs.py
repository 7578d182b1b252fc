"""Config catalog, KEY=VALUE parsing and validation against the real torch config modules."""
import json
import subprocess
import sys

import pytest

from harness.engine.configs import (BUILTIN, ConfigError, check, judge, load_catalog, parse_setting, probe, select,
                             validate_all)
from harness.engine.pool import PROJECT_ROOT


def test_builtins():
    cat = load_catalog(None)
    assert cat["baseline"] == {}
    assert cat["capture_scalar_outputs"] == {"torch._dynamo.config.capture_scalar_outputs": True}
    assert cat["capture_dynamic_output_shape_ops"] == {"torch._dynamo.config.capture_dynamic_output_shape_ops": True}
    assert cat == BUILTIN and cat is not BUILTIN


def test_toml_catalog_quoted_and_dotted_keys(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[configs.no_cache]\n"torch._dynamo.config.recompile_limit" = 1\n'
                 '[configs.both]\ntorch._dynamo.config.capture_scalar_outputs = true\n'
                 'torch._inductor.config.triton.cudagraphs = false\n')
    cat = load_catalog(str(f))
    assert cat["no_cache"] == {"torch._dynamo.config.recompile_limit": 1}
    assert cat["both"] == {"torch._dynamo.config.capture_scalar_outputs": True,
                           "torch._inductor.config.triton.cudagraphs": False}


def test_bad_catalog_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_catalog(str(tmp_path / "missing.toml"))
    f = tmp_path / "bad.toml"
    f.write_text("[configs.baseline]\n\"torch._dynamo.config.verbose\" = true\n")
    with pytest.raises(ConfigError, match="baseline"):
        load_catalog(str(f))


def test_select_unknown_config_has_close_matches():
    with pytest.raises(ConfigError, match="did you mean capture_scalar_outputs"):
        select(BUILTIN, ["capture_scalar_output"])
    assert list(select(BUILTIN, ["capture_dynamic_output_shape_ops"])) == ["baseline", "capture_dynamic_output_shape_ops"]


@pytest.mark.parametrize("text,expected", [
    ("torch._dynamo.config.capture_scalar_outputs=true", ("torch._dynamo.config.capture_scalar_outputs", True)),
    ("torch._dynamo.config.recompile_limit=4", ("torch._dynamo.config.recompile_limit", 4)),
    ("torch._inductor.config.cpp.simdlen=None", ("torch._inductor.config.cpp.simdlen", None)),
    ("torch.compiler.config.job_id=abc", ("torch.compiler.config.job_id", "abc")),
])
def test_parse_setting(text, expected):
    assert parse_setting(text) == expected


def test_parse_setting_needs_an_equals_sign():
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_setting("torch._dynamo.config.verbose")


# Every key the verdict tests below use, probed once in a subprocess of this venv's torch.
KEYS = ["torch._dynamo.config.capture_scalar_outputs", "torch._dynamo.config.capture_scalar_output",
        "torch._dynamo.config.recompile_limit", "torch._inductor.config.max_autotune",
        "torch.fx.experimental._config.soft_pending_unbacked_not_found_error", "torch.compiler.config.job_id",
        "torch._dynamo.config.verbose", "torch._dynamo.config.verbos", "torch._inductor.config.triton.cudagraphs",
        "torch._inductor.config.triton", "torch._dynamo.config.no_such_flag",
        "torch._inductor.config.partitioned_scatter_memory_budget"]


@pytest.fixture(scope="module")
def reports():
    return probe(KEYS)


def test_probe_reports_present_with_type_missing_with_hints_and_groups_as_malformed(reports):
    assert reports["torch._dynamo.config.capture_scalar_outputs"] == {"status": "present", "type": "bool",
                                                                      "current": "bool"}
    assert reports["torch._dynamo.config.recompile_limit"] == {"status": "present", "type": "int", "current": "int"}
    assert reports["torch._inductor.config.triton.cudagraphs"] == {"status": "present", "type": "bool",
                                                                   "current": "bool"}
    assert reports["torch._dynamo.config.no_such_flag"] == {"status": "missing", "close": []}
    assert "torch._dynamo.config.capture_scalar_outputs" in reports["torch._dynamo.config.capture_scalar_output"]["close"]
    assert reports["torch._inductor.config.triton"]["status"] == "malformed"
    # Gone in 2.14.1; tests/test_config_unavailable.py removes it from a stand-in torch.
    assert reports["torch._inductor.config.partitioned_scatter_memory_budget"]["type"] == "float"


def test_a_missing_key_makes_its_config_unavailable_not_an_error(reports):
    checked = judge({"baseline": {}, "good": {"torch._dynamo.config.verbose": True},
                     "typo": {"torch._dynamo.config.capture_scalar_output": True}}, {}, reports)
    assert list(checked.configs) == ["baseline", "good"]
    assert checked.unavailable == {"typo": {"settings": {"torch._dynamo.config.capture_scalar_output": True},
                                            "missing": ["torch._dynamo.config.capture_scalar_output"]}}
    (line,) = checked.describe()
    assert "'typo' is unavailable" in line and "did you mean torch._dynamo.config.capture_scalar_outputs" in line


def test_a_missing_base_setting_is_an_error(reports):
    with pytest.raises(ConfigError, match=r"^--base-setting: unknown setting .*did you mean"):
        judge({"baseline": {}}, {"torch._dynamo.config.capture_scalar_output": True}, reports)


def test_wrong_type_is_an_error_even_beside_a_missing_key(reports):
    with pytest.raises(ConfigError, match="^bad: 'torch._dynamo.config.capture_scalar_outputs': expected bool, got int"):
        judge({"bad": {"torch._dynamo.config.capture_scalar_outputs": 1,
                       "torch._dynamo.config.no_such_flag": True}}, {}, reports)
    with pytest.raises(ConfigError, match="expected int, got str"):
        judge({}, {"torch._dynamo.config.recompile_limit": "many"}, reports)
    with pytest.raises(ConfigError, match="group of settings"):
        judge({"grp": {"torch._inductor.config.triton": True}}, {}, reports)


def test_every_allowed_module_and_a_nested_key_pass(reports):
    checked = judge({"all": {"torch._dynamo.config.capture_scalar_outputs": True,
                             "torch._inductor.config.max_autotune": False,
                             "torch.fx.experimental._config.soft_pending_unbacked_not_found_error": True,
                             "torch.compiler.config.job_id": "x",
                             "torch._inductor.config.triton.cudagraphs": True}}, {}, reports)
    assert list(checked.configs) == ["all"] and not checked.unavailable


def test_key_outside_the_allowed_modules():
    with pytest.raises(ConfigError, match="not under one of"):
        check({"x": {"torch.backends.cudnn.enabled": True}}, {})


@pytest.mark.parametrize("key", [
    "torch._dynamo.config.verbose\nimport os; os.system('touch pwned')\n#",
    "torch._dynamo.config.verbose; import os",
    "torch._dynamo.config.verbose ",
    "torch._dynamo.config.ver bose",
    "torch._dynamo.config.__import__('os')",
    "torch._dynamo.config..verbose",
    "torch._dynamo.config.1verbose",
    "torch._dynamo.config.import",
    "torch._dynamo.config.vérbose",
])
def test_keys_that_are_not_dotted_identifiers_are_refused_everywhere(tmp_path, key):
    with pytest.raises(ConfigError, match="dotted Python identifiers"):
        check({"x": {key: True}}, {})
    with pytest.raises(ConfigError, match="dotted Python identifiers"):
        parse_setting(f"{key}=true" if key == key.strip() else f"{key}x=true")   # KEY=VALUE trims its ends
    f = tmp_path / "c.toml"
    f.write_text(f"[configs.evil]\n{json.dumps(key)} = true\n")
    with pytest.raises(ConfigError, match="config 'evil': .*dotted Python identifiers"):
        load_catalog(str(f))


@pytest.mark.parametrize("toml_value", ["1979-05-27T07:32:00Z", "[{ a = 1 }]", "07:32:00", "[1, 1979-05-27]"])
def test_values_that_are_not_scalars_or_lists_are_refused(tmp_path, toml_value):
    f = tmp_path / "c.toml"
    f.write_text(f'[configs.odd]\n"torch._dynamo.config.recompile_limit" = {toml_value}\n')
    with pytest.raises(ConfigError, match="values are booleans, numbers, strings, null or lists"):
        load_catalog(str(f))


def test_command_line_values_are_scalars_or_lists():
    assert parse_setting('torch._dynamo.config.x=[1, "a", null]') == ("torch._dynamo.config.x", [1, "a", None])
    with pytest.raises(ConfigError, match="values are"):
        parse_setting('torch._dynamo.config.x={"a": 1}')


def test_an_explicit_single_request_refuses_an_unavailable_config(monkeypatch, reports):
    # validate_all (repro, one config asked for by name): unavailable is an error there, with the hint.
    import harness.engine.configs as configs_mod

    monkeypatch.setattr(configs_mod, "probe", lambda keys, python=None: reports)
    with pytest.raises(ConfigError, match="^config 'bad' is unavailable in this torch: unknown setting"):
        validate_all({"baseline": {}, "good": {"torch._dynamo.config.verbose": True},
                      "bad": {"torch._dynamo.config.verbos": True}}, {})


def test_the_check_never_imports_torch_in_the_caller():
    # The paths this check sits on (engine, nightly, command handlers, publisher identity) stay torch-free.
    code = ("import sys; from harness.engine import configs, engine; import bot.pipeline.nightly, bot.commands.handlers, bot.github.client; "
            "c = engine.check_configs({'a': {'torch._dynamo.config.verbose': True}}, {}, sys.executable); "
            "print(list(c.configs), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(PROJECT_ROOT)).stdout
    assert out.split() == ["['a']", "False"]


def test_an_interpreter_that_cannot_be_run_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot run it"):
        check({"a": {"torch._dynamo.config.verbose": True}}, {}, str(tmp_path / "nope"))


def test_a_nested_key_is_applied_by_the_workers_patch():
    import torch._inductor.config as inductor

    from harness.engine.backend import patched

    before = inductor.triton.cudagraphs
    with patched({"torch._inductor.config.triton.cudagraphs": not before}):
        assert inductor.triton.cudagraphs is (not before)
    assert inductor.triton.cudagraphs is before


def test_an_interpreter_without_torch_is_a_clear_error_not_every_key_missing(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    with pytest.raises(ConfigError, match="could not check settings there: .*No module named 'torch'"):
        check({"a": {"torch._dynamo.config.verbose": True}}, {}, str(tmp_path / "bare" / "bin" / "python"))
