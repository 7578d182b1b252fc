"""Issue 20 items 3, 5, 6: the environment gate, the kill switch and shadow mode, the measured precision.

Twin sweeps (tests/fakesweep.py) and hand-made nightlies (tests/fakegithub/scenario.py) in real stores, published
through PyGithub to the fake GitHub over HTTP; one real tiny nightly through the CLI with a stand-in interpreter
whose transformers cannot import one model's module (a canary).
"""
from __future__ import annotations

import dataclasses
import json
import stat
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bot.cli.main import main
from bot.cli.service import ENVIRONMENT_SUSPECT, exit_status
from bot.commands import handlers
from bot.commands.context import Context, PermissionGate
from bot.github import publish
from bot.github.client import GitHubPublisher
from bot.pipeline import gate as gate_mod
from bot.pipeline import nightly
from bot.settings import IssueSettings, NightlySettings, Settings, VerifySettings
from harness.core.options import SweepOptions
from harness.core.outcome import Outcome
from harness.core.run_environment import RunEnvironment
from state import db, gates, history, resolutions, runs
from tests.fakegithub import FakeGitHub
from tests.fakegithub import scenario as sc
from tests.fakesweep import World

PAUSE = "flagsweep: pause"


# ---- the environment gate ----------------------------------------------------------------------

class BrokenWorld(World):
    """The twin torch, where some models fail to build at baseline (a venv missing a library)."""

    def __init__(self) -> None:
        super().__init__()
        self.broken: set[str] = set()

    def outcome(self, model, config):
        if model in self.broken:
            return Outcome(model, config, "create_error", stratum="decoder_llm", error_type="ImportError",
                           error_message="libfoo.so: cannot open shared object file")
        return super().outcome(model, config)


@pytest.fixture
def gh_env(tmp_path, fake_github: FakeGitHub):
    settings = Settings(state_path=tmp_path / "state.sqlite", github=fake_github.settings(retry_backoff=0.0),
                        nightly=NightlySettings(configs=["capture_scalar_outputs"], canaries=["AlphaModel"]),
                        verify=VerifySettings(enabled=False),
                        issues=IssueSettings(min_models=1))   # one-model crashes filed at once (test_filing.py)
    conn = db.connect(settings.state_path)
    yield settings, conn, BrokenWorld(), tmp_path, fake_github
    conn.close()


def _night(conn, settings, world, tmp, date):
    world.date, world.version = date, f"2.14.0.dev{date.replace('-', '')}+cpu"
    return nightly.run_nightly(conn, settings, dry_run=False, out_dir=tmp / "out", progress=False,
                               steps=world.steps(real_publish=True))


def test_an_error_rate_jump_files_nothing_says_why_in_the_summary_and_is_never_compared_with(gh_env):
    settings, conn, world, tmp, fake = gh_env
    world.crashing = {"GammaModel"}
    first = _night(conn, settings, world, tmp, "2026-11-21")
    assert not first.suspect and exit_status(first) == 0
    filed = {i.number: i for i in fake.state.issues(fake.repo)}
    assert len(filed) == 2                            # one tracking issue, one summary issue
    # Night 2: three of five models fail to build (the canary still builds); Gamma is fixed, Delta crashes anew.
    world.broken, world.crashing = {"BetaForCausalLM", "DeltaModel", "EpsilonModel"}, {"DeltaModel"}
    mark = len(fake.requests)
    second = _night(conn, settings, world, tmp, "2026-11-22")
    assert second.suspect and exit_status(second) == ENVIRONMENT_SUSPECT
    (reason,) = second.gate["reasons"]
    assert reason["kind"] == "jump" and (reason["before"], reason["now"]) == (0.0, 0.6)
    assert gates.is_suspect(conn, second.run_id)
    written = [(r.method, r.path) for r in fake.requests[mark:] if r.is_write]
    summary_no = next(n for n, i in filed.items() if i.title.startswith("flagsweep summary"))
    assert written == [("PATCH", f"/repos/{fake.repo}/issues/{summary_no}")]     # only the summary says why
    assert len(fake.state.issues(fake.repo)) == 2 and all(i.state == "open" for i in fake.state.issues(fake.repo))
    summary_body = fake.state.repo(fake.repo).issues[summary_no].body
    assert "Environment suspect: nothing was filed or closed" in summary_body and "from 0% to 60%" in summary_body
    assert second.published.gated >= 1
    assert "ENVIRONMENT SUSPECT" in _text(second)
    # Night 3, a sound environment: compared with night 1, never with the suspect night 2.
    world.broken = set()
    third = _night(conn, settings, world, tmp, "2026-11-23")
    assert not third.suspect and third.previous_run == first.run_id
    assert history.previous_comparable_run(conn, third.run_id) == first.run_id
    assert "Environment suspect" not in fake.state.repo(fake.repo).issues[summary_no].body


