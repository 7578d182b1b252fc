"""Regression ranges over a real fake index: builds installed by the real provider, probes swept by a twin.

The index holds ten nightlies (2026-11-01 .. 11-10) of a fake `torch` wheel; the
nightly pipeline runs on two of them, and the range step bisects those between.
The sweep twin (`Series`) decides each item's outcome from the build's date and
counts every call, so the cost rule (one sweep per probed build) is checked by counting.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path

import pytest

from bot.commands import handlers
from bot.pipeline import nightly
from bot.pipeline import steps as steps_mod
from bot.commands.context import Context, PermissionGate
from bot.commands.steps import CommandSteps
from bot.github.dryrun import DryRunPublisher
from bot.issues.keys import tracking_key
from bot.settings import IssueSettings, NightlySettings, RangeSettings, Settings, VerifySettings
from harness.core.outcome import Outcome
from state import db, links, ranges
from tests.fakeindex import FakeIndex
from tests.fakesweep import World
from harness.core.run_environment import RunEnvironment

DATES = [(date(2026, 11, 1) + timedelta(days=i)).isoformat() for i in range(10)]
CONFIG = "capture_scalar_outputs"


def git_of(d: str) -> str:
    """A full 40-hex commit per nightly."""
    return (d.replace("-", "") * 5)[:40]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """Ten nightlies, plus a broken one (its torch does not import) on the 5th's date under another version."""
    idx = FakeIndex(tmp_path_factory.mktemp("index"))
    for d in DATES:
        idx.add(f"2.14.0.dev{d.replace('-', '')}+cpu", git_of(d))
    yield idx
    idx.close()


@pytest.fixture(scope="module")
def venvs(tmp_path_factory):
    return tmp_path_factory.mktemp("venvs")   # shared: a build installed once is reused by every test


class Series(World):
    """A world whose outcomes depend on the build's date: `crash_from[model]` (signature by model), `fixed_from`."""

    def __init__(self):
        super().__init__()
        self.crash_from: dict[str, str] = {}
        self.fixed_from: dict[str, str] = {}
        self.git = "g"
        self.installs: list[str | None] = []       # dates the provider was asked for (pipeline and ranges)
        self.probe_sweeps: list[tuple[str, tuple]] = []
        self.listings = 0

    def crashes(self, model: str, day: str) -> bool:
        if model in self.crash_from:
            return day >= self.crash_from[model]
        if model in self.fixed_from:
            return day < self.fixed_from[model]
        return False

    def outcome_on(self, model: str, config: str, day: str) -> Outcome:
        if config != "baseline" and self.crashes(model, day):
            # a confirmed crash, as flake re-runs leave it
            return Outcome(model, config, "error", stratum="decoder_llm", error_type="RuntimeError",
                           error_message=f"{model} broke u3", signature=f"RuntimeError: {model} broke uN", attempts=3)
        return Outcome(model, config, "ok", stratum="decoder_llm", graphs=2 if config == "baseline" else 1)

    def outcome(self, model, config):
        return self.outcome_on(model, config, self.date)

    def provide(self, settings, torch, date, progress):
        self.installs.append(date)
        built = steps_mod.provide(settings, torch, date, progress)      # the real provider, over the fake index
        self.version, self.date, self.git = built.version, built.date, built.git
        return built

    def range_sweep(self, items, *, configs, base_settings, build, settings, mode):
        self.probe_sweeps.append((build.date, tuple(items)))
        return [self.outcome_on(m, c, build.date) for m, c in items]

    def list_builds(self, settings):
        self.listings += 1
        return steps_mod.list_builds(settings)

    def steps(self, real_publish: bool = False):
        s = super().steps(real_publish)
        s.range_sweep, s.list_builds = self.range_sweep, self.list_builds
        return s

    def range_installs(self) -> list[str]:
        """Dates installed after the two nightlies themselves: what the range search installed."""
        return self.installs[2:]


@pytest.fixture
def env(tmp_path, index, venvs):
    nightly = NightlySettings(index_url=index.url, channel="cpu", venv_dir=str(venvs), transformers_pin="",
                              extra_index_url="", no_deps=True, pip_args=["--isolated"], configs=[CONFIG])
    settings = Settings(state_path=tmp_path / "state.sqlite", nightly=nightly, verify=VerifySettings(enabled=False),
                        issues=IssueSettings(min_models=1))   # one-model crashes filed at once (test_filing.py)
    conn = db.connect(settings.state_path)
    yield settings, conn, Series(), tmp_path
    conn.close()


