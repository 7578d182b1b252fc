"""The nightly schedule: an APScheduler cron trigger that queues a nightly job.

The scheduler only *queues*: the job runner runs one job at a time, so a slow
nightly can never overlap the next one. Missed fire times (the process was down,
or the machine slept) are coalesced into one run when still inside the grace time.
"""
from __future__ import annotations

import logging
import sqlite3
import threading
from datetime import datetime
from typing import Any, Callable

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger

from bot.settings import SchedulerSettings
from state import jobs

log = logging.getLogger(__name__)

JOB_ID = "flagsweep-nightly"


class ScheduleError(ValueError):
    """The cron expression or timezone in the settings is wrong."""


def build_trigger(settings: SchedulerSettings) -> CronTrigger:
    """The cron trigger from the settings (five-field crontab, IANA timezone)."""
    try:
        return CronTrigger.from_crontab(settings.cron, timezone=settings.timezone)
    except (ValueError, LookupError) as exc:  # zoneinfo raises a KeyError subclass for unknown zones
        raise ScheduleError(f"scheduler: cron {settings.cron!r} / timezone {settings.timezone!r}: {exc}") from None


def queue_nightly(conn: sqlite3.Connection, lock: threading.Lock | None = None,
                  payload: dict[str, Any] | None = None) -> int | None:
    """Queue a nightly job unless one is already queued or running; returns the job id or None."""
    lock = lock or threading.Lock()
    with lock:
        if jobs.active(conn, "nightly"):
            log.info("nightly already queued or running: not queueing another")
            return None
        return jobs.enqueue(conn, "nightly", payload or {"source": "schedule"})


class NightlyScheduler:
    """A background APScheduler with one job: call `fire` on each trigger time."""

    def __init__(self, fire: Callable[[], Any], trigger: BaseTrigger, *, misfire_grace_time: int = 3600,
                 timezone: str = "UTC") -> None:
        self.fire = fire
        self.scheduler = BackgroundScheduler(timezone=timezone)
        # coalesce: several missed times run once; max_instances=1: never two fires at once.
        self.job = self.scheduler.add_job(self._fire, trigger, id=JOB_ID, coalesce=True, max_instances=1,
                                          misfire_grace_time=misfire_grace_time, replace_existing=True)

    def _fire(self) -> None:
        try:
            self.fire()
        except Exception:
            log.exception("scheduled nightly could not be queued")

    def start(self) -> None:
        """Start the scheduler thread."""
        self.scheduler.start()

    def shutdown(self) -> None:
        """Stop it (does not wait for a running fire: firing only queues)."""
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    @property
    def next_run_time(self) -> datetime | None:
        """When the nightly fires next."""
        job = self.scheduler.get_job(JOB_ID)
        return getattr(job, "next_run_time", None) if job else None


def from_settings(settings: SchedulerSettings, fire: Callable[[], Any],
                  trigger: BaseTrigger | None = None) -> NightlyScheduler:
    """The scheduler the service runs (`trigger` replaces the cron one in tests)."""
    return NightlyScheduler(fire, trigger or build_trigger(settings), misfire_grace_time=settings.misfire_grace_time,
                            timezone=settings.timezone)
