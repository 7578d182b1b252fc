"""Bad input is refused with exit 2 and one line naming the value, never a traceback (issue 12, items 4-7)."""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli.main import main
from state import db, runs
from tests import historydata as hd
from tests.helpers_cli import one_line, run_cli
from harness.core.run_environment import RunEnvironment

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def store(tmp_path) -> Path:
    path = tmp_path / "state.sqlite"
    conn = db.connect(path)
    hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-01")
    conn.close()
    return path


# --- item 4: values that used to be accepted -------------------------------------------------------

@pytest.mark.parametrize("args, named", [
    (["sweep", "--models", "GPT2Model", "--timeout", "0"], "'0'"),
    (["sweep", "--models", "GPT2Model", "--timeout", "-5"], "'-5'"),
    (["sweep", "--models", ""], "--models"),
    (["sweep", "--models", " , "], "--models"),
    (["sweep", "--models", "GPT2Model", "--sample", "0"], "--sample"),
    (["sweep", "--models", "GPT2Model", "--workers", "-1"], "'-1'"),
    (["sweep", "--models", "GPT2Model", "--device", "bogus"], "'bogus'"),
    (["sweep", "--models", "GPT2Model", "--python", "/nonexistent/python3"], "/nonexistent/python3"),
    (["repro", "GPT2Model", "--backend", "bogus"], "'bogus'"),
    (["repro", "GPT2Model", "--device", "gpu0"], "'gpu0'"),
    (["nightly", "--date", "notadate"], "'notadate'"),
    (["nightly", "--date", "2026-02-30"], "'2026-02-30'"),
    (["nightly", "--models", ""], "--models"),
    (["serve", "--port", "99999"], "'99999'"),
    (["runs", "list", "--limit", "0"], "--limit"),
    # issue 31: an empty value was taken as "not given" (`--shard ''` ran a whole nightly)
    (["nightly", "--shard", ""], "--shard"),
    (["nightly", "--shard", "3/2"], "'3/2'"),
    (["nightly", "--out", ""], "--out"),
    (["nightly", "--export", ""], "--export"),
    (["nightly", "--torch", ""], "--torch"),
    (["merge", "1", "--out", ""], "--out"),
    (["publish", "--repo", ""], "--repo"),
    (["publish", "--repo", "no-slash"], "'no-slash'"),
    (["publish", "--out", ""], "--out"),
    (["stats", "--repo", ""], "--repo"),
    (["stats", "--repo", "a/b/c"], "'a/b/c'"),
    (["report", "-o", ""], "--output"),
    (["export", "1", "-o", ""], "--output"),
    (["repro", "GPT2Model", "-o", ""], "--output"),
    (["zoo", "lock", "--lock-dir", ""], "--lock-dir"),
    (["zoo", "diff", "5.0.0", "5.1.0", "--lock-dir", ""], "--lock-dir"),
    (["serve", "--host", ""], "--host"),
])
def test_bad_values_are_refused_before_anything_runs(tmp_path, capsys, args, named):
    state = tmp_path / "s.sqlite"
    code, err = run_cli(capsys, "--state", str(state), *args)
    assert code == 2 and named in one_line(err)
    assert not state.exists()          # refused by the parser: not even the store was opened