def two_nights(settings, conn, world, tmp, first=DATES[0], last=DATES[-1], real_publish=False):
    a = nightly.run_nightly(conn, settings, date=first, out_dir=tmp / "out1", steps=world.steps(), progress=False)
    b = nightly.run_nightly(conn, settings, date=last, out_dir=tmp / "out2", steps=world.steps(real_publish),
                            progress=False)
    assert a.status == b.status == "swept" and b.previous_run == a.run_id
    return a, b


def by_key(conn, run_id):
    return {(r.signature.split(": ")[1].split()[0], r.kind): r for r in ranges.for_run(conn, [run_id])}


def test_new_crashes_and_a_fix_share_probes_and_find_their_ranges(env):
    settings, conn, world, tmp = env
    # Gamma and Beta break on the 6th (two signatures), Delta is fixed on the 4th.
    world.crash_from = {"GammaModel": DATES[5], "BetaForCausalLM": DATES[5]}
    world.fixed_from = {"DeltaModel": DATES[3]}
    _, b = two_nights(settings, conn, world, tmp)
    found = by_key(conn, b.run_id)
    assert set(found) == {("GammaModel", "new_crash"), ("BetaForCausalLM", "new_crash"), ("DeltaModel", "fixed")}
    gamma = found[("GammaModel", "new_crash")]
    assert gamma.status == "found" and gamma.models == ["GammaModel"]
    assert (gamma.good.date, gamma.bad.date) == (DATES[4], DATES[5])
    assert (gamma.good.git, gamma.bad.git) == (git_of(DATES[4]), git_of(DATES[5]))
    assert gamma.good.version == "2.14.0.dev20261105+cpu"
    assert gamma.compare == f"https://github.com/pytorch/pytorch/compare/{git_of(DATES[4])}...{git_of(DATES[5])}"
    fix = found[("DeltaModel", "fixed")]
    assert fix.status == "found" and (fix.good.date, fix.bad.date) == (DATES[2], DATES[3])
    # The ends were never installed for the search; the bound held; each probed build swept once, for every
    # item still pending: the two new crashes' bisects probed the same builds, swept together.
    installed = world.range_installs()
    assert DATES[0] not in installed and DATES[-1] not in installed
    assert len(installed) == len(set(installed)) <= settings.ranges.installs
    swept = [d for d, _ in world.probe_sweeps]
    assert sorted(swept) == sorted(installed) and len(swept) == len(set(swept))
    first_items = set(world.probe_sweeps[0][1])
    assert {("GammaModel", CONFIG), ("BetaForCausalLM", CONFIG), ("DeltaModel", CONFIG)} == first_items
    assert b.range_cost == {"installs": len(installed), "sweeps": len(swept),
                            "items_swept": sum(len(i) for _, i in world.probe_sweeps)}
    from bot.text.render import render
    text = render("nightly_summary.txt.j2", r=b)
    assert f"regression range of {CONFIG} / RuntimeError: GammaModel broke uN: {DATES[4]} (" in text
    assert f"fix range of {CONFIG} / RuntimeError: DeltaModel broke uN: {DATES[2]} (" in text
    assert f"range search: {len(installed)} installs, {len(swept)} sweeps" in text
    # --json carries the ranges, compare links included.
    data = json.loads(json.dumps(b.to_dict()))
    assert {r["compare"] for r in data["ranges"] if r["kind"] == "new_crash" and r["models"] == ["GammaModel"]} \
        == {gamma.compare}


def test_adjacent_nightlies_need_no_install(env):
    settings, conn, world, tmp = env
    world.crash_from = {"GammaModel": DATES[9]}
    _, b = two_nights(settings, conn, world, tmp, first=DATES[8], last=DATES[9])
    (r,) = ranges.for_run(conn, [b.run_id])
    assert r.status == "found" and (r.good.date, r.bad.date) == (DATES[8], DATES[9]) and r.installs == 0
    assert world.range_installs() == [] and world.probe_sweeps == []
    assert r.compare.endswith(f"{git_of(DATES[8])}...{git_of(DATES[9])}")


