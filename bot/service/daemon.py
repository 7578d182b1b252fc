"""`flagsweep serve`: the scheduler, the webhook server and the job runner in one process.

Threads: the webhook server (answers at once, stores jobs), the APScheduler
thread (queues a nightly job on the cron), and two job runners, each taking its
jobs one at a time: the *work* lane (nightlies, and comments that sweep, re-run
or bisect) and the *quick* lane (help, status, mute, cc), so a question is not
answered an hour late behind a nightly. Each thread has its own store connection
(SQLite WAL).
SIGTERM/SIGINT stop intake first, give the job in progress `shutdown_grace`
seconds to finish, and requeue it otherwise; a restart picks it up again.
What the jobs call into other areas is the service's steps (`ServiceSteps`), passed in
explicitly; the commands' own steps are among them.
"""
from __future__ import annotations

import logging
import signal
import sqlite3
import sys
import threading
import time
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator, Protocol

from bot.commands import handlers
from bot.commands.context import Context, PermissionGate, GitHubPort, RetryLater
from bot.commands.steps import CommandSteps, NightlyStep, nightly
from bot.service import scheduler, webhook, server as webhook_server
from bot.settings import Settings
from bot.text.terminal import visible
from state import counters, db, jobs

log = logging.getLogger(__name__)


DRY_RUN_COUNTER = "dry-run-commands"   # state.counters: the numbers of the replies' files, shared by both lanes


@contextmanager
def github_port(settings: Settings, dry_run: bool, out_dir: Path, conn: sqlite3.Connection) -> Iterator[GitHubPort]:
    """The publisher, or in a dry run its twin (whose plan-<n>.json is written as the job ends): the handlers' GitHub.

    The twin's file numbers come from the store (`conn`), so jobs of both lanes never take the same one.
    """
    if not dry_run:
        from bot.github.client import GitHubPublisher
        yield GitHubPublisher(settings.github)
        return
    from bot.github.dryrun import DryRunPublisher
    # No GitHub to ask for roles in a dry run: only the allowlist may start work.
    port = DryRunPublisher(out_dir / "commands", clean=False,   # replies accumulate
                           numbers=lambda above: counters.take(conn, DRY_RUN_COUNTER, above=above))
    try:
        yield port
    finally:
        port.finish()


class PortStep(Protocol):
    def __call__(self, settings: Settings, dry_run: bool, out_dir: Path,
                 conn: sqlite3.Connection) -> AbstractContextManager[GitHubPort]: ...


@dataclass
class ServiceSteps:
    """What the service's jobs call into other areas; tests swap one for a twin of the same type."""

    nightly: NightlyStep = nightly                   # the scheduled nightly job
    port: PortStep = github_port                     # the comment commands' way to GitHub, for one job
    commands: CommandSteps = field(default_factory=CommandSteps)