def test_empty_state_path_is_refused_not_replaced_by_the_default(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("FLAGSWEEP_STATE", raising=False)
    code, err = run_cli(capsys, "--state", "", "runs", "list")
    assert code == 2 and "--state" in one_line(err)
    assert not (tmp_path / ".local").exists()


def test_cuda_without_cuda_is_refused_in_the_interpreter_under_test(tmp_path, capsys):
    import torch   # only to know what to expect; the CLI asks a separate interpreter

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: nothing to refuse")
    state = tmp_path / "s.sqlite"
    code, err = run_cli(capsys, "--state", str(state), "sweep", "--models", "GPT2Model", "--device", "cuda")
    assert code == 2 and "--device cuda" in one_line(err) and "no CUDA" in err
    assert runs.list_runs(db.connect(state)) == []


# --- item 5: settings fields without a default -----------------------------------------------------

@pytest.mark.parametrize("toml, named", [
    ("state_path = 5\n", "state_path"),
    ("[sweep]\npython = 123\n", "sweep.python"),
    ("[sweep]\nconfig_file = 7\n", "sweep.config_file"),
    ("[github]\nrepo = 42\n", "github.repo"),
    ("[github]\nrepo = \"no-slash\"\n", "github.repo"),
    ("[github]\napp_id = \"abc\"\n", "github.app_id"),
    ("[sweep]\nmax_rss_mb = 0\n", "sweep.max_rss_mb"),
    ("[sweep]\ntimeout = 0\n", "sweep.timeout"),
    ("[sweep]\nworkers = -1\n", "sweep.workers"),
    ("[sweep]\ndevice = \"bogus\"\n", "sweep.device"),
    ("[webhook]\nport = 99999\n", "webhook.port"),
    ("[issues]\nlabels = [1, 2]\n", "issues.labels"),
    ("[verify]\nshrink_budget = -1\n", "verify.shrink_budget"),
    ("[confirm]\nruns = -1\n", "confirm.runs"),
])
def test_settings_of_the_wrong_type_or_range_are_named_at_load(tmp_path, capsys, toml, named):
    path = tmp_path / "s.toml"
    path.write_text(toml)
    code, err = run_cli(capsys, "--settings", str(path), "--state", str(tmp_path / "s.sqlite"), "runs", "list")
    assert code == 2 and named in one_line(err)


def test_optional_settings_still_take_their_type(tmp_path):
    from bot import settings

    path = tmp_path / "s.toml"
    path.write_text('state_path = "x.sqlite"\n[sweep]\npython = "/usr/bin/python3"\ntimeout = 5\n'
                    '[github]\nrepo = "o/r"\napp_id = 12\n')
    s = settings.load(path, env={})
    assert s.state_path == Path.cwd() / "x.sqlite" and s.sweep.python == "/usr/bin/python3"
    assert s.sweep.timeout == 5.0 and isinstance(s.sweep.timeout, float) and s.github.app_id == 12


# --- item 6: serve validates the routing rules as publish does ---------------------------------------

def test_serve_with_a_bad_routing_rule_stops_at_start_up_naming_the_rule(tmp_path, capsys, monkeypatch):
    path = tmp_path / "s.toml"
    path.write_text('[[routing.rule]]\nexception = "RuntimeError"\ncc = ["a"]\n'
                    '[[routing.rule]]\nsignature = "("\ncc = ["b"]\n')
    monkeypatch.setenv("FLAGSWEEP_WEBHOOK_SECRET", "s3cret")
    code, err = run_cli(capsys, "--settings", str(path), "--state", str(tmp_path / "s.sqlite"),
                        "serve", "--port", "0", "--no-schedule")
    assert code == 2 and "routing rule 2" in one_line(err)
    code, err = run_cli(capsys, "--settings", str(path), "--state", str(tmp_path / "s.sqlite"), "publish")
    assert code == 2 and "routing rule 2" in one_line(err)


# --- item 7: tracebacks become one line --------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--settings", "--config-file"])
def test_settings_or_config_file_that_is_a_folder_or_binary(tmp_path, capsys, flag):
    binary = tmp_path / "binary.toml"
    binary.write_bytes(bytes(range(256)) * 4)
    for bad, why in ((tmp_path, "folder"), (binary, "not a text file")):
        args = ["--settings", str(bad), "runs", "list"] if flag == "--settings" else \
            ["sweep", "--models", "GPT2Model", "--config-file", str(bad)]
        code, err = run_cli(capsys, "--state", str(tmp_path / "s.sqlite"), *args)
        assert code == 2 and str(bad) in one_line(err) and why in err


def test_state_path_that_is_a_folder(tmp_path, capsys):
    code, err = run_cli(capsys, "--state", str(tmp_path), "runs", "list")
    assert code == 2 and "is a folder" in one_line(err)
    with pytest.raises(db.StoreError, match="is a folder"):
        db.connect(tmp_path)


def _damage_runs_table(path: Path) -> None:
    """Overwrite the b-tree page of the `runs` table with garbage, as a bad disk block would."""
    conn = sqlite3.connect(str(path))
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs'").fetchone()[0]
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with open(path, "r+b") as f:
        f.seek((root - 1) * page)
        f.write(b"\xa5" * page)


def test_a_damaged_page_is_one_line_for_runs_list_and_export(store, tmp_path, capsys):
    _damage_runs_table(store)
    for args in (["runs", "list"], ["export", "1"], ["runs", "show", "1"]):
        code, err = run_cli(capsys, "--state", str(store), *args)
        line = one_line(err)
        assert code == 2 and "damaged" in line and str(store) in line, args


@pytest.mark.parametrize("args", [["report", "1", "-o"], ["export", "1", "-o"]])
def test_output_to_an_unwritable_path(store, tmp_path, capsys, args):
    target = tmp_path / "missing-folder" / "out.file"
    code, err = run_cli(capsys, "--state", str(store), *args, str(target))
    assert code == 2 and str(target) in one_line(err)
    code, err = run_cli(capsys, "--state", str(store), *args, str(tmp_path))   # a folder
    assert code == 2 and str(tmp_path) in one_line(err)


def test_repro_output_to_an_unwritable_path(tmp_path, capsys):
    target = tmp_path / "missing-folder" / "repro.py"
    code, err = run_cli(capsys, "--state", str(tmp_path / "s.sqlite"), "repro", "GPT2Model", "-o", str(target))
    assert code == 2 and str(target) in one_line(err)


def test_workers_that_cannot_start_on_resume_are_one_line_and_the_run_stays_resumable(tmp_path):
    """--resume skips the config check, so a python without torch reaches the worker pool (PoolError)."""
    state = tmp_path / "s.sqlite"
    conn = db.connect(state)
    run_id = runs.create_run(conn, environment=RunEnvironment.from_dict(hd.ENV), models=["GPT2Model"], configs={"baseline": {}})
    no_torch = _python_without_torch()
    out = subprocess.run([sys.executable, "-m", "bot.cli.main", "--state", str(state), "sweep", "--resume",
                          str(run_id), "--python", no_torch, "--workers", "1"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    last = out.stderr.strip().splitlines()[-1]     # after the progress bar's line
    assert out.returncode == 2 and "workers do not start" in last and "No module named 'torch'" in last
    assert "Traceback" not in out.stderr
    run = runs.get_run(conn, run_id)
    assert run.status == "interrupted" and "workers do not start" in run.reason   # resumable, not failed


def _python_without_torch() -> str:
    for candidate in ("/usr/bin/python3", shutil.which("python3") or ""):
        if candidate and subprocess.run([candidate, "-c", "import torch"], capture_output=True).returncode != 0:
            return candidate
    pytest.skip("every python3 here has torch")


# --- read-only state: refused at once, and described as what it is ------------------------------------

@pytest.fixture
def read_only():
    """make(path): path becomes read-only even to root (chattr +i; chmod for other users); undone after."""
    made: list[Path] = []

    def make(path: Path) -> None:
        if os.geteuid() == 0:
            if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)]).returncode != 0:
                pytest.skip("running as root without chattr +i: a read-only file cannot be made here")
        else:
            path.chmod(0o555 if path.is_dir() else 0o444)
        made.append(path)

    yield make
    for path in made:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)])
        path.chmod(0o755 if path.is_dir() else 0o644)