def test_a_failing_canary_is_suspect_even_without_a_jump(gh_env):
    settings, conn, world, tmp, fake = gh_env
    world.broken, world.crashing = {"AlphaModel"}, {"GammaModel"}
    result = _night(conn, settings, world, tmp, "2026-11-21")
    assert result.suspect and [r["model"] for r in result.gate["reasons"]] == ["AlphaModel"]
    assert fake.state.issues(fake.repo) == []        # nothing filed: not even a summary issue is opened
    assert fake.requests.writes() == []


def test_canaries_outside_the_nights_models_are_swept_with_it(gh_env):
    settings, conn, world, tmp, _ = gh_env
    settings = replace(settings, nightly=replace(settings.nightly, canaries=["ZetaModel"]))
    result = nightly.run_nightly(conn, settings, models=["AlphaModel", "BetaForCausalLM"], out_dir=tmp,
                                 progress=False, steps=world.steps())
    assert sorted(runs.get_run(conn, result.run_id).models) == ["AlphaModel", "BetaForCausalLM", "ZetaModel"]
    assert not result.suspect


def test_environment_checks_name_what_is_missing(monkeypatch):
    env = RunEnvironment(python_version="3.11", torch_version="2.14")
    monkeypatch.setattr(gate_mod.shutil, "which", lambda name: None)
    reasons = gate_mod.environment_reasons(env, SweepOptions(device="cuda", backend="inductor"))
    assert [r["missing"] for r in reasons] == ["transformers", "CUDA", "a C++ compiler (inductor)"]
    assert gate_mod.environment_reasons(dataclasses.replace(env, transformers_version="5"), SweepOptions()) == []


def test_max_error_jump_is_a_share(tmp_path):
    bad = tmp_path / "s.toml"
    bad.write_text("[nightly]\nmax_error_jump = 15\n")
    from bot import settings as settings_mod
    with pytest.raises(settings_mod.SettingsError, match="nightly.max_error_jump"):
        settings_mod.load(bad, env={"HOME": str(tmp_path)})


# ---- the kill switch and shadow mode -----------------------------------------------------------

def _pub_settings(fake: FakeGitHub, tmp: Path) -> Settings:
    return Settings(state_path=tmp / "state.sqlite", github=fake.settings(retry_backoff=0.0),
                    issues=IssueSettings(min_models=1), verify=VerifySettings(enabled=False))