def test_the_install_bound_stops_the_search_and_says_so(env):
    settings, conn, world, tmp = env
    settings = replace(settings, ranges=RangeSettings(installs=2))
    world.crash_from = {"GammaModel": DATES[5]}
    _, b = two_nights(settings, conn, world, tmp)
    (r,) = ranges.for_run(conn, [b.run_id])
    assert r.status == "bounded" and r.installs == 2 and len(world.range_installs()) == 2
    # Probed 11-05 (old) then 11-07 (new): the range narrowed from 8 nightlies between to one.
    assert (r.good.date, r.bad.date) == (DATES[4], DATES[6])
    assert "[ranges] installs = 2" in r.reason and "1 nightlies left" in r.reason


def test_an_uninstallable_build_in_the_middle_is_skipped(env, index):
    settings, conn, world, tmp = env
    world.crash_from = {"GammaModel": DATES[5]}
    broken = DATES[4]

    def provide(settings, torch, date, progress):
        if date == broken:                      # as pip or the probe would fail for a build that is broken
            from bot.builds.provider import ProviderError
            world.installs.append(date)
            raise ProviderError(f"torch does not import in the venv of {date}")
        return Series.provide(world, settings, torch, date, progress)

    steps = world.steps()
    steps.provide = provide
    nightly.run_nightly(conn, settings, date=DATES[0], out_dir=tmp / "o1", steps=steps, progress=False)
    b = nightly.run_nightly(conn, settings, date=DATES[-1], out_dir=tmp / "o2", steps=steps, progress=False)
    (r,) = ranges.for_run(conn, [b.run_id])
    assert r.status == "found" and (r.good.date, r.bad.date) == (DATES[3], DATES[5])
    assert broken in r.reason and "could not be installed" in r.reason
    assert broken not in [d for d, _ in world.probe_sweeps]


def test_current_torch_has_no_series_and_installs_nothing(env):
    settings, conn, world, tmp = env
    steps = world.steps()
    steps.provide = lambda *a: World.provide(world, *a)     # the torch already here: no index, no series
    nightly.run_nightly(conn, settings, out_dir=tmp / "o1", steps=steps, progress=False)
    world.version, world.date, world.crash_from = "2.14.0.dev20261122+cpu", "2026-11-22", {"GammaModel": "2026-11-22"}
    b = nightly.run_nightly(conn, settings, out_dir=tmp / "o2", steps=steps, progress=False)
    (r,) = ranges.for_run(conn, [b.run_id])
    assert r.status == "no_series" and "not installed from an index" in r.reason and r.installs == 0
    assert world.probe_sweeps == [] and world.listings == 0


def test_a_quiet_nightly_calls_neither_provider_nor_sweep(env):
    settings, conn, world, tmp = env
    two_nights(settings, conn, world, tmp)      # nothing changes between the two nightlies
    assert world.installs == [DATES[0], DATES[-1]]    # the two nightlies' own installs, no more
    assert world.probe_sweeps == [] and world.listings == 0


def test_the_dry_run_tracking_issue_shows_the_range_and_compare_link(env):
    settings, conn, world, tmp = env
    world.crash_from = {"GammaModel": DATES[5]}
    _, b = two_nights(settings, conn, world, tmp, real_publish=True)
    key = tracking_key(CONFIG, "RuntimeError: GammaModel broke uN")
    (path,) = (tmp / "out2").glob(f"*-create-{key}.md")
    body = path.read_text()
    link = f"https://github.com/pytorch/pytorch/compare/{git_of(DATES[4])}...{git_of(DATES[5])}"
    assert "## Regression range" in body and link in body
    assert (f"Regression range: last good nightly {DATES[4]} (`{git_of(DATES[4])[:10]}`) .. first bad nightly "
            f"{DATES[5]} (`{git_of(DATES[5])[:10]}`)") in body
    # The run's report lists it too.
    from bot.report import report
    from bot.view import run_view
    ctx = report.build_context(conn, view=run_view.load(conn, b.run_id))
    assert link in report.render_md(ctx) and f'href="{link}"' in report.render_html(ctx)