def _valid_store(folder: Path) -> Path:
    """A finished store whose -wal and -shm files are gone (the last connection closed)."""
    folder.mkdir(exist_ok=True)
    path = folder / "state.sqlite"
    conn = db.connect(path)
    hd.store_run(conn, hd.night(), kind="nightly", nightly="2026-11-01")
    conn.close()
    assert sorted(p.name for p in folder.iterdir()) == ["state.sqlite"]
    return path


def test_a_read_only_state_file_is_refused_before_any_worker_starts(tmp_path, capsys, read_only):
    store = _valid_store(tmp_path / "ro")
    before = store.read_bytes()
    read_only(store)
    code, err = run_cli(capsys, "--state", str(store), "sweep", "--models", "GPT2Model",
                        "--configs", "capture_scalar_outputs")
    line = one_line(err)   # the store is checked first: no progress bar, no worker output
    assert code == 2 and "read-only" in line and str(store) in line and "move it away" not in line
    assert store.read_bytes() == before


def test_a_valid_store_in_a_read_only_folder_is_not_called_foreign(tmp_path, capsys, read_only):
    store = _valid_store(tmp_path / "ro")
    read_only(store.parent)
    code, err = run_cli(capsys, "--state", str(store), "runs", "list")
    line = one_line(err)
    assert code == 2 and "folder" in line and "read-only" in line
    assert "not a flagsweep state file" not in line and "move it away" not in line


