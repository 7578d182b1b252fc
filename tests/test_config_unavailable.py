"""Configs checked in the torch under test: a key that torch lacks makes its config unavailable, not a crash.

The torch under test is a stand-in: this venv's interpreter behind a wrapper whose
`sitecustomize` deletes one config key, as a newer nightly that dropped it would
(`torch._inductor.config.partitioned_scatter_memory_budget` exists in 2.13.0 and
is gone in 2.14.1). The nightly runs through the real CLI, the real engine and
one real tiny compile per config that can run.
"""
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from bot.cli.main import main
from state import db, runs

pytestmark = pytest.mark.compile

GONE = "torch._inductor.config.partitioned_scatter_memory_budget"
MODEL = "BertModel"

CONFIGS = f"""
[configs.nosuch]
"torch._dynamo.config.no_such_flag" = true

[configs.budget]
"{GONE}" = 0.2

[configs.nested]
"torch._inductor.config.triton.cudagraphs" = true

[configs.wrongtype]
"torch._dynamo.config.recompile_limit" = "many"
"""


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory) -> Path:
    """An interpreter whose torch lacks GONE: a wrapper around this venv's python with a sitecustomize."""
    root = tmp_path_factory.mktemp("standin")
    site = root / "site"
    site.mkdir()
    name = GONE.rsplit(".", 1)[1]
    (site / "sitecustomize.py").write_text(
        "import torch._inductor.config as _c\n"
        f"del _c._config[{name!r}]\n")
    python = root / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return python


@pytest.fixture
def settings_file(tmp_path, stand_in) -> Path:
    (tmp_path / "configs.toml").write_text(CONFIGS)
    f = tmp_path / "nv.toml"
    f.write_text(f'[sweep]\nworkers = 1\ntimeout = 240\npython = "{stand_in}"\nconfig_file = "{tmp_path / "configs.toml"}"\n'
                 f'[verify]\nenabled = false\n[issues]\nsummary_configs = ["*"]\n'
                 f'[nightly]\ncanaries = ["{MODEL}"]\n')     # the night's one model is its canary: no extra compiles
    return f


def test_the_stand_in_really_lacks_the_key(stand_in):
    from harness.engine.configs import probe

    # (In this venv's own torch the key is present: tests/test_configs.py probes it there.)
    assert probe([GONE], str(stand_in))[GONE]["status"] == "missing"