def test_the_bisect_command_searches_a_bounded_range_again(env):
    settings, conn, world, tmp = env
    settings = replace(settings, ranges=RangeSettings(installs=2))
    world.crash_from = {"GammaModel": DATES[5]}
    _, b = two_nights(settings, conn, world, tmp)
    (first,) = ranges.for_run(conn, [b.run_id])
    assert first.status == "bounded"
    sig = first.signature
    links.upsert(conn, links.Link(key=tracking_key(CONFIG, sig), repo="o/r", number=7, kind="tracking",
                                  config=CONFIG, signature=sig))
    settings = replace(settings, github=replace(settings.github, repo="o/r"),
                       commands=replace(settings.commands, allowlist=["alice"]))
    out = tmp / "cmd"
    ctx = Context(conn=conn, settings=settings, github=DryRunPublisher(out, clean=False), gate=PermissionGate(),
                  dry_run=True, out_dir=tmp / "republish", steps=CommandSteps(pipeline=world.steps(real_publish=True)))
    res = handlers.handle_job(ctx, {"issue": 7, "author": "alice", "repo": "o/r", "body": "@flagsweep-bot bisect"})
    assert res["commands"][0]["outcome"] == "range: new_crash found", res
    (again,) = ranges.for_run(conn, [b.run_id])
    assert again.status == "found" and (again.good.date, again.bad.date) == (DATES[4], DATES[5])
    # It went on from the bounded ends: only the one nightly left between them was installed.
    assert world.range_installs()[-1:] == [DATES[5]] and len(world.range_installs()) == 3
    reply = "".join(p.read_text() for p in out.glob("*-comment-*.md"))
    assert "Regression range: last good nightly 2026-11-05" in reply
    body = "".join(p.read_text() for p in (tmp / "republish").glob("*-edit-*.md"))
    assert f"compare/{git_of(DATES[4])}...{git_of(DATES[5])}" in body      # the issue body rewritten with it


def test_the_bisect_command_searches_only_its_issues_mode(env):
    """A train issue's `bisect` searches train's nightlies: eval's range of the same (config, signature) is not its
    range, and with no train nightly there is nothing to search (it searched and republished eval's run before)."""
    settings, conn, world, tmp = env
    settings = replace(settings, ranges=RangeSettings(installs=2))
    world.crash_from = {"GammaModel": DATES[5]}
    _, b = two_nights(settings, conn, world, tmp)       # eval's nights, with a bounded range of the crash
    (first,) = ranges.for_run(conn, [b.run_id])
    links.upsert(conn, links.Link(key="train-issue", repo="o/r", number=8, kind="tracking", config=CONFIG,
                                  signature=first.signature, mode="phase=train"))
    settings = replace(settings, github=replace(settings.github, repo="o/r"),
                       commands=replace(settings.commands, allowlist=["alice"]))
    ctx = Context(conn=conn, settings=settings, github=DryRunPublisher(tmp / "cmd", clean=False),
                  gate=PermissionGate(), dry_run=True, out_dir=tmp / "republish",
                  steps=CommandSteps(pipeline=world.steps(real_publish=True)))
    installs = len(world.range_installs())
    res = handlers.handle_job(ctx, {"issue": 8, "author": "alice", "repo": "o/r", "body": "@flagsweep-bot bisect"})
    assert res["commands"][0]["outcome"] == ("user error: no finished nightly of this issue's mode yet, so there is "
                                             "no range to search"), res
    assert ranges.for_run(conn, [b.run_id])[0].status == "bounded"        # eval's range untouched
    assert len(world.range_installs()) == installs and not (tmp / "republish").exists()


def test_bisect_without_model_on_a_non_tracking_issue_is_a_user_error(env):
    settings, conn, world, tmp = env
    settings = replace(settings, commands=replace(settings.commands, allowlist=["alice"], any_issue=True))
    ctx = Context(conn=conn, settings=settings, github=DryRunPublisher(tmp / "c", clean=False), gate=PermissionGate())
    res = handlers.handle_job(ctx, {"issue": 3, "author": "alice", "repo": "o/r", "body": "@flagsweep-bot bisect"})
    assert res["commands"][0]["outcome"].startswith("user error: `bisect` without --config and --model")


