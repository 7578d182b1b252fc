"""Settings: the example file loads, bad values are named, secrets come from the environment only."""
import dataclasses
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


@pytest.mark.parametrize("text,named", [
    ('source = "/etc/elsewhere.toml"\n', r"unknown setting 'source'"),
    ("raw = 1\n", r"unknown setting 'raw'"),
    ("[commands]\nrate_limit = -1\n", r"commands\.rate_limit: must be 1 to 1000 commands an hour, got -1$"),
    ("[commands]\nmax_models = 0\n", r"commands\.max_models: must be 1 to 10000 models, got 0$"),
    ('[commands]\nmin_permission = "god"\n', r"commands\.min_permission: must be none or read .*, got 'god'$"),
    ('[commands]\nhandle = ""\n', r"commands\.handle: must be @ and a GitHub login, got ''$"),
    ("[github]\nmax_retries = -3\n", r"github\.max_retries: must be 0 to 20 retries, got -3$"),
    ("[github]\nrequest_timeout = 0\n", r"github\.request_timeout: must be 1 to 600 seconds, got 0$"),
    ("[github]\nmax_wait = nan\n", r"github\.max_wait: must be a finite number, got nan$"),
    ("[nightly]\ninstall_timeout = -5\n", r"nightly\.install_timeout: must be more than 0 seconds, got -5\.0$"),
    ("[scheduler]\nshutdown_grace = nan\n", r"scheduler\.shutdown_grace: must be a finite number, got nan$"),
    ("[sweep]\ntimeout = inf\n", r"sweep\.timeout: must be a finite number, got inf$"),
    ("[webhook]\ndrain_limit = 0\n", r"webhook\.drain_limit: must be max_body or more, got 0$"),
    ("[webhook]\nreserve = 200\n", r"webhook\.reserve: must be less than max_connections, got 200$"),
])
def test_each_refused_value_is_one_line_naming_section_field_and_value(tmp_path, text, named):
    bad = tmp_path / "s.toml"
    bad.write_text(text)
    with pytest.raises(settings.SettingsError, match=named) as refused:
        settings.load(bad, env={})
    assert str(refused.value).startswith(str(bad)) and "\n" not in str(refused.value)


def _leaves(obj, prefix=""):
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            yield from _leaves(value, f"{f.name}.")
        else:
            yield prefix + f.name


def test_every_field_but_the_internal_ones_has_a_row_in_the_one_table():
    assert set(_leaves(settings.Settings())) - set(settings.FIELDS) == {"source", "routing"}
    assert set(settings.FIELDS) <= set(_leaves(settings.Settings()))
    # The defaults pass their own rows.
    for name, (test, _) in settings.FIELDS.items():
        section, _, key = name.rpartition(".")
        value = getattr(getattr(settings.Settings(), section) if section else settings.Settings(), key)
        assert value is None or test(value), name
