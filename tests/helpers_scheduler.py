"""A scheduler trigger whose clock the test writes."""
from __future__ import annotations

from apscheduler.triggers.base import BaseTrigger


class ListTrigger(BaseTrigger):
    """Fires at the given times only: the test decides the clock's story."""

    def __init__(self, times):
        self.times = sorted(times)

    def get_next_fire_time(self, previous_fire_time, now):
        for t in self.times:
            if previous_fire_time is None or t > previous_fire_time:
                return t
        return None
