"""Config catalog, KEY=VALUE parsing and validation against the real torch config modules."""
import sys

import pytest

from harness.configs import BUILTIN, ConfigError, load_catalog, parse_setting, select, validate, validate_all


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
    validate(cat["both"])
    validate(cat["no_cache"])


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


def test_unknown_key_suggests_close_match():
    with pytest.raises(ConfigError, match=r"did you mean torch\._dynamo\.config\.capture_scalar_outputs"):
        validate({"torch._dynamo.config.capture_scalar_output": True})


def test_wrong_type_is_an_error():
    with pytest.raises(ConfigError, match="expected bool, got int"):
        validate({"torch._dynamo.config.capture_scalar_outputs": 1})
    with pytest.raises(ConfigError, match="expected int, got str"):
        validate({"torch._dynamo.config.recompile_limit": "many"})


def test_key_outside_the_allowed_modules():
    with pytest.raises(ConfigError, match="not under one of"):
        validate({"torch.backends.cudnn.enabled": True})


def test_every_allowed_module_validates():
    validate({"torch._dynamo.config.capture_scalar_outputs": True, "torch._inductor.config.max_autotune": False,
              "torch.fx.experimental._config.soft_pending_unbacked_not_found_error": True,
              "torch.compiler.config.job_id": "x"})


def test_validate_all_names_the_config_at_fault():
    configs = {"baseline": {}, "good": {"torch._dynamo.config.verbose": True},
               "bad": {"torch._dynamo.config.verbos": True}}
    with pytest.raises(ConfigError, match="^bad: unknown setting"):
        validate_all(configs, {})


def test_validate_inside_another_interpreter():
    # --python: the check runs in that interpreter's torch (here the same venv, as a subprocess).
    validate({"torch._dynamo.config.capture_scalar_outputs": True}, python=sys.executable)
    with pytest.raises(ConfigError, match="did you mean"):
        validate({"torch._dynamo.config.capture_scalar_outputz": True}, python=sys.executable)
