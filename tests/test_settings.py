"""Settings: the example file loads, bad values are named, secrets come from the environment only."""
from pathlib import Path

import pytest

from bot.issues import routing
from bot import settings

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


def test_service_retry_and_webhook_limits_are_checked(tmp_path):
    s = settings.load(ROOT / "flagsweep.example.toml", env={"HOME": "/nonexistent"})
    assert s.commands.retry_for == 3600.0 and s.commands.retry_backoff == 30.0 and s.webhook.max_body == 1_000_000
    bad = tmp_path / "s.toml"
    for text, named in [("[commands]\nretry_for = -1\n", r"commands\.retry_for: must be 0 or more seconds, got -1\.0"),
                        ("[commands]\nretry_backoff = 0\n", r"commands\.retry_backoff: must be more than 0 seconds"),
                        ('[commands]\nretry_for = "1h"\n', r"commands\.retry_for: expected float"),
                        ("[scheduler]\nstuck_after = 0\n", r"scheduler\.stuck_after: must be more than 0"),
                        ("[webhook]\nmax_headers = 0\n", r"webhook\.max_headers: must be at least 1"),
                        ("[webhook]\nread_timeout = 0\n", r"webhook\.read_timeout: must be more than 0")]:
        bad.write_text(text)
        with pytest.raises(settings.SettingsError, match=named):
            settings.load(bad, env={})
