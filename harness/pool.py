"""The worker pool: spawn, feed, time out, replace and recycle worker processes.

The parent never imports torch here (it must never initialize CUDA). Each
worker is `[python, "-m", "harness.worker"]` in its own session, so Ctrl-C in
the terminal reaches only the parent, which then stops the workers itself, and
a kill takes the worker's whole process group (inductor's compile helpers too).

How an item ends, as seen from here (asv's rule: every end is a status):
result event -> its status; worker died -> killed (signal name; SIGKILL from
the kernel's OOM killer included); no event before --timeout -> timeout;
RSS above the hard limit -> killed ("memory limit"). The hard limit is
1.5 x max_rss_mb, enforced by polling each busy worker's RSS every 0.1 s
(an RLIMIT_AS would break CUDA and many allocators); above max_rss_mb after
a model the worker is recycled instead.
"""
from __future__ import annotations

import collections
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from harness.signature import innermost_torch_frame, signature

PROJECT_ROOT = Path(__file__).resolve().parent.parent
HARD_RSS_FACTOR = 1.5
POLL_S = 0.1
STARTUP_TIMEOUT_S = 300.0


class PoolError(RuntimeError):
    """Workers cannot start at all (a broken --python, a missing torch)."""


def worker_env(threads: int | None = None) -> dict[str, str]:
    """The environment of a worker: project root importable, one thread budget, no downloads."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("HF_HUB_OFFLINE", "1")          # tiny random models only, never weights
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Each worker gets its share of the cores; inductor's own compile pool would
    # oversubscribe them again, so it compiles in-process.
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
        env["MKL_NUM_THREADS"] = str(threads)
    return env


@dataclass
class Group:
    """One model and the configs to compile it under, in one worker (build once, compile many)."""

    model: str
    items: list[tuple[int, str, dict]]   # (index in the caller's list, config name, settings)
    mode: str = "compile"


@dataclass
class Worker:
    """One worker process and what it is doing."""

    proc: subprocess.Popen
    fd: int
    log: Any
    buf: bytes = b""
    ready: bool = False
    group: Group | None = None
    pending: list[tuple[int, str, dict]] = field(default_factory=list)
    current: int | None = None           # index of the item being compiled
    built: bool = False
    deadline: float = 0.0
    items_done: int = 0
    log_mark: int = 0
    spawned: float = field(default_factory=time.monotonic)
    retiring: bool = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, obj: dict) -> bool:
        try:
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def read_events(self) -> tuple[list[dict], bool]:
        """Events available now, and whether the pipe reached EOF."""
        eof = False
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            except OSError:
                eof = True
                break
            if not chunk:
                eof = True
                break
            self.buf += chunk
        events = []
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            if line.strip():
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass  # a torn line can only come from a dying worker
        return events, eof

    def rss_mb(self) -> float:
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def log_tail(self, chars: int = 6000) -> str:
        """What the worker wrote to stderr since the current item started (faulthandler's stack on a crash)."""
        try:
            self.log.flush()
            size = os.fstat(self.log.fileno()).st_size
            start = max(self.log_mark, size - chars)
            self.log.seek(start)
            return self.log.read(size - start).decode(errors="replace")
        except (OSError, ValueError):
            return ""

    def mark_log(self) -> None:
        try:
            self.log_mark = os.fstat(self.log.fileno()).st_size
        except (OSError, ValueError):
            self.log_mark = 0

    def kill(self) -> None:
        """SIGKILL the worker's whole process group and reap it."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.cleanup()

    def cleanup(self) -> None:
        for closer in (lambda: os.close(self.fd), self.log.close, self.proc.stdin.close):
            try:
                closer()
            except (OSError, ValueError):
                pass


def _signal_name(returncode: int | None) -> str:
    if returncode is None:
        return "unknown"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


class Pool:
    """A set of warm workers fed with Groups; `run` yields (index, outcome dict) as items finish."""

    def __init__(self, *, workers: int, timeout: float, python: str | None = None, backend: str = "count",
                 device: str = "cpu", max_items_per_worker: int = 50, max_rss_mb: float = 6000,
                 extra_modules: list[str] | None = None, base_settings: dict | None = None,
                 fresh_workers: bool = False):
        self.size = max(1, workers)
        self.timeout = timeout
        self.python = python or sys.executable
        self.backend, self.device = backend, device
        self.max_items = 1 if fresh_workers else max(1, max_items_per_worker)
        self.fresh = fresh_workers
        self.max_rss_mb = max_rss_mb
        self.hard_rss_mb = max_rss_mb * HARD_RSS_FACTOR
        self.extra_modules = list(extra_modules or [])
        self.base_settings = dict(base_settings or {})
        self.threads = max(1, (os.cpu_count() or 1) // self.size)
        self.logdir = tempfile.TemporaryDirectory(prefix="flagsweep-workers-")
        self.workers: list[Worker] = []
        self.retired: list[Worker] = []
        self.started_ok = 0
        self.startup_failures = 0
        self.stats = collections.Counter()
        # What the worker said about each model it built: a killed item has no report of its own.
        self.model_info: dict[str, dict] = {}
        # What a reproducer needs per model (the worker's build as plain data), for the engine to store.
        self.model_data: dict[str, dict] = {}

    # -- lifecycle -------------------------------------------------------------

    def start(self, n: int | None = None) -> None:
        """Spawn workers now (they warm up, importing torch, while the caller does other work)."""
        for _ in range((n if n is not None else self.size) - len(self.workers)):
            self.workers.append(self._spawn())

    def _spawn(self) -> Worker:
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        log = tempfile.TemporaryFile(dir=self.logdir.name)
        opts = {"fd": write_fd, "threads": self.threads, "extra_modules": self.extra_modules}
        proc = subprocess.Popen(
            [self.python, "-m", "harness.worker", json.dumps(opts)],
            stdin=subprocess.PIPE, stdout=log, stderr=log, pass_fds=(write_fd,),
            env=worker_env(self.threads), cwd=str(PROJECT_ROOT), start_new_session=True,
        )
        os.close(write_fd)
        self.stats["spawned"] += 1
        return Worker(proc=proc, fd=read_fd, log=log)

    def close(self, kill: bool = False) -> None:
        """Stop every worker: politely (exit request) unless `kill`, then SIGKILL whatever is left."""
        for w in self.workers:
            if not kill and w.group is None:
                w.send({"op": "exit"})
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

    def environment(self) -> dict:
        """The environment as the first ready worker sees it (no extra interpreter start)."""
        self.start()
        asked: Worker | None = None
        while True:
            for w in list(self.workers):
                if w.ready and asked is None and w.group is None:
                    if w.send({"op": "env", "device": self.device}):
                        asked = w
            for w, event in self._wait_events():
                if event.get("event") == "env" and w is asked:
                    return event["env"]
                for _ in self._on_event(w, event, collections.deque()):
                    pass  # only "ready" can come before any work is assigned
            for _ in self._check_limits(collections.deque()):
                pass  # reaps workers that died starting (PoolError after repeated failures)
            if asked is not None and asked not in self.workers:
                asked = None  # it died answering; ask another
            self._top_up_to(self.size if asked is None and not self.workers else 0)

    def run(self, groups: list[Group]) -> Iterator[tuple[int, dict]]:
        """Run every item of `groups`; yield (index, outcome dict) in finishing order."""
        queue = collections.deque(groups)
        self.start(min(self.size, max(1, len(queue))) if not self.workers else None)
        while queue or any(w.group for w in self.workers):
            for w in self.workers:
                if queue and w.ready and w.group is None and not w.retiring:
                    self._assign(w, queue.popleft())
            for w, event in self._wait_events():
                yield from self._on_event(w, event, queue)
            yield from self._check_limits(queue)
            self._top_up(queue)
            self._reap()

    def _assign(self, w: Worker, group: Group) -> None:
        w.group, w.pending, w.current, w.built = group, list(group.items), None, False
        w.deadline = time.monotonic() + self.timeout
        w.mark_log()
        ok = w.send({"op": "run", "model": group.model, "items": group.items, "mode": group.mode,
                     "base_settings": self.base_settings, "backend": self.backend, "device": self.device})
        if not ok:
            w.deadline = time.monotonic()  # dead already: _check_limits reaps it next round

    def _on_event(self, w: Worker, event: dict, queue: collections.deque) -> Iterator[tuple[int, dict]]:
        kind = event.get("event")
        if kind == "ready":
            w.ready = True
            self.started_ok += 1
            self.startup_failures = 0
        elif kind == "built":
            w.built = True
            if event.get("repro") and w.group is not None:
                self.model_data[w.group.model] = event["repro"]
            w.deadline = time.monotonic() + self.timeout
        elif kind == "start":
            w.current = event["index"]
            w.deadline = time.monotonic() + self.timeout
            w.mark_log()
        elif kind == "result":
            index = event["index"]
            w.pending = [it for it in w.pending if it[0] != index]
            w.current = None
            w.items_done += 1
            w.deadline = time.monotonic() + self.timeout
            out = event["outcome"]
            self.model_info[out["model"]] = {k: out.get(k) for k in ("stratum", "fingerprint", "text_only")}
            yield index, out
        elif kind == "done":
            w.group, w.pending, w.current = None, [], None
            if w.items_done >= self.max_items or event.get("rss_mb", 0) > self.max_rss_mb:
                self._retire(w)
                self.stats["recycled"] += 1

    def _retire(self, w: Worker) -> None:
        """Let an idle worker exit on its own (recycling); it is reaped later, without waiting."""
        w.retiring = True
        w.send({"op": "exit"})
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

    def _wait_events(self) -> Iterator[tuple[Worker, dict]]:
        """Wait up to POLL_S for events; reap workers whose pipe closed."""
        fds = {w.fd: w for w in self.workers}
        if not fds:
            time.sleep(POLL_S)
            return
        readable, _, _ = select.select(list(fds), [], [], POLL_S)
        for fd in readable:
            w = fds[fd]
            events, eof = w.read_events()
            for event in events:
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

    def _check_limits(self, queue: collections.deque) -> Iterator[tuple[int, dict]]:
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
                status, message = "killed", _signal_name(w.proc.returncode)
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
        self.startup_failures += 1
        if self.started_ok == 0 and self.startup_failures >= 2 or self.startup_failures >= 5:
            self.close(kill=True)
            lines = [ln for ln in tail.strip().splitlines() if ln.strip()][-8:]
            raise PoolError(f"{self.python}: workers do not start ({_signal_name(w.proc.returncode)}):\n" + "\n".join(lines))

    def _fail_group(self, w: Worker, status: str, message: str, tail: str,
                    queue: collections.deque) -> Iterator[tuple[int, dict]]:
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
        for index, config, _ in failed:
            yield index, {
                **self.model_info.get(group.model, {}),
                "model": group.model, "config": config, "status": status, "error_type": kind,
                "error_message": message, "signature": sig, "traceback": tail or None,
                "torch_frame": innermost_torch_frame(tail),
            }
        if rest:
            queue.appendleft(Group(group.model, rest, group.mode))
