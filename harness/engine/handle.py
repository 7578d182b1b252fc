"""The parent's handle on one worker process: its environment, its pipe, its events, its memory, its log.

bot and harness code reach workers through harness/engine/pool.py; this module only
knows one process at a time (spawned there, as `python -m harness.engine.worker`).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from harness import PROJECT_ROOT
from harness.engine import events


def worker_env(threads: int | None = None, gpu: str | None = None) -> dict[str, str]:
    """The environment of a worker: project root importable, one thread budget, no downloads; `gpu`: the one GPU
    it sees (CUDA_VISIBLE_DEVICES, the child's own interface: its "cuda" is then that GPU)."""
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
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    return env


@dataclass
class Group:
    """One model and what to do with it in one worker: compile it under configs (build once, compile many),
    run one eager forward (mode "eager"), or call a job (mode "job": `job` is "module:function")."""

    model: str
    items: list[tuple[int, str, dict]]   # (index in the caller's list, label: the config name, settings)
    mode: str = "compile"                # compile | eager | job
    job: str | None = None
    # Configs that may be pruned: when the baseline (run first, in the same request) never read any of their
    # keys, the worker reports them without compiling (reason "not_read").
    prune: frozenset[str] = frozenset()
    pool: bool = False                   # the prune configs the baseline read are compiled together first
    answer: bool = True                  # later calls answered from the baseline where they cannot differ (an audit: no)
    # Configs named one by one, compiled together after the baseline where their results are equal (never pruned).
    together: frozenset[str] = frozenset()
    unanswered: frozenset[str] = frozenset()   # configs whose later calls are never answered (quarantined)
    audit: frozenset[str] = frozenset()        # configs whose answered item is traced in full too (the answer audit)
    prune_audit: list[str] = field(default_factory=list)   # the pruning audit's order of the prunable configs ...
    prune_audit_n: int = 0                                  # ... and how many pruned ones are traced again


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
    gpu: str | None = None               # the GPU it was pinned to (several GPUs on one host), else None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, request: events.Request) -> bool:
        """Write one request line; False when the worker's stdin is gone (it died)."""
        try:
            self.proc.stdin.write(events.encode(request))
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def read_events(self) -> tuple[list[events.Event], bool]:
        """Events available now, and whether the pipe reached EOF; RecordError for a line that does not read as
        an event of this protocol."""
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
        got = []
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            if line.strip():
                try:
                    data = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn line can only come from a dying worker
                got.append(events.read_event(data))
        return got, eof

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


def spawn(python: str, threads: int, extra_modules: list[str], logdir: str, *, device: str = "cpu",
          memory_fraction: float = 1.0, compile_cache: str = "", gpu: str | None = None) -> Worker:
    """Start one worker process (its own session, output to a log file in `logdir`, events on a pipe); on a CUDA
    device with `memory_fraction` of its GPU (`gpu`: pinned to that one)."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    log = tempfile.TemporaryFile(dir=logdir)
    opts = events.Startup(fd=write_fd, threads=threads, extra_modules=list(extra_modules), device=device,
                          memory_fraction=memory_fraction, compile_cache=compile_cache, scratch=logdir)
    # A fresh interpreter (never a fork): the parent holds no CUDA context for a child to inherit.
    proc = subprocess.Popen(
        [python, "-m", "harness.engine.worker", opts.to_json()],
        stdin=subprocess.PIPE, stdout=log, stderr=log, pass_fds=(write_fd,),
        env=worker_env(threads, gpu), cwd=str(PROJECT_ROOT), start_new_session=True,
    )
    os.close(write_fd)
    return Worker(proc=proc, fd=read_fd, log=log, gpu=gpu)


def signal_name(returncode: int | None) -> str:
    if returncode is None:
        return "unknown"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"