@pytest.mark.parametrize("nightly,named", [
    ('torch = "tomorrow"', "[nightly] torch = 'tomorrow': expected current, nightly"),
    ('configs = ["capture_scalar_outputz"]', "[nightly] configs = ['capture_scalar_outputz']: unknown config"),
    # issue 31: a named set the backend cannot run, models and canaries not in the lock: each fails every night
    ('configs = ["all-inductor"]', "[nightly] configs = ['all-inductor']: all-inductor needs [sweep] backend = "),
    ('models = ["NoSuchModel*"]', "[nightly] models = ['NoSuchModel*']: unknown model 'NoSuchModel*'"),
    ('canaries = ["GPT2Model", "NoSuchModel"]', "[nightly] canaries = ['GPT2Model', 'NoSuchModel']: unknown model"),
])
def test_serve_refuses_at_start_up_what_the_nightly_would_fail_on(capsys, tmp_path, nightly, named):
    conf = tmp_path / "s.toml"
    conf.write_text(f"[nightly]\n{nightly}\n")
    code, err = run_cli(capsys, "--settings", str(conf), "--state", str(tmp_path / "st.sqlite"),
                        "serve", "--port", "0", "--no-schedule", "--dry-run")
    assert code == 2 and one_line(err) == f"flagsweep serve: {conf}: {named}" + one_line(err).split(named, 1)[1]


@pytest.mark.parametrize("program", ["/bin/true", "/bin/echo"])
def test_an_interpreter_that_is_not_python_is_one_line(tmp_path, capsys, program):
    """Issue 21 A: `sweep --python` at an executable that answers no JSON is refused, not a decode traceback."""
    code, err = run_cli(capsys, "--state", str(tmp_path / "s.sqlite"), "sweep", "--models", "BertModel",
                        "--python", program)
    assert code == 2 and program in one_line(err) and "gave no answer" in err


@pytest.mark.parametrize("target, named", [("folder", "is a folder"), ("nope/run.json", "no folder")])
def test_nightly_export_target_is_checked_before_the_sweep(tmp_path, capsys, target, named):
    """Issue 21 A: a bad `nightly --export` path is refused before anything is swept, and leaves no stray .tmp."""
    (tmp_path / "folder").mkdir()
    code, err = run_cli(capsys, "--state", str(tmp_path / "s.sqlite"), "nightly", "--torch", "current",
                        "--models", "BertModel", "--configs", "baseline", "--dry-run", "--out", str(tmp_path / "o"),
                        "--export", str(tmp_path / target))
    assert code == 2 and named in one_line(err) and str(tmp_path / target) in err
    assert not (tmp_path / "s.sqlite").exists()                       # nothing swept, nothing stored
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]    # no folder.tmp


def _readme_every_night_configs() -> str:
    """The README's every-night example line (`configs = [..., "all-dynamo"]`), as the README writes it."""
    text = (ROOT / "README.md").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("`configs = [") and "all-dynamo" in ln)
    return line.split("`")[1]


@pytest.mark.parametrize("extra", ["", '[sweep]\nbackend = "inductor"\n'])
def test_serve_starts_with_the_readmes_every_night_example(tmp_path, extra):
    """Issue 31, major 2: `serve` refused the README's own `[nightly] configs` with a named set (all-dynamo, and
    all-inductor under the inductor backend). A real `flagsweep serve` gets past its start-up check and listens."""
    import signal

    configs = _readme_every_night_configs()
    if extra:
        configs = configs.replace('"all-dynamo"', '"all-dynamo", "all-inductor"')
    conf = tmp_path / "s.toml"
    conf.write_text(f"{extra}[webhook]\nport = 0\n[nightly]\n{configs}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGSWEEP_")}
    env["FLAGSWEEP_WEBHOOK_SECRET"] = "s3cret"
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli.main", "--settings", str(conf), "--state",
                             str(tmp_path / "s.sqlite"), "serve", "--no-schedule", "--dry-run"],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True, env=env)
    try:
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "listening on" in line or "flagsweep serve: " in line:
                break
        assert "listening on" in seen[-1], "".join(seen)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_nightly_all_inductor_names_the_setting_it_needs(tmp_path, capsys):
    """Issue 31: `nightly` has no --backend; the refusal names the setting that chooses the nightly's backend."""
    code, err = run_cli(capsys, "--state", str(tmp_path / "s.sqlite"), "nightly", "--torch", "current",
                        "--configs", "all-inductor", "--dry-run")
    line = one_line(err)
    assert code == 2 and '[sweep] backend = "inductor"' in line and "--backend" not in line


