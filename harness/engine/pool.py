"""The worker pool: spawn, feed, time out, replace and recycle worker processes.

The parent never imports torch here (it must never initialize CUDA). Each
worker is `[python, "-m", "harness.engine.worker"]` in its own session, so Ctrl-C in
the terminal reaches only the parent, which then stops the workers itself, and
a kill takes the worker's whole process group (inductor's compile helpers too).

How an item ends, as seen from here (asv's rule: every end is a status):
result event -> its status; worker died -> killed (signal name; SIGKILL from
the kernel's OOM killer included); no event before --timeout -> timeout;
RSS above the hard limit -> killed ("memory limit"); a line that does not read as an event of this
protocol (harness.engine.events) -> PoolError, as for workers that cannot start; a worker that says its torch has
no such device -> PoolError, that one line. A result of status out_of_memory is held back and its item re-run
once alone (a fresh worker, nothing else on the device, the whole GPU) when the rest is done: what that gives is
what is yielded.

On a CUDA device the pool is `gpu_workers` per GPU, pinned round robin (CUDA_VISIBLE_DEVICES) when the host has
several; each worker may allocate 1/gpu_workers of its GPU's memory. The hard limit is
1.5 x max_rss_mb, enforced by polling each busy worker's RSS every 0.1 s
(an RLIMIT_AS would break CUDA and many allocators); above max_rss_mb after
a model the worker is recycled instead.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Iterator

from harness.core.outcome import OUT_OF_MEMORY, Outcome
from harness.core.record import RecordError
from harness.core.run_environment import RunEnvironment
from harness.engine import devices, events
from harness.engine.events import Built, CacheCounts, ConfigSpace, Result
from harness.core.options import SweepOptions
from harness.core.signature import innermost_torch_frame, signature
from harness.engine.handle import PROJECT_ROOT, Group, Worker, signal_name, spawn, worker_env

__all__ = ["PROJECT_ROOT", "Group", "Pool", "PoolError", "worker_env"]

HARD_RSS_FACTOR = 1.5
POLL_S = 0.1
STARTUP_TIMEOUT_S = 300.0


class PoolError(RuntimeError):
    """Workers cannot start at all (a broken --python, a missing torch)."""


class Pool:
    """A set of warm workers fed with Groups; `run` yields each item's Result as it finishes (and each model's
    build as it is built)."""

    def __init__(self, options: SweepOptions, *, workers: int | None = None, base_settings: dict | None = None,
                 fresh_workers: bool = False, items: int | None = None, alone: bool = False):
        """`workers`: how many to start (default: what the options say for `items` groups); fresh: one item per
        worker; alone: one worker with the device to itself (an out-of-memory item's re-run)."""
        self.options = options
        self.gpus = devices.gpu_indices(options.device) if options.on_cuda else []
        self.size = 1 if alone else max(1, workers if workers is not None else
                                        options.worker_count(items, gpus=len(self.gpus)))
        self.memory_fraction = 1.0 if alone else 1.0 / max(1, options.gpu_workers)
        self.alone = alone
        self.timeout = options.timeout
        self.python = options.python or sys.executable
        self.backend, self.device = options.backend, options.device
        self.max_items = 1 if fresh_workers else max(1, options.max_items_per_worker)
        self.fresh = fresh_workers
        self.max_rss_mb = options.max_rss_mb
        self.hard_rss_mb = options.max_rss_mb * HARD_RSS_FACTOR
        self.extra_modules = list(options.extra_modules)
        self.accuracy = options.accuracy
        self.sweep_mode = options.mode
        self.base_settings = dict(base_settings or {})
        # A worker's threads: its share of the pool the options ask for, whatever this one starts (fewer groups than
        # workers, a re-run alone): Inductor keys a CPU kernel by its thread count, so such a sweep still finds the
        # others' entries in the shared compile cache, and a re-run compiles what the first run did.
        self.threads = max(1, (os.cpu_count() or 1) // (workers or options.worker_count(gpus=len(self.gpus))))
        self.logdir = tempfile.TemporaryDirectory(prefix="flagsweep-workers-")
        self.workers: list[Worker] = []
        self.retired: list[Worker] = []
        self.started_ok = 0
        self.startup_failures = 0
        self.stats = collections.Counter()
        # Each model's latest outcome: a killed item has no report of its own, so it borrows the model's facts.
        self.seen: dict[str, Outcome] = {}

    # -- lifecycle -------------------------------------------------------------

    def start(self, n: int | None = None) -> None:
        """Spawn workers now (they warm up, importing torch, while the caller does other work)."""
        for _ in range((n if n is not None else self.size) - len(self.workers)):
            self.workers.append(self._spawn())

    def _spawn(self) -> Worker:
        self.stats["spawned"] += 1
        return spawn(self.python, self.threads, self.extra_modules, self.logdir.name, device=self.device,
                     memory_fraction=self.memory_fraction, compile_cache=self.options.shared_cache or "",
                     gpu=self._next_gpu())

    def _next_gpu(self) -> str | None:
        """The GPU with the fewest of this pool's workers (round robin as they start); None: do not pin."""
        if len(self.gpus) < 2:
            return None
        load = collections.Counter(w.gpu for w in self.workers)
        return min(self.gpus, key=lambda g: load[g])

    def close(self, kill: bool = False) -> None:
        """Stop every worker: politely (exit request) unless `kill`, then SIGKILL whatever is left."""
        for w in self.workers:
            if not kill and w.group is None:
                w.send(events.ExitRequest())
                try:
                    w.proc.stdin.close()
                except OSError:
                    pass
        deadline = time.monotonic() + (0 if kill else 5)
        for w in self.workers + self.retired:
            try:
                w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                w.cleanup()
            except subprocess.TimeoutExpired:
                w.kill()
        self.workers, self.retired = [], []
        self.logdir.cleanup()

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        self.close(kill=exc_type is not None)

    # -- requests --------------------------------------------------------------

    def environment(self) -> tuple[RunEnvironment, ConfigSpace]:
        """The environment as the first ready worker sees it, and its config space (no extra interpreter start)."""
        self.start()
        asked: Worker | None = None
        while True:
            for w in list(self.workers):
                if w.ready and asked is None and w.group is None:
                    if w.send(events.EnvRequest(device=self.device, backend=self.backend)):
                        asked = w
            for w, event in self._wait_events():
                if isinstance(event, events.Env) and w is asked:
                    return event.env, event.config_space
                for _ in self._on_event(w, event, collections.deque()):
                    pass  # only "ready" can come before any work is assigned
            for _ in self._check_limits(collections.deque()):
                pass  # reaps workers that died starting (PoolError after repeated failures)
            if asked is not None and asked not in self.workers:
                asked = None  # it died answering; ask another
            self._top_up_to(self.size if asked is None and not self.workers else 0)

    def run(self, groups: list[Group]) -> Iterator[Result | Built | CacheCounts]:
        """Run every item of `groups`; yield each Result in finishing order, and a model's Built (before its
        results) when it has a build to keep."""
        queue = collections.deque(groups)
        held: list[Result] = []
        self.start(min(self.size, max(1, len(queue))) if not self.workers else None)
        while queue or any(w.group for w in self.workers):
            for w in self.workers:
                if queue and w.ready and w.group is None and not w.retiring:
                    self._assign(w, queue.popleft())
            for w, event in self._wait_events():
                for out in self._on_event(w, event, queue):
                    if isinstance(out, Result) and out.outcome.status == OUT_OF_MEMORY and not self.alone:
                        held.append(out)
                    else:
                        yield out
            yield from self._check_limits(queue)
            self._top_up(queue)
            self._reap()
        if held:
            yield from self._rerun_alone(held, groups)

    def _rerun_alone(self, held: list[Result], groups: list[Group]) -> Iterator[Result | Built | CacheCounts]:
        """Each out-of-memory item once more, in a fresh worker with the device to itself (this pool's workers
        stopped first: an idle worker still holds its CUDA cache); the re-run's result stands, attempts 2."""
        self.close()
        self.logdir = tempfile.TemporaryDirectory(prefix="flagsweep-workers-")
        by_index = {index: (group, (index, config, settings))
                    for group in groups for index, config, settings in group.items}
        by_model: dict[str, list] = {}
        for result in held:
            group, item = by_index[result.index]
            by_model.setdefault(group.model, [group]).append(item)
        with Pool(self.options, base_settings=self.base_settings, alone=True) as alone:
            again = [dataclasses.replace(g, items=items) for g, *items in by_model.values()]
            for event in alone.run(again):
                if isinstance(event, Result):
                    event = dataclasses.replace(event, outcome=dataclasses.replace(event.outcome, attempts=2))
                yield event

    def _assign(self, w: Worker, group: Group) -> None:
        w.group, w.pending, w.current, w.built = group, list(group.items), None, False
        w.deadline = time.monotonic() + self.timeout
        w.mark_log()
        ok = w.send(events.RunRequest(model=group.model, items=group.items, mode=group.mode, job=group.job,
                                      prune=sorted(group.prune), pool=group.pool, base_settings=self.base_settings,
                                      backend=self.backend, device=self.device, accuracy=self.accuracy,
                                      answer=group.answer and self.accuracy.answer, together=sorted(group.together),
                                      unanswered=sorted(group.unanswered), audit=sorted(group.audit),
                                      prune_audit=group.prune_audit, prune_audit_n=group.prune_audit_n,
                                      # answering off by the settings: what it would answer is still reported
                                      screen=not self.accuracy.answer, sweep_mode=self.sweep_mode))
        if not ok:
            w.deadline = time.monotonic()  # dead already: _check_limits reaps it next round

    def _on_event(self, w: Worker, event: events.Event,
                  queue: collections.deque) -> Iterator[Result | Built | CacheCounts]:
        if isinstance(event, events.Ready):
            w.ready = True
            self.started_ok += 1
            self.startup_failures = 0
        elif isinstance(event, Built):
            w.built = True
            w.deadline = time.monotonic() + self.timeout
            if event.build is not None:
                yield event
        elif isinstance(event, CacheCounts):
            yield event
        elif isinstance(event, events.Start):
            w.current = event.index
            w.deadline = time.monotonic() + self.timeout
            w.mark_log()
        elif isinstance(event, Result):
            w.pending = [it for it in w.pending if it[0] != event.index]
            w.current = None
            w.items_done += 1
            w.deadline = time.monotonic() + self.timeout
            self.seen[event.outcome.model] = event.outcome
            yield event
        elif isinstance(event, events.Done):
            w.group, w.pending, w.current = None, [], None
            if w.items_done >= self.max_items or (event.rss_mb or 0) > self.max_rss_mb:
                self._retire(w)
                self.stats["recycled"] += 1

    def _retire(self, w: Worker) -> None:
        """Let an idle worker exit on its own (recycling); it is reaped later, without waiting."""
        w.retiring = True
        w.send(events.ExitRequest())
        try:
            w.proc.stdin.close()
        except OSError:
            pass
        self.workers.remove(w)
        self.retired.append(w)

    def _reap(self) -> None:
        for w in list(self.retired):
            if w.proc.poll() is not None:
                w.cleanup()
                self.retired.remove(w)

    def _top_up(self, queue: collections.deque) -> None:
        """Keep as many workers as there is work for, up to the pool size."""
        busy = sum(1 for w in self.workers if w.group)
        wanted = min(self.size, busy + len(queue))
        while len(self.workers) < wanted:
            self.workers.append(self._spawn())

    def _top_up_to(self, n: int) -> None:
        while len(self.workers) < n:
            self.workers.append(self._spawn())

    def _wait_events(self) -> Iterator[tuple[Worker, events.Event]]:
        """Wait up to POLL_S for events; reap workers whose pipe closed. PoolError for an event that does not
        read: its worker runs another protocol (another flagsweep's code), so none of them can be trusted."""
        fds = {w.fd: w for w in self.workers}
        if not fds:
            time.sleep(POLL_S)
            return
        readable, _, _ = select.select(list(fds), [], [], POLL_S)
        for fd in readable:
            w = fds[fd]
            try:
                got, eof = w.read_events()
            except RecordError as exc:
                self.close(kill=True)
                raise PoolError(f"{self.python}: a worker's answer does not read ({exc}); are the workers running "
                                f"this flagsweep's code?") from None
            for event in got:
                yield w, event
            if eof:
                self._on_death(w)

    def _on_death(self, w: Worker) -> None:
        """The worker's pipe closed: it exited or was killed. Mark it for _check_limits."""
        try:
            w.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(w.pid, signal.SIGKILL)
            w.proc.wait()
        w.deadline = 0.0  # handled in _check_limits, which owns requeueing

    def _check_limits(self, queue: collections.deque) -> Iterator[Result]:
        """Deaths, timeouts and the memory limit: end the item with its status, replace the worker."""
        now = time.monotonic()
        for w in list(self.workers):
            died = w.proc.poll() is not None
            if not w.ready and not died:
                if now - w.spawned > STARTUP_TIMEOUT_S:
                    w.kill()
                    died = True
                else:
                    continue
            if died and not w.ready:
                self._startup_failed(w)
                continue
            status = message = None
            if died:
                status, message = "killed", signal_name(w.proc.returncode)
            elif w.group is not None and now > w.deadline:
                status, message = "timeout", f"no result after {self.timeout:g} s"
            elif w.group is not None and (rss := w.rss_mb()) > self.hard_rss_mb:
                status, message = "killed", f"memory limit: RSS {rss:.0f} MB > {self.hard_rss_mb:.0f} MB"
            if status is None:
                continue
            tail = w.log_tail()
            if not died:
                w.kill()
            else:
                w.cleanup()
            self.workers.remove(w)
            self.stats[status] += 1
            yield from self._fail_group(w, status, message, tail, queue)

    def _startup_failed(self, w: Worker) -> None:
        tail = w.log_tail()
        w.cleanup()
        self.workers.remove(w)
        if w.proc.returncode == events.NO_DEVICE_EXIT:   # the worker said why in one line: that is the refusal
            self.close(kill=True)
            raise PoolError(([ln for ln in tail.splitlines() if ln.strip()] or ["no such device"])[-1])
        self.startup_failures += 1
        if self.started_ok == 0 and self.startup_failures >= 2 or self.startup_failures >= 5:
            self.close(kill=True)
            lines = [ln for ln in tail.strip().splitlines() if ln.strip()][-8:]
            raise PoolError(f"{self.python}: workers do not start ({signal_name(w.proc.returncode)}):\n" + "\n".join(lines))

    def _fail_group(self, w: Worker, status: str, message: str, tail: str,
                    queue: collections.deque) -> Iterator[Result]:
        """The item in progress ends with `status`; the group's other items go to a fresh worker."""
        group = w.group
        if group is None:
            return
        kind = "timeout" if status == "timeout" else "killed"
        short = "memory limit" if message.startswith("memory limit") else message
        sig = signature(kind, "" if kind == "timeout" else short)
        if not w.built:
            # It died or hung while building: every config of this model would do the same.
            failed, rest = list(w.pending), []
            message = f"{message} (while building the model)"
        else:
            failed = [it for it in w.pending if it[0] == w.current]
            rest = [it for it in w.pending if it[0] != w.current]
        facts = self.seen.get(group.model)
        for index, config, _ in failed:
            yield Result(index, Outcome(
                model=group.model, config=config, status=status, error_type=kind, error_message=message,
                signature=sig, traceback=tail or None, torch_frame=innermost_torch_frame(tail),
                stratum=facts.stratum if facts else None, fingerprint=facts.fingerprint if facts else None,
                text_only=facts.text_only if facts else False))
        if rest:
            queue.appendleft(dataclasses.replace(group, items=rest))