class Service:
    """The long-running bot; `start()`, then `stop()` (or `serve()` for the signal-driven loop)."""

    def __init__(self, settings: Settings, *, dry_run: bool | None = None, schedule: bool = True,
                 trigger: Any = None, steps: ServiceSteps | None = None, gate: PermissionGate | None = None) -> None:
        self.settings = settings
        self.dry_run = (not settings.github.has_credentials) if dry_run is None else dry_run
        self.out_dir = Path(settings.issues.dry_run_out)
        self.steps = steps or ServiceSteps()
        self.gate = gate or PermissionGate(ttl=settings.commands.permission_ttl, per_hour=settings.commands.rate_limit)
        self.stopping = threading.Event()
        self.queue_lock = threading.Lock()
        self.conn_web = db.connect(settings.state_path)
        self.conn_sched = db.connect(settings.state_path)
        requeued = jobs.requeue_stale(self.conn_sched)
        if requeued:
            log.info("requeued %d job(s) left running by an earlier process", requeued)
        self.lanes = [Lane("work", ("nightly", "command"), db.connect(settings.state_path)),
                      Lane("quick", ("quick",), db.connect(settings.state_path))]
        self.app = webhook.WebhookApp(self.conn_web, settings, notify=self.notify, health=self.health)
        self.server = webhook_server.WebhookServer(self.app, settings.webhook.host, settings.webhook.port,
                                                   grace=min(10.0, settings.scheduler.shutdown_grace))
        self.scheduler = scheduler.from_settings(settings.scheduler, self.queue_nightly, trigger) if schedule else None
        for lane in self.lanes:
            lane.thread = threading.Thread(target=self._run_jobs, args=(lane,), name=f"flagsweep-{lane.name}",
                                           daemon=True)

    @property
    def url(self) -> str:
        """Where the webhook server listens."""
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> None:
        """Start the runners, the webhook server and the scheduler."""
        for lane in self.lanes:
            lane.thread.start()
        self.server.start()
        if self.scheduler:
            self.scheduler.start()
        log.info("serving webhooks on %s/webhook (health: /healthz)%s", self.url,
                 f"; next nightly {self.scheduler.next_run_time}" if self.scheduler else "")

    def notify(self) -> None:
        """Wake the runners: a job was stored (or it is time to stop)."""
        for lane in self.lanes:
            lane.wake.set()

    def queue_nightly(self) -> int | None:
        """The scheduler's action: queue a nightly unless one is queued or running."""
        job_id = scheduler.queue_nightly(self.conn_sched, self.queue_lock)
        if job_id is not None:
            log.info("queued nightly job %s", job_id)
            self.notify()
        return job_id

    def jobs_health(self, conn: sqlite3.Connection) -> dict[str, Any]:
        """Jobs that need a person's look: stuck, failed in the last day, waiting for GitHub."""
        held = {lane.current for lane in self.lanes}
        wall = datetime.now(timezone.utc)
        before = (wall - timedelta(seconds=self.settings.scheduler.stuck_after)).isoformat(timespec="seconds")
        stuck = [_brief(j, "is marked running but no runner of this service holds it")
                 for j in jobs.running(conn) if j.id not in held]
        stuck += [_brief(j, f"has waited since {j.created_at} and nothing took it") for j in jobs.waiting_since(conn, before)]
        since = (wall - timedelta(hours=FAILED_WINDOW_H)).isoformat(timespec="seconds")
        return {"stuck": stuck, "failed": [_brief(j) for j in jobs.failed_since(conn, since)],
                "retrying": [_brief(j) for j in jobs.retrying(conn)], "window_hours": FAILED_WINDOW_H}

    def health(self) -> webhook.Health:
        """GET /healthz: last nightly, queue depth, the job in progress, stuck/failed jobs, the next nightly."""
        from state import runs
        conn = self.conn_web
        last = runs.list_runs(conn, kinds=["nightly"], limit=1)
        nxt = self.scheduler.next_run_time if self.scheduler else None
        problems = self.jobs_health(conn)
        return webhook.Health(ok=not self.stopping.is_set() and not problems["stuck"], details={
            "jobs": problems,
            "queue": jobs.depth(conn),
            "running": [lane.current for lane in self.lanes if lane.current is not None],
            "last_nightly": ({"run": last[0].id, "nightly": last[0].nightly, "status": last[0].status,
                              "finished_at": last[0].finished_at} if last else None),
            "next_nightly": nxt.isoformat() if nxt else None,
            "dry_run": self.dry_run,
        })

    @property
    def runner(self) -> threading.Thread:
        """The work lane's thread (the one that runs nightlies)."""
        return self.lanes[0].thread

    def _run_jobs(self, lane: "Lane") -> None:
        while not self.stopping.is_set():
            lane.wake.clear()   # before claiming: a job stored after the claim still wakes us
            job = jobs.claim_next(lane.conn, kinds=lane.kinds)
            if job is None:
                lane.wake.wait(1.0)
                continue
            lane.current = job.id
            try:
                result = self.execute(job, lane.conn)
                jobs.finish(lane.conn, job.id, result=result)
            except RetryLater as exc:
                self._retry_or_fail(lane.conn, job, exc)
            except BaseException as exc:   # a job never takes the runner down
                log.exception("job %s (%s) failed", job.id, job.kind)
                jobs.finish(lane.conn, job.id, error=f"{type(exc).__name__}: {exc}"[:1000])
            finally:
                lane.current = None

    def _retry_or_fail(self, conn: sqlite3.Connection, job: jobs.Job, exc: RetryLater) -> None:
        """GitHub was down mid-job: queue it again after a backoff, or fail it once `retry_for` has passed."""
        cfg = self.settings.commands
        until = job.retry_until if job.retry_until is not None else time.time() + cfg.retry_for
        delay = min(cfg.retry_backoff * 2 ** job.attempts, 600.0)
        error = f"GitHubUnavailable: {exc}"[:1000]
        if time.time() + delay > until:
            log.error("job %s: GitHub unavailable for %.0fs, giving up: %s", job.id, cfg.retry_for, exc)
            jobs.finish(conn, job.id, error=error)
            return
        log.warning("job %s: GitHub unavailable (attempt %d), retrying in %.1fs: %s", job.id, job.attempts + 1,
                    delay, exc)
        jobs.retry_later(conn, job.id, error=error, delay=delay, until=until, result=exc.result)

    def execute(self, job: jobs.Job, conn: sqlite3.Connection) -> dict[str, Any]:
        """Run one job to its result."""
        if job.kind == "nightly":
            return self.steps.nightly(conn, self.settings, force=False, dry_run=self.dry_run, out_dir=self.out_dir)
        if job.kind in ("command", "quick"):
            with self.steps.port(self.settings, self.dry_run, self.out_dir, conn) as port:
                ctx = Context(conn=conn, settings=self.settings, github=port, gate=self.gate, dry_run=self.dry_run,
                              out_dir=self.out_dir, retry=job.attempts > 0, steps=self.steps.commands,
                              jobs_health=self.jobs_health)
                return handlers.handle_job(ctx, job.payload, job.result if job.attempts else None)
        raise ValueError(f"unknown job kind {job.kind!r}")

    def stop(self, grace: float | None = None) -> bool:
        """Stop intake, let the job in progress finish for `grace` seconds, else requeue it; True if none was cut."""
        grace = self.settings.scheduler.shutdown_grace if grace is None else grace
        if self.scheduler:
            self.scheduler.shutdown()
        self.server.stop()
        self.stopping.set()
        self.notify()
        end = time.monotonic() + grace
        for lane in self.lanes:
            lane.thread.join(max(0.0, end - time.monotonic()))
        clean = True
        for lane in self.lanes:
            if lane.thread.is_alive():
                clean = False
                if lane.current is not None:
                    log.warning("job %s did not finish in %.0fs: requeued for the next start", lane.current, grace)
                    jobs.requeue(self.conn_sched, lane.current)
            else:
                lane.conn.close()
        for conn in (self.conn_web, self.conn_sched):
            conn.close()
        return clean


