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
    ("[commands]\nrate_limit = -1\n", r"commands\.rate_limit: must be 1 to 1000 units an hour, got -1$"),
    ("[commands]\nmax_models = 0\n", r"commands\.max_models: must be 1 to 10000 models, got 0$"),
    ("[commands]\nmax_per_comment = 0\n", r"commands\.max_per_comment: must be 1 to 100 commands a comment, got 0$"),
    ('[commands]\nmin_permission = "god"\n', r"commands\.min_permission: must be none or read .*, got 'god'$"),
    ('[commands]\nhandle = ""\n', r"commands\.handle: must be @ and a GitHub login, got ''$"),
    ("[github]\nmax_retries = -3\n", r"github\.max_retries: must be 0 to 20 retries, got -3$"),
    ("[github]\nrequest_timeout = 0\n", r"github\.request_timeout: must be 1 to 600 seconds, got 0$"),
    ("[github]\nmax_wait = nan\n", r"github\.max_wait: must be a finite number, got nan$"),
    ("[nightly]\ninstall_timeout = -5\n", r"nightly\.install_timeout: must be more than 0 seconds, got -5\.0$"),
    ("[scheduler]\nshutdown_grace = nan\n", r"scheduler\.shutdown_grace: must be a finite number, got nan$"),
    ("[sweep]\ntimeout = inf\n", r"sweep\.timeout: must be a finite number, got inf$"),
    ("[webhook]\ndrain_limit = 0\n", r"webhook\.drain_limit: must be max_body or more, got 0$"),
    ("[webhook]\nreserve = 200\n", r"webhook\.reserve: must be less than max_connections, got 200$"),    # issue 31: GitHub splits a label filter on commas, so the kill switch would never find the label
    ('[issues]\npause_label = "flagsweep, pause"\n', r"issues\.pause_label: must be a label name without commas"),
    ('[issues]\npause_label = " "\n', r"issues\.pause_label: must be a label name"),
    # issue 31: the gate looks a canary up by its exact name; a glob would sweep the model and fail the gate
    ('[nightly]\ncanaries = ["GPT2*"]\n', r"nightly\.canaries: must be a list of model class names \(no globs"),
    ('[nightly]\ncanaries = ["*"]\n', r"nightly\.canaries: must be a list of model class names \(no globs"),
    # issue 31: no configs would sweep only the baseline every night
    ("[nightly]\nconfigs = []\n", r"nightly\.configs: must be a list of at least one non-empty name, got \[\]$"),
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


def test_every_field_but_the_internal_ones_declares_its_check_and_the_defaults_pass_it():
    declared = settings.checks()
    assert set(_leaves(settings.Settings())) - set(declared) == {"source", "routing", "modes"}
    assert set(declared) <= set(_leaves(settings.Settings()))
    for name, check in declared.items():
        section, _, key = name.rpartition(".")
        value = getattr(getattr(settings.Settings(), section) if section else settings.Settings(), key)
        assert value is None or check.passes(value), name


@pytest.mark.parametrize("text,named", [
    ("[verify]\nshrink_budget = -1\n", r"verify\.shrink_budget: must be 0 or more seconds \(0: no shrinking\), got -1\.0$"),
    ("[verify]\ntimeout = 0\n", r"verify\.timeout: must be more than 0 seconds, got 0\.0$"),
    ("[confirm]\nruns = 21\n", r"confirm\.runs: must be 0 to 20 re-runs, got 21$"),
    ("[ranges]\ninstalls = 65\n", r"ranges\.installs: must be 0 to 64 installs \(0: no range search\), got 65$"),
    ('[verify]\nenabled = "yes"\n', r"verify\.enabled: expected bool"),
    ("[accuracy]\nrtol = 0\n", r"accuracy\.rtol: must be a positive number \(a tolerance\), got 0\.0$"),
    ("[accuracy]\natol = -1e-3\n", r"accuracy\.atol: must be a positive number \(a tolerance\), got -0\.001$"),
    ('[accuracy]\nrtol = "small"\n', r"accuracy\.rtol: expected float"),
    ("[accuracy]\natol = nan\n", r"accuracy\.atol: must be a finite number"),
    ("[accuracy]\nenabled = 1\n", r"accuracy\.enabled: expected bool"),
])
def test_the_feature_sections_check_their_fields(tmp_path, text, named):
    bad = tmp_path / "s.toml"
    bad.write_text(text)
    with pytest.raises(settings.SettingsError, match=named):
        settings.load(bad, env={})


