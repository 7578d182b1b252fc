"""Reproducer jobs side by side: one thread per worker, each job starting its scripts in fresh interpreters.

A job (one tracking group's verify, shrink, isolation or maintainer's script) spends
its time waiting on subprocesses (harness/engine/script_runner.py), so threads keep
every core busy without a process pool. Jobs touch no store: `done` runs on the
caller's thread, in completion order, and is where results are written (SQLite
connections stay on their thread). The results come back in the jobs' order, so what
is returned does not depend on the worker count.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


def side_by_side(jobs: Sequence[Callable[[], T]], workers: int,
                 done: Callable[[int, T], None] | None = None) -> list[T]:
    """Run `jobs` on up to `workers` threads (1: in order, here); `done(index, result)` on this thread as each ends."""
    if workers <= 1 or len(jobs) <= 1:
        results = []
        for n, job in enumerate(jobs):
            results.append(job())
            if done:
                done(n, results[-1])
        return results
    with ThreadPoolExecutor(max_workers=min(workers, len(jobs)), thread_name_prefix="verify") as pool:
        futures = {pool.submit(job): n for n, job in enumerate(jobs)}
        for future in as_completed(futures):
            if done:
                done(futures[future], future.result())
        return [f.result() for f in sorted(futures, key=futures.__getitem__)]