@pytest.mark.parametrize("name", ["all-dynamo", "all-functorch", "all-inductor"])
def test_a_config_file_config_named_like_a_set_is_refused(tmp_path, name):
    """Issue 31: a config file's config named like a named set was silently replaced by the set."""
    from harness.engine import configs

    path = tmp_path / "configs.toml"
    path.write_text(f'[configs.{name}]\n"torch._dynamo.config.capture_scalar_outputs" = true\n')
    with pytest.raises(configs.ConfigError, match=f"{path}: config '{name}' is the name of a named set"):
        configs.load_catalog(str(path))


@pytest.mark.parametrize("args", [["stats"], ["runs", "list"], ["runs", "show", "1"], ["diff"], ["report", "1"],
                                  ["export", "1"]])
def test_read_commands_never_create_a_store(tmp_path, capsys, args):
    """Issue 31: `stats` (and the other read commands) made folders and an empty store at a mistyped --state and
    reported 0."""
    state = tmp_path / "mistyped" / "state.sqlite"
    code, err = run_cli(capsys, "--state", str(state), *args)
    assert code == 2 and one_line(err).startswith(f"flagsweep: state: {state}: no state file there")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [["report", "99"], ["export", "99"], ["runs", "show", "99"], ["diff", "99"],
                                  ["diff", "1", "99"]])
def test_a_run_that_does_not_exist_is_a_bad_request(store, capsys, args):
    """Issue 31: `report 99` and `export 99` exited 1; naming a run the store lacks is a bad request, as `merge 99`."""
    code, err = run_cli(capsys, "--state", str(store), *args)
    assert code == 2 and one_line(err) == "flagsweep: no run 99"


