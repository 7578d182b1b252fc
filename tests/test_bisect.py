"""Bisect over a fake series of nightlies whose outcome flips on a known date (no torch installs)."""
from datetime import date, timedelta

import pytest

from bot.ranges.bisect import BisectError, OutOfInstalls, Probe, SkipNightly, outcome_key, search, window
from harness.core.outcome import Outcome

DATES = [(date(2026, 10, 1) + timedelta(days=i)).isoformat() for i in range(40)]


def series(flip: str, broken: set[str] = frozenset()):
    calls = []

    def probe(d: str) -> Probe:
        calls.append(d)
        if d in broken:
            raise SkipNightly(d)
        key = "error: PendingUnbackedSymbolNotFound" if d >= flip else "ok: 3 graphs"
        return Probe(d, f"2.14.0.dev{d.replace('-', '')}", "g" + d[-2:], key)
    return probe, calls


@pytest.mark.parametrize("flip", [DATES[1], DATES[17], DATES[-1]])
def test_finds_the_flip_in_log_steps(flip):
    probe, calls = series(flip)
    r = search(DATES, probe)
    assert r.bad.date == flip
    assert r.good.date == DATES[DATES.index(flip) - 1]
    assert r.bad.git == "g" + flip[-2:] and r.good.key == "ok: 3 graphs"
    assert len(calls) <= 2 + 6   # two ends + ceil(log2(40))
    assert len(set(calls)) == len(calls)   # no nightly installed twice


def test_uninstallable_nightlies_are_skipped():
    flip = DATES[20]
    probe, calls = series(flip, broken={DATES[0], DATES[19], DATES[-1]})
    r = search(DATES, probe)
    assert r.bad.date == flip and r.good.date == DATES[18]
    assert DATES[19] in r.skipped and DATES[0] in r.skipped


def test_no_change_and_empty_ranges_are_clear_errors():
    probe, _ = series("2099-01-01")
    with pytest.raises(BisectError, match="no change between 2026-10-01 and 2026-11-09"):
        search(DATES, probe)
    with pytest.raises(BisectError, match="fewer than two nightlies between 2026-12-01 and 2026-12-05"):
        window(DATES, "2026-12-01", "2026-12-05")
    with pytest.raises(BisectError, match="no nightly"):
        window([], None, None)


def test_window_defaults_to_the_last_30_days():
    w = window(DATES, None, None)
    assert w[-1] == DATES[-1] and w[0] == "2026-10-10" and len(w) == 31
    assert window(DATES, DATES[3], DATES[5]) == DATES[3:6]


def test_outcome_key():
    assert outcome_key(Outcome("M", "c", "ok", graphs=2)) == "ok: 2 graphs"
    assert outcome_key(Outcome("M", "c", "error", signature="X: y")) == "error: X: y"
    assert outcome_key(Outcome("M", "c", "timeout")) == "timeout"


ANY = "py3-none-any"   # a wheel tag every Python installs


def _index_labels(tmp_path, wheels: list[tuple[str, str, str]]) -> list[str]:
    """The `bisect` command's real build source (the pipeline's list_builds) over a fake PEP 503 index."""
    from bot.pipeline.steps import list_builds
    from bot.settings import NightlySettings, Settings
    from tests.fakeindex import FakeIndex

    idx = FakeIndex(tmp_path / "index")
    try:
        for version, git, tag in wheels:
            idx.add(version, git, tag)
        s = Settings(state_path=tmp_path / "s.sqlite", nightly=NightlySettings(index_url=idx.url))
        return list_builds(s)
    finally:
        idx.close()


def test_bisect_dates_come_from_the_provider_index(tmp_path):
    """The command's real date source: a PEP 503 index over HTTP, only wheels this Python can install."""
    dates = _index_labels(tmp_path, [*((f"2.14.0.dev202611{day:02d}+cpu", f"g{day}", ANY) for day in (3, 1, 2)),
                                     ("2.14.0.dev20261104+cpu", "g4", "cp27-cp27m-win32")])
    assert dates == ["2026-11-01", "2026-11-02", "2026-11-03"]
    with pytest.raises(BisectError, match="fewer than two nightlies between 2026-11-03 and 2026-11-09"):
        window(dates, "2026-11-03", "2026-11-09")