OLD_AND_NEW = [("issues", "verify_reproducers", "false", "verify", "enabled", False),
               ("issues", "repro_timeout", "60", "verify", "timeout", 60.0),
               ("issues", "shrink_budget", "0", "verify", "shrink_budget", 0.0),
               ("sweep", "confirm_runs", "0", "confirm", "runs", 0),
               ("nightly", "range_installs", "3", "ranges", "installs", 3)]


@pytest.mark.parametrize("old_section,old_key,text,new_section,new_key,value", OLD_AND_NEW)
def test_an_old_key_still_works_and_warns_once_naming_the_new_one(tmp_path, caplog, old_section, old_key, text,
                                                                   new_section, new_key, value):
    conf = tmp_path / "s.toml"
    conf.write_text(f"[{old_section}]\n{old_key} = {text}\n")
    with caplog.at_level("WARNING", logger="bot.settings"):
        loaded = settings.load(conf, env={})
    assert getattr(getattr(loaded, new_section), new_key) == value
    assert getattr(getattr(settings.load(None, env={}), new_section), new_key) != value   # a real change
    assert [r.getMessage() for r in caplog.records] == [
        f"settings: [{old_section}] {old_key} is deprecated; use [{new_section}] {new_key}"]
    conf.write_text(f"[{new_section}]\n{new_key} = {text}\n")
    caplog.clear()
    with caplog.at_level("WARNING", logger="bot.settings"):
        assert getattr(getattr(settings.load(conf, env={}), new_section), new_key) == value
    assert caplog.records == []


@pytest.mark.parametrize("old_section,old_key,text,new_section,new_key,value", OLD_AND_NEW)
def test_an_old_key_and_its_new_one_together_are_refused(tmp_path, old_section, old_key, text, new_section,
                                                         new_key, value):
    conf = tmp_path / "s.toml"
    conf.write_text(f"[{old_section}]\n{old_key} = {text}\n[{new_section}]\n{new_key} = {text}\n")
    with pytest.raises(settings.SettingsError, match=rf"\[{old_section}\] {old_key} and \[{new_section}\] {new_key} "
                                                     r"are the same setting"):
        settings.load(conf, env={})


def test_an_old_key_with_a_bad_value_is_refused(tmp_path):
    conf = tmp_path / "s.toml"
    conf.write_text("[issues]\nshrink_budget = -1\n")
    with pytest.raises(settings.SettingsError, match=r"shrink_budget: must be 0 or more seconds"):
        settings.load(conf, env={})


def test_loaded_settings_are_frozen(tmp_path):
    loaded = settings.load(ROOT / "flagsweep.example.toml", env={"HOME": "/nonexistent"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        loaded.verify.shrink_budget = 0           # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        loaded.state_path = tmp_path              # type: ignore[misc]
    changed = dataclasses.replace(loaded, verify=dataclasses.replace(loaded.verify, shrink_budget=0.0))
    assert changed.verify.shrink_budget == 0.0 and loaded.verify.shrink_budget == 150.0


def test_path_settings_are_absolute_after_load_and_names_stay_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))      # what `~` expands to (os.path.expanduser reads it)
    conf = tmp_path / "conf" / "s.toml"
    conf.parent.mkdir()
    conf.write_text('state_path = "data/st.sqlite"\n[sweep]\npython = "venv/bin/python"\nconfig_file = "c.toml"\n'
                    '[nightly]\nvenv_dir = "../venvs"\n[github]\nprivate_key_path = "~/app.pem"\n'
                    '[zoo]\ncache_dir = "cache"\n')
    loaded = settings.load(conf, env={"HOME": str(tmp_path)})
    assert loaded.state_path == tmp_path / "data" / "st.sqlite"      # from the current directory, not the file's
    assert loaded.sweep.python == str(tmp_path / "venv" / "bin" / "python")
    assert loaded.sweep.config_file == str(tmp_path / "c.toml")
    assert loaded.nightly.venv_dir == str(tmp_path.parent / "venvs")
    assert loaded.github.private_key_path == str(tmp_path / "app.pem")
    assert loaded.zoo.cache_dir == str(tmp_path / "cache")
    assert loaded.issues.dry_run_out == str(tmp_path / "flagsweep-out")   # a default that is a relative path
    conf.write_text('[sweep]\npython = "python3"\n')
    named = settings.load(conf, env={"FLAGSWEEP_STATE": "here.sqlite"})
    assert named.sweep.python == "python3" and named.state_path == tmp_path / "here.sqlite"