def test_stats_repo_is_one_rule_with_publish_and_the_webhook(store, capsys):
    """Issue 31: `stats --repo` was case-sensitive where the webhook is not: one rule (bot.settings.repo_key)."""
    import json

    from bot import settings as settings_mod
    from state import resolutions

    conn = db.connect(store)
    resolutions.record(conn, "PyTorch/PyTorch", [resolutions.Resolution(number=1, key="k", resolution="completed")])
    conn.close()
    code = main(["--state", str(store), "stats", "--repo", "pytorch/pytorch", "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["opened"] == 1
    assert settings_mod.repo_key("PyTorch/PyTorch") == settings_mod.repo_key("pytorch/pytorch") == "pytorch/pytorch"
    assert settings_mod.repo_key("pytorch") is None and settings_mod.repo_key("a/b/c") is None


@pytest.mark.parametrize("torch", ["current", "2.14.1", "2026-11-02"])
def test_nightly_date_with_a_build_that_is_not_chosen_by_date_is_refused(tmp_path, capsys, torch):
    """Issue 31: `nightly --torch current --date D` ignored D and stored today's date."""
    code, err = run_cli(capsys, "--state", str(tmp_path / "s.sqlite"), "nightly", "--torch", torch,
                        "--date", "2026-11-01", "--models", "BertModel", "--configs", "baseline", "--dry-run",
                        "--out", str(tmp_path / "o"))
    assert code == 2 and one_line(err).startswith(f"flagsweep nightly: --date 2026-11-01 picks a nightly build; "
                                                  f"--torch {torch} is another build")
    assert list(tmp_path.iterdir()) == []          # nothing swept, nothing stored


# --- issue 38: empty means empty; the settings that were not given are not named -------------------------

@pytest.fixture
def no_zoo_job(monkeypatch):
    """A zoo job that starts fails the test at once: an empty --models used to start one over the whole corpus
    (`--reverify` rewrote the committed lock), and a test must never run that."""
    from harness.discovery import check, locker

    def started(*args, **kwargs):
        raise AssertionError("a zoo job started")
    for name in ("lock_corpus", "check_lock", "reverify_corpus", "scan"):
        monkeypatch.setattr(locker, name, started)
    monkeypatch.setattr(check, "check", started)


@pytest.mark.parametrize("args", [
    ["zoo", "lock", "--models", ""], ["zoo", "lock", "--models", ","], ["zoo", "lock", "--check", "--models", ""],
    ["zoo", "lock", "--reverify", "--models", " , "], ["zoo", "check", "--models", ""],
    ["zoo", "check", "--models", "GPT2Model", "--models", ","], ["sweep", "--models", ","],
    ["nightly", "--models", " ,"],
])
def test_an_empty_models_is_refused_never_read_as_every_model(tmp_path, capsys, no_zoo_job, args):
    """Issue 38, major: `zoo lock`, `zoo lock --check`, `--reverify` and `zoo check` took `--models ''` or `','` for
    every model. Every command's --models is one parser (arguments.model_patterns)."""
    state = tmp_path / "s.sqlite"
    code, err = run_cli(capsys, "--state", str(state), *args)
    line = one_line(err)
    assert code == 2 and "--models" in line and "names no model" in line
    assert not state.exists()


def test_every_models_option_is_the_one_parser():
    """Issue 38: one argparse type for every command's --models, so no command reads an empty value its own way."""
    from bot.cli import arguments
    from bot.cli.main import build_parser

    def parsers(parser):
        yield parser
        for action in parser._actions:
            for sub in (action.choices or {}).values() if isinstance(action.choices, dict) else ():
                yield from parsers(sub)
    found = {p.prog: a.type for p in parsers(build_parser()) for a in p._actions if "--models" in a.option_strings}
    assert {"flagsweep sweep", "flagsweep nightly", "flagsweep zoo lock", "flagsweep zoo check"} <= set(found)
    assert set(found.values()) == {arguments.model_patterns}, found


@pytest.mark.parametrize("nightly, args, named", [
    ('canaries = ["GPT2Model", "NoSuchModel"]', ["--models", "BertModel"],
     "[nightly] canaries = ['GPT2Model', 'NoSuchModel']: unknown model 'NoSuchModel'"),
    ('models = ["NoSuchModel*"]', [], "[nightly] models = ['NoSuchModel*']: unknown model 'NoSuchModel*'"),
])
def test_nightly_names_the_setting_of_a_model_missing_from_the_lock(tmp_path, capsys, nightly, args, named):
    """Issue 38: `nightly` with a canary missing from the lock said "unknown model" without naming
    `[nightly] canaries` (`serve` named it): the same words from the same rule."""
    conf = tmp_path / "s.toml"
    conf.write_text(f"[nightly]\n{nightly}\n")
    code, err = run_cli(capsys, "--settings", str(conf), "--state", str(tmp_path / "s.sqlite"), "nightly",
                        "--torch", "current", "--configs", "baseline", "--dry-run", "--out", str(tmp_path / "o"), *args)
    assert code == 2 and one_line(err).startswith(f"flagsweep nightly: {conf}: {named}")
    assert not (tmp_path / "s.sqlite").exists() or runs.list_runs(db.connect(tmp_path / "s.sqlite")) == []


@pytest.mark.parametrize("args", [["publish", "1", "--dry-run", "--no-verify", "--out", "o"], ["report", "1"],
                                  ["serve", "--port", "0", "--no-schedule", "--dry-run"],
                                  ["nightly", "--torch", "current", "--models", "BertModel", "--dry-run", "--out", "o"]])
def test_a_malformed_unsafe_table_is_one_line(store, tmp_path, capsys, monkeypatch, args):
    """Issue 38: a malformed harness/core/unsafe_flags.toml made `publish` exit 1 with a traceback; every command
    that reads it says so in one line naming the file (publish, serve and nightly before anything runs)."""
    from harness.core import unsafe

    bad = tmp_path / "unsafe_flags.toml"
    bad.write_text('[[unsafe]]\nkey = "torch._dynamo.config.guard_nn_modules"\nvalue = "false"\nreason = "r"\n')
    monkeypatch.setattr(unsafe, "TABLE", bad)
    monkeypatch.chdir(tmp_path)
    code, err = run_cli(capsys, "--state", str(store), *args)
    assert code == 2 and f"{bad}: unsafe #1: torch._dynamo.config.guard_nn_modules: value 'false'" in one_line(err)
    assert len(runs.list_runs(db.connect(store))) == 1         # nothing swept
    assert {p.name for p in tmp_path.iterdir() if not p.name.startswith("state.sqlite")} == {"unsafe_flags.toml"}


def _no_cuda() -> None:
    import torch   # only to know what to expect; the CLI asks a separate interpreter

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: nothing to refuse")


@pytest.mark.parametrize("command", [["sweep", "--models", "GPT2Model"], ["zoo", "check", "--models", "GPT2Model"]])
def test_a_cuda_device_from_the_settings_is_named_as_the_setting(tmp_path, capsys, command, no_zoo_job):
    """Issue 38: `[sweep] device = "cuda"` without CUDA was refused naming `--device cuda`, which was not given;
    `zoo check` ignored the setting and checked on the CPU in the bot's own venv."""
    _no_cuda()
    conf = tmp_path / "s.toml"
    conf.write_text('[sweep]\ndevice = "cuda"\n')
    code, err = run_cli(capsys, "--settings", str(conf), "--state", str(tmp_path / "s.sqlite"), *command)
    line = one_line(err)
    assert code == 2 and f"{conf}: [sweep] device = 'cuda': no CUDA" in line and "--device" not in line


def test_a_cuda_device_from_the_settings_is_named_as_the_setting_by_the_nightly(tmp_path, capsys):
    """Issue 45: `nightly --torch current` with `[sweep] device = "cuda"` without CUDA was refused by its workers,
    naming `--device cuda`, an option it has not; it is asked in the torch the nightly runs, before any worker."""
    _no_cuda()
    conf = tmp_path / "s.toml"
    conf.write_text('[sweep]\ndevice = "cuda"\n')
    code, err = run_cli(capsys, "--settings", str(conf), "--state", str(tmp_path / "s.sqlite"), "nightly", "--torch",
                        "current", "--models", "GPT2Model", "--configs", "baseline", "--dry-run", "--out",
                        str(tmp_path / "o"))
    line = one_line(err)
    assert code == 2 and f"flagsweep nightly: {conf}: [sweep] device = 'cuda': no CUDA" in line and "--device" not in line
    assert runs.list_runs(db.connect(tmp_path / "s.sqlite")) == []


def test_serve_and_nightly_refuse_a_cuda_device_from_a_cpu_channel(tmp_path, capsys):
    """Issue 38: `serve` started with `[sweep] device = "cuda"` and the `cpu` channel, so every night would fail;
    `nightly` refuses it too, before installing anything."""
    conf = tmp_path / "s.toml"
    conf.write_text('[sweep]\ndevice = "cuda"\n')
    named = (f"{conf}: [sweep] device = 'cuda' with [nightly] channel = 'cpu': a torch from a CPU channel has no "
             "CUDA")
    code, err = run_cli(capsys, "--settings", str(conf), "--state", str(tmp_path / "st.sqlite"),
                        "serve", "--port", "0", "--no-schedule", "--dry-run")
    assert code == 2 and one_line(err).startswith(f"flagsweep serve: {named}")
    code, err = run_cli(capsys, "--settings", str(conf), "--state", str(tmp_path / "st.sqlite"), "nightly",
                        "--models", "BertModel", "--configs", "baseline", "--dry-run", "--out", str(tmp_path / "o"))
    assert code == 2 and one_line(err).startswith(f"flagsweep nightly: {named}")
    assert runs.list_runs(db.connect(tmp_path / "st.sqlite")) == []


@pytest.mark.parametrize("args", [["sweep", "--models", "BertModel", "--backend", "inductor"],
                                  ["nightly", "--torch", "current", "--models", "BertModel", "--dry-run", "--out", "o"],
                                  ["serve", "--port", "0", "--no-schedule", "--dry-run"], ["merge", "1"]])
def test_a_compile_cache_at_a_file_is_named_before_any_worker_starts(store, tmp_path, capsys, monkeypatch, args):
    """Issue 38: `[sweep] compile_cache` at a file failed only when the workers started ("workers do not start:
    NotADirectoryError"), without naming the setting: under the inductor backend it is refused first, by name."""
    cache = tmp_path / "a-file"
    cache.write_text("")
    conf = tmp_path / "s.toml"
    backend = "" if args[0] == "sweep" else '\nbackend = "inductor"'
    conf.write_text(f'[sweep]\ncompile_cache = "{cache}"{backend}\n')
    monkeypatch.chdir(tmp_path)
    code, err = run_cli(capsys, "--settings", str(conf), "--state", str(store), *args)
    assert code == 2 and f"{conf}: [sweep] compile_cache = '{cache}': is a file, not a folder" in one_line(err)
    assert len(runs.list_runs(db.connect(store))) == 1 and not (tmp_path / "o").exists()