def test_bisect_spans_any_two_builds_the_index_has(tmp_path):
    """Releases, an rc and nightlies on one index: labels in version order, windows by version or date."""
    versions = ("2.13.0+cpu", "2.14.0+cpu", "2.14.1+cpu", "2.15.0.dev20261101+cpu", "2.15.0.dev20261102+cpu",
                "2.15.0rc1+cpu")   # only listed, never installed (this machine's pip caps torch at 2.14.1)
    labels = _index_labels(tmp_path, [(v, "g" + v, ANY) for v in versions])
    assert labels == ["2.13.0+cpu", "2.14.0+cpu", "2.14.1+cpu", "2026-11-01", "2026-11-02", "2.15.0rc1+cpu"]
    assert window(labels, "2.13.0", "2.14.1") == labels[:3]
    assert window(labels, "2.14.1", "2026-11-02") == labels[2:5]
    assert window(labels, "2.14.0", None) == labels[1:]
    flip = "2026-11-01"
    r = search(window(labels, "2.13.0", "2.15.0rc1"),
               lambda b: Probe(b, b, None, "error: X" if labels.index(b) >= labels.index(flip) else "ok: 1 graphs"))
    assert (r.good.date, r.bad.date) == ("2.14.1+cpu", flip)
    with pytest.raises(BisectError, match="fewer than two nightlies between 2.16.0 and 2.17.0"):
        window(labels, "2.16.0", "2.17.0")


def test_the_bisect_command_takes_versions():
    from bot.commands.parse import parse_comment

    cmds = parse_comment("@flagsweep-bot bisect --config c --model M --good 2.13.0 --bad 2.15.0rc1", "@flagsweep-bot")
    assert cmds[0].args["good"] == "2.13.0" and cmds[0].args["bad"] == "2.15.0rc1"


def test_known_ends_are_not_probed_and_give_the_pair_the_probed_ends_give():
    """The range search's use of the one search: both ends known from stored runs, only builds between probed."""
    flip = DATES[20]
    probe, calls = series(flip)
    good = Probe(DATES[0], None, None, "ok: 3 graphs")
    bad = Probe(DATES[-1], None, None, "error: PendingUnbackedSymbolNotFound")
    r = search(DATES[1:-1], probe, good=good, bad=bad)
    assert (r.good.date, r.bad.date) == (DATES[19], flip) and r.status == "found" and r.candidates == 38
    assert DATES[0] not in calls and DATES[-1] not in calls and len(set(calls)) == len(calls)
    probed, probed_calls = series(flip)          # the command's use: the same series, ends probed
    r2 = search(DATES, probed)
    assert (r2.good.date, r2.bad.date) == (r.good.date, r.bad.date)
    assert probed_calls[:2] == [DATES[0], DATES[-1]] and probed_calls[2:] == calls


def test_a_spent_budget_bounds_the_search_and_an_untested_build_is_stepped_around():
    """OutOfInstalls stops the search where it is (`bounded`); a probe with no key counts as made and skipped."""
    flip = DATES[20]
    calls: list[str] = []

    def probe(d: str) -> Probe:
        if len(calls) == 3:
            raise OutOfInstalls(d)
        calls.append(d)
        key = None if d == DATES[19] else ("new" if d >= flip else "old")   # nothing testable on the 19th
        return Probe(d, None, None, key)

    r = search(DATES[1:-1], probe, good=Probe(DATES[0], None, None, "old"), bad=Probe(DATES[-1], None, None, "new"))
    assert calls == [DATES[19], DATES[20], DATES[9]]
    assert r.status == "bounded" and (r.good.date, r.bad.date) == (DATES[9], flip)
    assert [p.date for p in r.steps] == calls and r.skipped == [DATES[19]]
    assert r.remaining == 9          # DATES[10] .. DATES[18]: the 19th is already known untestable