def test_range_rows_round_trip_and_latest_per_key(tmp_path):
    conn = db.connect(tmp_path / "s.sqlite")
    from state.runs import create_run
    r1 = create_run(conn, environment=RunEnvironment.from_dict({}), models=["M"], configs={}, kind="nightly", nightly="2026-11-01")
    r2 = create_run(conn, environment=RunEnvironment.from_dict({}), models=["M"], configs={}, kind="nightly", nightly="2026-11-02")
    ranges.record(conn, ranges.Range(r1, "c", "S", "new_crash", "no_series", reason="current torch"))
    ranges.record(conn, ranges.Range(r2, "c", "S", "new_crash", "found", good=ranges.Build("2026-11-01", "v1", "a" * 40),
                                     bad=ranges.Build("2026-11-02", "v2", "b" * 40), probes=[{"date": "x"}]))
    assert ranges.latest(conn, r1)[("c", "S", "new_crash")].status == "no_series"
    got = ranges.latest(conn, r2)[("c", "S", "new_crash")]
    assert got.good.git == "a" * 40 and got.probes == [{"date": "x"}] and got.compare.endswith("a" * 40 + "..." + "b" * 40)
    with pytest.raises(ValueError, match="status 'maybe'"):
        ranges.record(conn, ranges.Range(r2, "c", "S", "new_crash", "maybe"))
    assert Path(tmp_path / "s.sqlite").exists()


def test_a_nightly_published_again_does_not_search_again(env):
    settings, conn, world, tmp = env
    world.crash_from = {"GammaModel": DATES[5]}
    _, b = two_nights(settings, conn, world, tmp)
    installs, sweeps = list(world.installs), list(world.probe_sweeps)
    again = nightly.run_nightly(conn, settings, date=DATES[-1], out_dir=tmp / "o3", steps=world.steps(), progress=False)
    assert again.status == "reused" and again.run_id == b.run_id
    assert world.installs == installs + [DATES[-1]]      # only the nightly's own (cached) venv lookup
    assert world.probe_sweeps == sweeps and world.listings == 1
    assert [r["status"] for r in again.ranges] == ["found"] and again.range_cost["installs"] == 0


def test_an_index_that_cannot_be_listed_is_a_failed_range_not_a_traceback(env):
    import dataclasses
    settings, conn, world, tmp = env
    world.crash_from = {"GammaModel": DATES[5]}
    steps = world.steps()
    dead = dataclasses.replace(settings.nightly, index_url="http://127.0.0.1:9")     # nothing listens there
    steps.list_builds = lambda s: steps_mod.list_builds(dataclasses.replace(s, nightly=dead))
    nightly.run_nightly(conn, settings, date=DATES[0], out_dir=tmp / "o1", steps=steps, progress=False)
    b = nightly.run_nightly(conn, settings, date=DATES[-1], out_dir=tmp / "o2", steps=steps, progress=False)
    (r,) = ranges.for_run(conn, [b.run_id])
    assert r.status == "failed" and r.reason.startswith("cannot list the nightlies: cannot read the nightly index")
    assert world.probe_sweeps == [] and b.status == "swept"


def test_range_installs_is_checked_and_documented(tmp_path):
    from bot import settings as settings_mod
    root = Path(__file__).resolve().parent.parent
    assert settings_mod.load(root / "flagsweep.example.toml", env={"HOME": "/nonexistent"}).ranges.installs == 8
    bad = tmp_path / "s.toml"
    bad.write_text("[ranges]\ninstalls = -1\n")
    with pytest.raises(settings_mod.SettingsError,
                       match=r"ranges\.installs: must be 0 to 64 installs \(0: no range search\), got -1"):
        settings_mod.load(bad, env={})


def test_flaky_new_crashes_get_no_range(env):
    import dataclasses
    settings, conn, world, tmp = env
    world.crash_from = {"GammaModel": DATES[5]}
    steps = world.steps()
    steps.confirm = lambda conn, run_id, result, settings, python: result and dataclasses.replace(
        result, transitions=[dataclasses.replace(t, flaky_rate=0.5) if t.transition == "new_crash" else t
                             for t in result.transitions])
    nightly.run_nightly(conn, settings, date=DATES[0], out_dir=tmp / "o1", steps=steps, progress=False)
    b = nightly.run_nightly(conn, settings, date=DATES[-1], out_dir=tmp / "o2", steps=steps, progress=False)
    assert ranges.for_run(conn, [b.run_id]) == [] and world.probe_sweeps == [] and world.listings == 0


def test_range_installs_0_searches_nothing(env):
    settings, conn, world, tmp = env
    settings = replace(settings, ranges=RangeSettings(installs=0))
    world.crash_from = {"GammaModel": DATES[5]}
    _, b = two_nights(settings, conn, world, tmp)
    assert b.transitions.get("new_crash") == 1
    assert ranges.for_run(conn, [b.run_id]) == [] and world.probe_sweeps == [] and world.listings == 0
    assert world.installs == [DATES[0], DATES[-1]]