def test_a_nightly_sets_unavailable_configs_aside_names_them_and_files_nothing_for_them(tmp_path, settings_file,
                                                                                        capsys):
    state, out = tmp_path / "state.sqlite", tmp_path / "out"
    rc = main(["--settings", str(settings_file), "--state", str(state), "nightly", "--torch", "current",
               "--dry-run", "--models", MODEL, "--configs", "nosuch,budget,nested", "--out", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert "config nosuch: unavailable in torch" in printed and "config budget: unavailable in torch" in printed
    conn = db.connect(state)
    (run,) = runs.list_runs(conn)
    assert set(run.unavailable) == {"nosuch", "budget"}
    assert run.unavailable["budget"] == {"settings": {GONE: 0.2}, "missing": [GONE]}
    outs = {o.config: o for o in runs.outcomes(conn, run.id)}
    assert set(outs) == {"baseline", "nested"}              # the rest were swept, the nested key among them
    assert outs["nested"].status == "ok" and outs["nested"].graphs >= 1
    plan = json.loads((out / "plan.json").read_text())
    assert plan["actions"], "the configs that ran still get their summary issue"
    titles = [a["title"] for a in plan["actions"]]
    assert titles == ["flagsweep summary: cudagraphs=True: 0 crashes, 0 fewer graphs, of 1 testable models"]
    summary = plan["actions"][0]                             # nothing filed for an unavailable config
    body = (out / summary["file"]).read_text()
    assert "Not swept in this run, unavailable in torch" in body and GONE in body and "no_such_flag" in body
    report = Path(printed.split("report: ")[1].split()[0]).read_text()
    assert 'class="unavailable" data-config="budget"' in report and 'data-config="nosuch"' in report
    # The same nightly again is recognised as done (its configs include the unavailable ones).
    assert main(["--settings", str(settings_file), "--state", str(state), "nightly", "--torch", "current",
                 "--dry-run", "--models", MODEL, "--configs", "nosuch,budget,nested", "--out", str(out)]) == 0
    assert "already swept" in capsys.readouterr().out


def test_a_wrongly_typed_value_is_exit_2_in_one_line_before_anything_runs(tmp_path, settings_file, capsys):
    state = tmp_path / "state.sqlite"
    rc = main(["--settings", str(settings_file), "--state", str(state), "nightly", "--torch", "current",
               "--dry-run", "--models", MODEL, "--configs", "wrongtype,nested"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "wrongtype" in err and "expected int, got str 'many'" in err
    assert runs.list_runs(db.connect(state)) == []


def test_the_repro_injection_from_the_issue_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    evil = 'torch._dynamo.config.verbose\nimport os; os.system("touch pwned")\n#=true'
    rc = main(["--state", str(tmp_path / "s.sqlite"), "repro", MODEL, "--config", "baseline",
               "--base-setting", evil, "--run"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "dotted Python identifiers" in err
    f = tmp_path / "evil.toml"
    f.write_text('[configs.evil]\n"torch._dynamo.config.verbose\\nimport os; os.system(\\"touch pwned\\")\\n#" = true\n')
    rc = main(["--state", str(tmp_path / "s.sqlite"), "repro", MODEL, "--config", "evil", "--config-file", str(f),
               "--run"])
    assert rc == 2 and "dotted Python identifiers" in capsys.readouterr().err
    assert not (tmp_path / "pwned").exists()


def test_a_command_sweep_checks_in_the_torch_it_runs_on(tmp_path, stand_in):
    """`@bot sweep --base-setting K=V`: K is asked of the nightly's torch, and a miss is a reply, not a run."""
    from bot.commands import work
    from bot.commands.context import Context, UserError
    from bot.settings import NightlySettings, Settings, SweepSettings

    settings = Settings(state_path=tmp_path / "s.sqlite", sweep=SweepSettings(python=str(stand_in)),
                        nightly=NightlySettings(torch="current"))
    ctx = Context(conn=db.connect(settings.state_path), settings=settings, github=None, gate=None)
    with pytest.raises(UserError, match=f"^--base-setting: unknown setting '{GONE}'"):
        work.sweep(ctx, [MODEL], {"baseline": {}}, {GONE: 0.3})
    assert runs.list_runs(ctx.conn) == []


def test_a_bisect_probe_on_a_build_without_the_key_reports_it_unavailable(tmp_path, stand_in, monkeypatch):
    """Bisecting a flag across builds: a build that lacks its key is an outcome of its own, not a crash."""
    from bot.builds import provider
    from bot.commands.steps import probe_build
    from bot.settings import Settings, SweepSettings

    (tmp_path / "configs.toml").write_text(CONFIGS)
    settings = Settings(state_path=tmp_path / "s.sqlite",
                        sweep=SweepSettings(config_file=str(tmp_path / "configs.toml")))
    # The install of that day's build is the provider's business (tests/test_provider.py); here it is the stand-in.
    monkeypatch.setattr(provider, "provide_spec",
                        lambda nightly, spec, progress=False, client=None: provider.current(str(stand_in)))
    probe = probe_build(settings, "2026-11-01", MODEL, "budget")
    assert probe.key == "unavailable" and GONE in probe.detail


def test_a_python_that_does_not_exist_is_exit_2_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:                 # refused by the argument check itself
        main(["--state", str(tmp_path / "s.sqlite"), "sweep", "--python", str(tmp_path / "nope"),
              "--models", MODEL, "--configs", "capture_scalar_outputs"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and "nope does not exist" in err[-1]