@pytest.mark.parametrize("where, backend, refused", [
    ("a-file", "inductor", "is a file, not a folder"),
    ("a-file/cache", "inductor", "cannot be created: {tmp}/a-file is a file"),
    ("a-file", "count", None),                    # a count sweep never uses the cache: nothing to refuse
    ("a-file", "aot_eager", None),
    ("new/cache", "inductor", None),              # made when first used
    ("", "inductor", None),                       # "": no shared cache
])
def test_compile_cache_is_checked_before_anything_runs_only_where_inductor_uses_it(tmp_path, where, backend, refused):
    """Issue 38: `[sweep] compile_cache` at a file or an uncreatable folder failed only when workers started, without
    naming the setting, and failed count-backend sweeps too, which never use the cache."""
    (tmp_path / "a-file").write_text("")
    root = str(tmp_path / where) if where else ""
    path = tmp_path / "s.toml"
    path.write_text(f'[sweep]\nbackend = "{backend}"\ncompile_cache = "{root}"\n')
    loaded = settings.load(path, env={"HOME": str(tmp_path)})
    options = loaded.sweep_options()
    assert options.shared_cache == (root or None if backend == "inductor" else None)
    if refused is None:
        assert loaded.compile_cache_refusal() is None
    else:
        assert loaded.compile_cache_refusal() == (f"{path}: [sweep] compile_cache = {root!r}: "
                                                 f"{refused.format(tmp=tmp_path)} (\"\" for none)")
    assert not (tmp_path / "new").exists()        # checked, never made here


def test_every_documented_rate_limit_says_what_the_budget_counts():
    """Issue 38: docs/github-app.md called `[commands] rate_limit` "commands per user per hour"; the budget counts
    commands that start work, refusals, usage replies and paused replies (state.budgets.BUDGET_KINDS)."""
    from state.budgets import BUDGET_KINDS

    documented = []
    for path in [ROOT / "flagsweep.example.toml", *sorted(ROOT.glob("docs/*.md"))]:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.lstrip().startswith("rate_limit ="):
                more = [ln.split("#", 1)[1] for ln in lines[i + 1:i + 3] if ln.lstrip().startswith("#")]
                documented.append((path.name, " ".join([line.split("#", 1)[1], *more])))   # with its next lines
    assert len(documented) >= 2
    words = {"run": "start work", "refused": "refusals", "usage": "usage", "paused": "paused"}
    assert set(words) == set(BUDGET_KINDS)
    for name, comment in documented:
        assert "per user per hour" in comment and all(w in comment for w in words.values()), (name, comment)


def test_the_quick_start_settings_are_the_defaults_but_for_their_own_lines():
    quick, defaults = settings.load(ROOT / "quickstart.toml", env={}), settings.load(None, env={})
    assert quick.verify.shrink_budget < defaults.verify.shrink_budget
    assert dataclasses.replace(quick.verify, shrink_budget=defaults.verify.shrink_budget) == defaults.verify
    assert quick.confirm.runs == 1 and (quick.sweep, quick.accuracy) == (defaults.sweep, defaults.accuracy)
