"""The nightly schedule with a controllable clock: cron maths, coalescing, misfires, one nightly at a time."""
import threading
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from apscheduler.triggers.base import BaseTrigger

from bot.service.scheduler import ScheduleError, build_trigger, from_settings, queue_nightly
from bot.settings import SchedulerSettings
from state import db, jobs
from tests.helpers_scheduler import ListTrigger
from tests.waiting import wait_for


def next_fire_times(trigger: BaseTrigger, now: datetime, n: int = 3) -> list[datetime]:
    """The next `n` times `trigger` fires after `now` (the clock is an argument)."""
    out: list[datetime] = []
    prev = None
    t = now
    for _ in range(n):
        nxt = trigger.get_next_fire_time(prev, t)
        if nxt is None:
            break
        out.append(nxt)
        prev, t = nxt, nxt
    return out


def test_cron_in_a_timezone_with_a_fake_now():
    trig = build_trigger(SchedulerSettings(cron="30 4 * * *", timezone="Europe/Berlin"))
    now = datetime(2026, 10, 23, 12, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    times = next_fire_times(trig, now, 3)
    # Berlin leaves summer time on 2026-10-25: same wall-clock time, one hour later in UTC.
    assert [t.strftime("%m-%d %H:%M") for t in times] == ["10-24 04:30", "10-25 04:30", "10-26 04:30"]
    assert times[0].utcoffset() == timedelta(hours=2) and times[1].utcoffset() == timedelta(hours=1)
    assert next_fire_times(trig, times[0] + timedelta(seconds=1), 1) == [times[1]]


def test_bad_cron_or_timezone_is_a_clear_error():
    with pytest.raises(ScheduleError, match="cron"):
        build_trigger(SchedulerSettings(cron="every night"))
    with pytest.raises(ScheduleError, match="Mars/Olympus"):
        build_trigger(SchedulerSettings(timezone="Mars/Olympus"))


def test_missed_times_inside_the_grace_are_coalesced_into_one_fire():
    now = datetime.now(timezone.utc)
    fired = []
    trig = ListTrigger([now - timedelta(seconds=30), now - timedelta(seconds=20), now - timedelta(seconds=10)])
    sched = from_settings(SchedulerSettings(misfire_grace_time=3600), lambda: fired.append(1), trigger=trig)
    sched.start()
    try:
        assert wait_for(lambda: fired)
        assert wait_for(lambda: sched.next_run_time is None)
    finally:
        sched.shutdown()
    assert fired == [1]


def test_a_time_missed_beyond_the_grace_does_not_fire():
    now = datetime.now(timezone.utc)
    fired, later = [], threading.Event()
    trig = ListTrigger([now - timedelta(hours=2), now + timedelta(milliseconds=300)])
    sched = from_settings(SchedulerSettings(misfire_grace_time=60), lambda: (fired.append(1), later.set()), trigger=trig)
    sched.start()
    try:
        assert later.wait(10)
    finally:
        sched.shutdown()
    # Only the on-time fire ran; the two-hours-late one was dropped as a misfire.
    assert fired == [1]


def test_only_one_nightly_queued_at_a_time(tmp_path):
    conn = db.connect(tmp_path / "s.sqlite")
    first = queue_nightly(conn)
    assert first is not None and queue_nightly(conn) is None
    job = jobs.claim_next(conn)
    assert job.id == first and queue_nightly(conn) is None   # running still counts
    jobs.finish(conn, job.id, result={"ok": True})
    assert queue_nightly(conn) is not None