FAILED_WINDOW_H = 24   # /healthz and `status` list the jobs that failed in this many hours


def _brief(job: jobs.Job, why: str | None = None) -> dict[str, Any]:
    """A job as /healthz and `status` show it (the error's type only: messages may hold machine paths)."""
    out = {"id": job.id, "kind": job.kind, "status": job.status, "created_at": job.created_at,
           "finished_at": job.finished_at, "attempts": job.attempts,
           "error_type": (job.error or "").split(":", 1)[0] or None}
    if why:
        out["why"] = why
    if job.retry_at is not None and job.status == "queued":
        out["next_attempt"] = datetime.fromtimestamp(job.retry_at, timezone.utc).isoformat(timespec="seconds")
    return out


@dataclass
class Lane:
    """One job runner: the kinds it takes, its store connection, the job it is on."""

    name: str
    kinds: tuple[str, ...]
    conn: sqlite3.Connection
    current: int | None = None
    thread: Any = None
    wake: threading.Event = field(default_factory=threading.Event)


def _say(text: str) -> None:
    """One line of `flagsweep serve` on stderr, made visible (it can quote the settings file and the OS's errors)."""
    print(visible(f"flagsweep serve: {text}"), file=sys.stderr, flush=True)


def serve(settings: Settings, *, schedule: bool = True, dry_run: bool | None = None) -> int:
    """Run until SIGTERM/SIGINT; the exit code of `flagsweep serve`."""
    if not settings.webhook.secret:
        _say("no webhook secret ([webhook] secret or FLAGSWEEP_WEBHOOK_SECRET); refusing to accept unsigned deliveries")
        return 2
    try:
        svc = Service(settings, dry_run=dry_run, schedule=schedule)
    except scheduler.ScheduleError as exc:
        _say(str(exc))
        return 2
    except (OSError, OverflowError) as exc:   # OverflowError: a port outside 0-65535
        _say(f"cannot listen on {settings.webhook.host}:{settings.webhook.port}: {exc}")
        return 2
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    svc.start()
    _say(f"listening on {svc.url}/webhook; health at {svc.url}/healthz{' (dry run)' if svc.dry_run else ''}")
    while not done.wait(1.0):   # a timed wait keeps the main thread responsive to signals
        pass
    _say("stopping")
    clean = svc.stop()
    return 0 if clean else 3
