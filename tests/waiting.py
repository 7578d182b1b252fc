"""The one `wait_for` of the tests: poll a condition until it holds, never asserting on time."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_for(cond: Callable[[], T], limit: float = 120.0, poll: float = 0.02) -> T:
    """The first true value of `cond()`, or its last value after `limit` seconds.

    The limit only stops a hung test (the first zoo scan alone can take 20 s on a busy machine).
    """
    end = time.monotonic() + limit
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(poll)
    return cond()
