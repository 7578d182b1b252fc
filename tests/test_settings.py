"""Settings: the example file loads, bad values are named, secrets come from the environment only."""
from pathlib import Path

import pytest

from bot import routing, settings

ROOT = Path(__file__).resolve().parent.parent


def test_example_settings_file_loads_and_its_routing_compiles():
    s = settings.load(ROOT / "flagsweep.example.toml", env={"HOME": "/nonexistent"})
    assert s.github.repo == "my-org/compile-triage"
    assert s.issues.verify_nightlies == 2
    assert s.sweep.timeout == 300.0
    rules = routing.compile_rules(s.routing, s.source)
    decided = routing.route(rules, "PendingUnbackedSymbolNotFound: Pending unbacked symbols {uN}", None, None)
    assert decided.cc == ["some-dynamic-shapes-owner"]
    assert decided.labels == ["module: dynamic shapes"]


def test_unknown_setting_and_wrong_type_are_named(tmp_path):
    bad = tmp_path / "s.toml"
    bad.write_text("[sweep]\nworkerz = 2\n")
    with pytest.raises(settings.SettingsError, match="workerz"):
        settings.load(bad, env={})
    bad.write_text('[sweep]\nworkers = "two"\n')
    with pytest.raises(settings.SettingsError, match=r"sweep\.workers: expected int"):
        settings.load(bad, env={})


def test_secrets_and_state_come_from_the_environment(tmp_path):
    env = {"HOME": str(tmp_path), "FLAGSWEEP_GITHUB_TOKEN": "t0k", "FLAGSWEEP_WEBHOOK_SECRET": "s3",
           "FLAGSWEEP_STATE": str(tmp_path / "x.sqlite")}
    s = settings.load(None, env=env)
    assert s.github.token == "t0k" and s.github.has_credentials
    assert s.webhook.secret == "s3"
    assert s.state_path == tmp_path / "x.sqlite"
    assert not settings.load(None, env={"HOME": str(tmp_path)}).github.has_credentials