def test_the_pause_label_stops_every_write_and_a_command_is_told_once(tmp_path, fake_github: FakeGitHub):
    fake, settings = fake_github, _pub_settings(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    first = sc.record_nightly(conn, "2026-11-20", sc.corpus())
    publish.publish_run(conn, settings, first, dry_run=False, out_dir=None,
                        publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    tracking = next(i for i in fake.state.issues(fake.repo) if "crashes" in i.title)
    switch = fake.state.create_issue(fake.repo, "stop the bot", "", user=fake.human, labels=[PAUSE])
    mark = len(fake.requests)
    second = sc.record_nightly(conn, "2026-11-21", sc.nightly3())      # a fix and a new crash: much to write
    paused = publish.publish_run(conn, settings, second, dry_run=False, out_dir=None,
                                 publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    assert paused.paused == switch.number and paused.actions == 0 and "nothing was written" in paused.stopped
    assert [r for r in fake.requests[mark:] if r.is_write] == []
    # A command on a bot issue: one reply saying so, nothing run; the job tried again says nothing more.
    ctx = Context(conn=conn, settings=settings, github=GitHubPublisher(settings.github), gate=PermissionGate(),
                  dry_run=False)
    job = {"issue": tracking.number, "author": fake.human, "repo": fake.repo,
           "body": "@flagsweep-bot rerun\n@flagsweep-bot mute"}
    result = handlers.handle_job(ctx, job)
    assert result["paused"] == switch.number and [c["outcome"] for c in result["commands"]] == ["paused"] * 2
    ctx.retry = True
    handlers.handle_job(ctx, job)
    replies = [c for c in fake.state.repo(fake.repo).comments.values() if c.issue == tracking.number]
    assert len(replies) == 1 and f"issue #{switch.number}" in replies[0].body and "flagsweep-bot rerun`" in replies[0].body
    assert [r.method for r in fake.requests[mark:] if r.is_write] == ["POST"]        # that reply, nothing else
    # The label removed: the next publish writes what was held back.
    fake.state.close_issue(fake.repo, switch.number, user=fake.human)
    resumed = publish.publish_run(conn, settings, second, dry_run=False, out_dir=None,
                                  publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    assert resumed.paused is None and resumed.written > 0


def test_shadow_mode_reads_github_and_writes_the_plan_to_files_only(tmp_path, fake_github: FakeGitHub):
    fake, settings = fake_github, _pub_settings(fake_github, tmp_path)
    settings = replace(settings, issues=replace(settings.issues, shadow=True))
    conn = db.connect(settings.state_path)
    run_id = sc.record_nightly(conn, "2026-11-20", sc.corpus())
    out = tmp_path / "shadow"
    shadowed = publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=str(out),
                                   publisher=publish.open_publisher(settings, dry_run=False, out_dir=str(out)))
    assert shadowed.shadow and not shadowed.dry_run and shadowed.actions == 5
    # Issue 31: nothing was written on GitHub, and the summary says so.
    text = shadowed.render()
    assert "5 actions: 5 would write (shadow mode: nothing sent)" in text and " written" not in text
    assert {row["result"] for row in shadowed.rows} == {"would write"}
    assert fake.requests.writes() == [] and fake.state.issues(fake.repo) == []
    paths = {(r.method, r.path, r.query.get("labels"), r.query.get("creator")) for r in fake.requests}
    assert ("GET", f"/repos/{fake.repo}/issues", PAUSE, None) in paths                  # it read GitHub
    assert ("GET", f"/repos/{fake.repo}/issues", None, fake.bot_login) in paths
    plan = json.loads((out / "plan.json").read_text())
    assert plan["shadow"] is True and [a["action"] for a in plan["actions"]] == ["create"] * 5
    assert conn.execute("SELECT count(*) FROM issue_links").fetchone()[0] == 0            # the store is untouched
    assert conn.execute("SELECT count(*) FROM outbox").fetchone()[0] == 0


# ---- measured precision ------------------------------------------------------------------------

SIGS = [f"RuntimeError: failure number {i}" for i in range(6)]


def _six_signatures(gone: int | None = None) -> dict:
    """Six models, each crashing under CSO with its own signature (but `gone`, which compiles)."""
    results = {m: {"baseline": 3} for m in sc.M[:8]}
    for i, model in enumerate(sc.M[:6]):
        if i != gone:
            results[model][sc.CSO] = SIGS[i]
    return results


def test_precision_counts_each_close_reason(tmp_path, fake_github: FakeGitHub, capsys):
    fake, settings = fake_github, _pub_settings(fake_github, tmp_path)
    # all six filed on the first night (the budget: test_filing.py)
    settings = replace(settings, issues=replace(settings.issues, verify_nightlies=1, max_new_per_night=6))
    conn = db.connect(settings.state_path)
    publish.publish_run(conn, settings, sc.record_nightly(conn, "2026-11-20", _six_signatures()), dry_run=False,
                        out_dir=None, publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    n = [_issue_of(fake, s) for s in SIGS]
    assert len(set(n)) == 6
    human = fake.client(fake.human_token).get_repo(fake.repo)
    human.get_issue(n[0]).edit(state="closed", state_reason="completed")
    human.get_issue(n[1]).edit(state="closed", state_reason="not_planned")
    human.get_issue(n[2]).edit(state="closed", state_reason="duplicate")
    human.get_issue(n[3]).add_to_labels("invalid")
    human.get_issue(n[4]).edit(state="closed", state_reason="completed")
    human.get_issue(n[4]).edit(state="open")                                    # reopened by a maintainer
    # The next nightly: signature 5 is gone, so the bot closes its issue as verified fixed (one nightly here).
    second = sc.record_nightly(conn, "2026-11-21", _six_signatures(gone=5))
    publish.publish_run(conn, settings, second, dry_run=False, out_dir=None,
                        publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    assert fake.state.repo(fake.repo).issues[n[5]].state == "closed"
    tally = resolutions.tally(conn, fake.repo)
    assert tally.counts == {"open": 1, "fixed_by_bot": 1, "completed": 1, "not_planned": 1, "duplicate": 1,
                            "invalid": 1}
    assert (tally.opened, tally.reopened, tally.closed_by_maintainer, tally.precision) == (6, 1, 4, 0.25)
    assert main(["--state", str(settings.state_path), "stats", "--json", "--repo", fake.repo]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["precision"] == 0.25 and data["counts"]["duplicate"] == 1 and data["reopened"] == 1
    assert main(["--state", str(settings.state_path), "stats", "--repo", fake.repo]) == 0
    assert "precision: 25.0%" in capsys.readouterr().out
    summary = next(i for i in fake.state.issues(fake.repo) if i.title.startswith("flagsweep summary"))
    assert "Measured precision: 25% of the 4 tracking issues maintainers closed" in summary.body
    # Publishing the same run again: the figures are as stored, nothing is written anywhere.
    changes, mark = conn.total_changes, len(fake.requests)
    publish.publish_run(conn, settings, second, dry_run=False, out_dir=None,
                        publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
    assert conn.total_changes == changes and [r for r in fake.requests[mark:] if r.is_write] == []


def _issue_of(fake: FakeGitHub, signature: str) -> int:
    return next(i.number for i in fake.state.issues(fake.repo) if signature.split(": ", 1)[1] in i.body
                and not i.title.startswith("flagsweep summary"))


def _text(result) -> str:
    from bot.text.render import render
    return render("nightly_summary.txt.j2", r=result)


# ---- one real nightly: a canary whose module cannot be imported ------------------------------

@pytest.fixture(scope="module")
def broken_bert(tmp_path_factory) -> Path:
    """This venv's python behind a wrapper whose transformers cannot import BertModel's module (a broken venv)."""
    root = tmp_path_factory.mktemp("brokenbert")
    site = root / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Broken:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'transformers.models.bert.modeling_bert':\n"
        "            raise ImportError('libbert.so: cannot open shared object file')\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Broken())\n")
    python = root / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return python


@pytest.mark.compile
def test_a_canary_that_cannot_build_files_nothing_and_the_nightly_exits_3(tmp_path, broken_bert, capsys):
    conf = tmp_path / "s.toml"
    conf.write_text(f'[sweep]\nworkers = 1\ntimeout = 240\npython = "{broken_bert}"\n'
                    '[verify]\nenabled = false\n[nightly]\ncanaries = ["BertModel"]\n')
    out = tmp_path / "out"
    rc = main(["--settings", str(conf), "--state", str(tmp_path / "state.sqlite"), "nightly", "--torch", "current",
               "--dry-run", "--models", "GPT2Model", "--configs", "capture_scalar_outputs", "--out", str(out)])
    printed = capsys.readouterr().out
    assert rc == ENVIRONMENT_SUSPECT, printed
    assert "ENVIRONMENT SUSPECT" in printed and "Canary `BertModel` failed at baseline (create_error" in printed
    conn = db.connect(tmp_path / "state.sqlite")
    (run,) = runs.list_runs(conn)
    outs = {(o.model, o.config): o for o in runs.outcomes(conn, run.id)}
    assert outs[("BertModel", "baseline")].status == "create_error"
    assert outs[("GPT2Model", "baseline")].status == "ok"
    assert gates.get(conn, run.id).reasons[0]["model"] == "BertModel"
    assert json.loads((out / "plan.json").read_text())["actions"] == []        # nothing filed
