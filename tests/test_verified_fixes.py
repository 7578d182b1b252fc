"""Verified fixes only: an issue closes when its crashing models compile on N consecutive nightlies, never on absence.

The rule is the pure `harness.core.fixes.verdict`; the story tests run it the way a nightly does: real SQLite stores,
the real planner and publisher, PyGithub over HTTP against the fake GitHub.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.core import fixes
from bot.github import publish
from bot.settings import IssueSettings, Settings, SettingsError, VerifySettings, load
from harness.core.calls import Call
from harness.core.correctness import wrong_signature
from harness.core.outcome import Outcome
from state import db
from tests.fakegithub import FakeGitHub
from tests.fakegithub import scenario as sc
from tests.historydata import store_run
from tests import test_wrong_results as wr

CDO = "capture_dynamic_output_shape_ops"
M = [f"Model{i:02d}ForCausalLM" for i in range(10)]


def _ok(model: str, config: str) -> Outcome:
    return Outcome(model=model, config=config, status="ok", graphs=1)


def test_verdict_counts_only_nights_where_every_model_compiled() -> None:
    sig = sc.SIG_C
    compiled = fixes.Night("d1", {"A": (_ok("A", "baseline"), _ok("A", CDO)), "B": (_ok("B", "baseline"), _ok("B", CDO))})
    b_gone = fixes.Night("d2", {"A": (_ok("A", "baseline"), _ok("A", CDO))})
    v = fixes.verdict(sig, ["A", "B"], [compiled, b_gone], 1, "d0")
    assert not v.close and v.streak == 0 and v.untested == {"B": fixes.NOT_SWEPT}
    v = fixes.verdict(sig, ["A", "B"], [b_gone, compiled, compiled], 2, "d0")
    assert v.close and v.streak == 2 and v.fixed_in == "d1" and v.last_failing == "d0"
    assert not fixes.verdict(sig, ["A", "B"], [compiled], 2, "d0").close
    assert not fixes.verdict(sig, ["A"], [], 1, "d0").close


@pytest.mark.parametrize("baseline,flagged,expected", [
    (Outcome("A", "baseline", "create_error"), Outcome("A", CDO, "create_error"), "create_error"),
    (Outcome("A", "baseline", "input_error"), Outcome("A", CDO, "input_error"), "input_error"),
    (Outcome("A", "baseline", "eager_error"), Outcome("A", CDO, "ok"), "eager_error"),
    (Outcome("A", "baseline", "ok"), Outcome("A", CDO, "ok", flaky_rate=0.5), fixes.FLAKY),
    (Outcome("A", "baseline", "ok"), Outcome("A", CDO, "error", signature=sc.SIG_C), fixes.STILL_CRASHING),
    (Outcome("A", "baseline", "ok"), Outcome("A", CDO, "timeout"), fixes.OTHER_CRASH),
])
def test_a_model_that_was_not_tested_or_still_fails_is_never_fixed(baseline, flagged, expected) -> None:
    night = fixes.Night("d1", {"A": (baseline, flagged)})
    v = fixes.verdict(sc.SIG_C, ["A"], [night, night], 1, "d0")
    assert fixes.check(sc.SIG_C, baseline, flagged) == expected
    assert not v.close and v.streak == 0
    assert (v.untested if not fixes.tested(expected) else v.failing) == {"A": expected}


def _settings(fake: FakeGitHub, tmp: Path) -> Settings:
    # min_models=1: one-model signatures are filed at once here (the evidence rule: test_filing.py)
    return Settings(state_path=tmp / "state.sqlite", github=fake.settings(retry_backoff=0.0),
                    issues=IssueSettings(verify_nightlies=2, min_models=1), verify=VerifySettings(enabled=False))


def _nightly(conn, date: str, results: dict, *, shard: str | None = None,
             override: dict[tuple[str, str], str] | None = None) -> int:
    """A nightly (or one shard of it) of the scenario's results, with some items' statuses overridden."""
    outs = []
    for i, model in enumerate(sorted(results)):
        base = results[model].get("baseline", 3)
        for config in sc.CONFIGS:
            o = sc.outcome(model, config, results[model].get(config, base), sc.STRATA[i % len(sc.STRATA)])
            status = (override or {}).get((model, config))
            if status:
                o = Outcome(model=model, config=config, status=status, stratum=o.stratum)
            outs.append(o)
    return store_run(conn, outs, configs=sc.CONFIGS, kind="nightly", nightly=date, shard=shard)


def _publish(conn, settings, run_id: int) -> None:
    publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                        publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))


def _fixed(results: dict) -> dict:
    out = {m: dict(spec) for m, spec in results.items()}
    out[M[0]][CDO] = 3                                  # signature C gone: M00 compiles under the flag
    return out


def test_close_refused_while_a_crashing_model_went_untested_then_verified_and_reopened(
        fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, settings = fake_github, _settings(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    _publish(conn, settings, _nightly(conn, "2026-11-20", sc.corpus()))
    c = next(i for i in fake.state.issues(fake.repo) if i.title.endswith("with Unsupported"))

    def state() -> str:
        return fake.state.repo(fake.repo).issues[c.number].state

    # Three nights without signature C, none of which tested M00: under the old rule the issue closed here.
    gone = {m: r for m, r in _fixed(sc.corpus()).items() if m != M[0]}
    _publish(conn, settings, _nightly(conn, "2026-11-21", gone))                          # M00 left the corpus
    _publish(conn, settings, _nightly(conn, "2026-11-22", gone, shard="1/2"))             # its shard never came
    _publish(conn, settings, _nightly(conn, "2026-11-23", _fixed(sc.corpus()),            # it could not be built
                                      override={(M[0], "baseline"): "create_error", (M[0], CDO): "create_error"}))
    assert state() == "open"
    assert not [x for x in fake.state.comments(fake.repo, c.number) if "Closing" in x.body]
    # Verified on one nightly: still open (two needed); on the second, closed with the evidence.
    _publish(conn, settings, _nightly(conn, "2026-11-24", _fixed(sc.corpus())))
    assert state() == "open"
    _publish(conn, settings, _nightly(conn, "2026-11-25", _fixed(sc.corpus())))
    assert state() == "closed"
    close = fake.state.comments(fake.repo, c.number)[-1].body
    assert "verified fixed in nightly 2026-11-24; last failing 2026-11-20" in close
    assert f"`{M[0]}`" in close and "on 2 consecutive nightlies" in close
    # Seen again later: the same issue reopens.
    _publish(conn, settings, _nightly(conn, "2026-11-26", sc.corpus()))
    assert state() == "open" and "Reopening" in fake.state.comments(fake.repo, c.number)[-1].body
    assert len(fake.state.issues(fake.repo)) == 5


def test_an_untested_night_breaks_the_streak(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake, settings = fake_github, _settings(fake_github, tmp_path)
    conn = db.connect(settings.state_path)
    _publish(conn, settings, _nightly(conn, "2026-11-20", sc.corpus()))
    c = next(i for i in fake.state.issues(fake.repo) if i.title.endswith("with Unsupported"))
    _publish(conn, settings, _nightly(conn, "2026-11-21", _fixed(sc.corpus())))
    _publish(conn, settings, _nightly(conn, "2026-11-22", _fixed(sc.corpus()),
                                      override={(M[0], "baseline"): "eager_error", (M[0], CDO): "eager_error"}))
    assert fake.state.repo(fake.repo).issues[c.number].state == "open"
    _publish(conn, settings, _nightly(conn, "2026-11-23", _fixed(sc.corpus())))
    assert fake.state.repo(fake.repo).issues[c.number].state == "open"       # one verified night since the gap
    _publish(conn, settings, _nightly(conn, "2026-11-24", _fixed(sc.corpus())))
    assert fake.state.repo(fake.repo).issues[c.number].state == "closed"
    assert "verified fixed in nightly 2026-11-23" in fake.state.comments(fake.repo, c.number)[-1].body


@pytest.mark.parametrize("value", [0, 11, "2"])
def test_verify_nightlies_setting_is_checked(tmp_path: Path, value) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text(f"[issues]\nverify_nightlies = {value!r}\n".replace("'", '"'))
    with pytest.raises(SettingsError, match="verify_nightlies"):
        load(toml, env={})
    toml.write_text("[issues]\nverify_nightlies = 3\n")
    assert load(toml, env={}).issues.verify_nightlies == 3


def _calls(*accuracies: str, output: str = "logits") -> list[Call]:
    scenarios = ("first", "second_size", "hook_added", "weights_updated")
    return [Call(s, accuracy=a, output=output if a == "wrong" else None) for s, a in zip(scenarios, accuracies)]


WRONG_SIG = wrong_signature(Call("hook_added", accuracy="wrong", output="logits"))


@pytest.mark.parametrize("calls,expected", [
    (_calls("exact", "close", "exact", "close"), fixes.RIGHT),
    (_calls("exact", "exact", "wrong", "exact"), fixes.STILL_WRONG),
    (_calls("exact", "exact", "wrong", "exact", output="last_hidden_state"), fixes.OTHER_WRONG),
    (_calls("exact", "not_judged", "exact", "exact"), fixes.NOT_JUDGED),
    ([], fixes.NOT_JUDGED),     # the checks were off that night: compiling says nothing about the values
])
def test_a_wrong_result_is_fixed_only_when_its_model_is_judged_right(calls, expected) -> None:
    baseline, flagged = _ok("A", "baseline"), Outcome("A", CDO, "ok", graphs=1, calls=calls)
    assert fixes.check(WRONG_SIG, baseline, flagged) == expected
    night = fixes.Night("d1", {"A": (baseline, flagged)})
    v = fixes.verdict(WRONG_SIG, ["A"], [night, night], 2, "d0")
    assert v.close == (expected == fixes.RIGHT)
    assert (v.untested if expected == fixes.NOT_JUDGED else v.failing) == ({} if v.close else {"A": expected})


def test_a_wrong_result_that_now_crashes_is_not_fixed() -> None:
    flagged = Outcome("A", CDO, "error", signature=sc.SIG_C)
    assert fixes.check(WRONG_SIG, _ok("A", "baseline"), flagged) == fixes.OTHER_CRASH


def test_a_wrong_result_issue_closes_after_its_models_are_judged_right_on_n_nightlies(fake_github: FakeGitHub,
                                                                                      tmp_path: Path) -> None:
    """Filed on two wrong nights; a night with the checks off (no calls) is no evidence; two right nights close it."""
    fake, settings = fake_github, wr.settings_for(fake_github, tmp_path, verify_nightlies=2)
    conn = db.connect(settings.state_path)
    right = {(m, c): wr.RIGHT for m in wr.M for c in wr.CONFIGS}

    def night(date: str, calls: dict) -> None:
        run_id = sc.record_nightly(conn, date, {m: {} for m in wr.M}, calls=calls, configs=wr.CONFIGS)
        publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                            publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))

    for date in ("2026-11-20", "2026-11-21"):
        night(date, wr.night_calls())
    [filed] = wr.issue_titled(fake, "capture_scalar_outputs=True gives wrong results")
    night("2026-11-22", {})                                   # the checks off: compiled, but nothing judged
    night("2026-11-23", right)
    assert fake.state.repo(fake.repo).issues[filed.number].state == "open"
    night("2026-11-24", right)
    assert fake.state.repo(fake.repo).issues[filed.number].state == "closed"
    close = fake.state.comments(fake.repo, filed.number)[-1].body
    assert "verified fixed in nightly 2026-11-23; last failing 2026-11-21" in close
    assert "matched eager under `capture_scalar_outputs` on 2 consecutive nightlies" in close
