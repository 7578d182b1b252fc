"""The service end to end: signed deliveries through the real webhook server, stored jobs, every command
answered on the fake GitHub through the real publisher. Only the sweep and bisect's installs are twins."""
from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from bot.commands.context import PermissionGate
from bot.commands.steps import CommandSteps
from bot.pipeline import nightly
from bot.ranges.bisect import Probe
from bot.service.daemon import Service, ServiceSteps
from bot.settings import (CommandSettings, IssueSettings, NightlySettings, SchedulerSettings, Settings, VerifySettings,
                          WebhookSettings)
from bot.service.webhook import sign
from harness.zoo import registry
from state import db, jobs, links, runs
from tests.fakesweep import MODELS, World
from tests.helpers_scheduler import ListTrigger
from tests.waiting import wait_for

FIXTURES = Path(__file__).parent / "fixtures" / "webhooks"
SECRET = "e2e-secret"
CONFIG = "capture_scalar_outputs"
SIGNATURE = "RuntimeError: boom uN"
TRIAGER, STRANGER = "tina-triage", "sam-stranger"


class Bot:
    """A started Service on a temp store, talking to the fake GitHub, with one tracking issue seeded."""

    def __init__(self, tmp: Path, fake, *, trigger=None, per_hour: int = 10, real_publish: bool = False,
                 nightly_hook=None, retry_for: float = 3600.0) -> None:
        self.fake, self.repo, self.world = fake, fake.repo, World()
        s = Settings(
            state_path=tmp / "state.sqlite",
            # AlphaModel: a model of the twin's corpus (the gate's canary)
            nightly=NightlySettings(canaries=["AlphaModel"], configs=[CONFIG], torch="current"),
            github=fake.settings(retry_backoff=0.05),   # the publisher's own retries: quick
            webhook=WebhookSettings(secret=SECRET, port=0),
            commands=CommandSettings(retry_backoff=0.2, retry_for=retry_for),   # a job waiting out an outage: quick too
            # min_models=1: one-model crashes filed at once (the evidence rule: test_filing.py)
            issues=IssueSettings(dry_run_out=str(tmp / "out"), min_models=1),
            verify=VerifySettings(enabled=False))     # the twin's models have no real reproducer to run
        self.settings = s
        fake.state.set_role(self.repo, TRIAGER, "triage")
        fake.state.add_user(STRANGER)
        # The night before: GammaModel crashes under the flag; that is the issue's signature.
        self.conn = db.connect(s.state_path)
        self.world.crashing = {"GammaModel"}
        first = nightly.run_nightly(self.conn, s, steps=self.world.steps(real_publish=real_publish),
                                    dry_run=not real_publish, out_dir=tmp / "out")
        self.first_run = first.run_id
        if real_publish:
            # The real publisher filed the tracking issue: the commands go to it.
            link = next(l for l in links.all_links(self.conn, self.repo).values() if l.signature == SIGNATURE)
            self.number, self.key = link.number, link.key
        else:
            issue = fake.state.create_issue(self.repo, f"{CONFIG}=True crashes 1/5 models with RuntimeError",
                                            body="<!-- flagsweep:key=seeded -->\nold body", user=fake.bot_login)
            self.number, self.key = issue.number, "seeded"
            links.upsert(self.conn, links.Link(key="seeded", repo=self.repo, number=self.number, kind="tracking",
                                               config=CONFIG, signature=SIGNATURE))
        self.reruns: list[bool] = []      # `force` of each rerun
        self.probes: list[str] = []
        self.on_rerun = lambda: None      # a test's hook, called as a rerun starts

        def rerun(conn, settings, *, force, dry_run, out_dir):
            self.on_rerun()
            self.reruns.append(force)
            return nightly.run_nightly(conn, settings, torch=settings.nightly.torch, force=force, dry_run=dry_run,
                                       out_dir=out_dir, progress=False,
                                       steps=self.world.steps(real_publish=real_publish))

        def probe(settings, label, model, config):
            self.probes.append(label)
            key = "error: RuntimeError: boom uN" if label >= "2026-11-14" else "ok: 2 graphs"
            return Probe(label, f"2.14.0.dev{label.replace('-', '')}+cpu", f"{label.replace('-', '')}cafe", key)

        pipeline = self.world.steps()      # a command's sweep: the world's; the builds a bisect spans: 11-07 missing
        pipeline.list_builds = lambda settings: [f"2026-11-{d:02d}" for d in range(1, 21) if d != 7]
        commands = CommandSteps(pipeline=pipeline, rerun=rerun, probe=probe)
        for m in MODELS:   # test-only names: resolve() answers without scanning transformers
            registry.register(m, "decoder_llm", lambda device: None)
        steps = ServiceSteps(commands=commands)
        if nightly_hook:
            steps.nightly = nightly_hook   # else the real nightly
        self.service = Service(s, dry_run=False, schedule=trigger is not None, trigger=trigger, steps=steps,
                               gate=PermissionGate(per_hour=per_hour))
        self.service.start()

    def close(self) -> None:
        self.service.stop(grace=5)
        self.conn.close()
        for m in MODELS:
            registry.EXTRA.pop(m, None)

    def post(self, body: str, user: str, *, action: str = "created", previous: str | None = None,
             delivery: str | None = None, number: int | None = None) -> httpx.Response:
        number = number or self.number
        c = self.fake.state.add_comment(self.repo, number, body, user=user)
        data = json.loads((FIXTURES / f"issue_comment.{action}.payload.json").read_text())
        data["comment"].update(id=c.id, body=body)
        data["comment"]["user"]["login"] = user
        data["issue"]["number"] = number
        data["repository"]["full_name"] = self.repo
        if previous is not None:
            data["changes"] = {"body": {"from": previous}}
        raw = json.dumps(data).encode()
        self.last_comment = c
        return httpx.post(self.service.url + "/webhook", content=raw, timeout=10, headers={
            "X-GitHub-Event": "issue_comment", "X-GitHub-Delivery": delivery or f"d-{c.id}",
            "X-Hub-Signature-256": sign(SECRET, raw), "Content-Type": "application/json"})

    def command(self, body: str, user: str = TRIAGER, **kw) -> tuple[jobs.Job, list[str]]:
        """Post a comment, wait for its job, return the job and the bot's new replies."""
        before = len(self.replies())
        r = self.post(body, user, **kw)
        assert r.status_code == 202 and r.json()["status"] == "queued", r.text
        job = wait_for(lambda: (j := jobs.get(self.conn, r.json()["job"])) and j.status in ("done", "failed") and j)
        assert job and job.status == "done", job
        return job, self.replies()[before:]

    def replies(self) -> list[str]:
        return [c.body for c in self.fake.state.comments(self.repo, self.number) if c.user == self.fake.bot_login]

    def reactions(self) -> list[str]:
        return [r.content for r in self.last_comment.reactions]


@pytest.fixture
def bot(tmp_path, fake_github):
    b = Bot(tmp_path, fake_github)
    yield b
    b.close()


def test_help_and_status_are_open_to_everyone(bot):
    job, replies = bot.command("@flagsweep-bot help", user=STRANGER)
    assert len(replies) == 1 and "Commands I understand" in replies[0]
    assert "`@flagsweep-bot sweep --config CONFIG --models MODELS [--base-setting K=V] [--modes A,B]`" in replies[0]
    assert bot.reactions() == ["eyes", "+1"]
    job, replies = bot.command("@flagsweep-bot status", user=STRANGER)
    assert SIGNATURE in replies[0] and "first seen: 2026-11-21" in replies[0] and "GammaModel" in replies[0]
    assert "last nightly: 2026-11-21" in replies[0]


def test_rerun_from_a_stranger_is_refused_and_nothing_runs(bot):
    job, replies = bot.command("@flagsweep-bot rerun", user=STRANGER)
    assert job.result["commands"][0]["outcome"] == "refused"
    assert "needs triage permission" in replies[0] and "Nothing was run" in replies[0]
    assert bot.reruns == [] and bot.reactions() == []


def test_rerun_from_a_triager_sweeps_the_issue_models(bot):
    bot.world.version, bot.world.date = "2.14.0.dev20261122+cpu", "2026-11-22"
    bot.world.crashing = set()   # fixed on the new nightly
    job, replies = bot.command("@flagsweep-bot rerun")
    assert bot.reruns == [True]                  # forced: the nightly is swept again though it is stored
    assert "Re-ran the nightly set (5 models) on torch `2.14.0.dev20261122+cpu`" in replies[0]
    assert "| GammaModel | ok | 1 |" in replies[0] and "fixed 1" in replies[0]
    assert not any(f"| {m} |" in replies[0] for m in MODELS if m != "GammaModel")   # only this issue's models
    assert bot.reactions() == ["eyes", "+1"]


def test_sweep_command_replies_with_the_effects_table(bot):
    job, replies = bot.command(f"@flagsweep-bot sweep --config {CONFIG} --models 'Gamma*'")
    assert "| GammaModel | crashes | 2 | — |" in replies[0] and "RuntimeError: boom uN" in replies[0]
    assert bot.world.sweeps[-1][2] == ("GammaModel",)
    job, replies = bot.command(f"@flagsweep-bot sweep --config {CONFIG} --models 'Gamma*' --modes eval,train-bf16")
    assert "over 1 model (run" in replies[0] and "over 1 model in train bfloat16 (run" in replies[0]
    assert [r.options.sweep.mode.name for r in runs.list_runs(bot.conn, limit=2)] == ["train-bf16", "eval"]


def test_bad_and_hostile_commands_get_usage_or_errors_and_run_nothing(bot):
    sweeps = len(bot.world.sweeps)
    job, replies = bot.command("@flagsweep-bot sweep --config x --models '$(reboot)'")
    assert "not a valid model glob" in replies[0] and "usage:" in replies[0] and bot.reactions() == ["confused"]
    job, replies = bot.command("@flagsweep-bot sweep --config no_such_flag --models Gamma*")
    assert "unknown config 'no\\_such\\_flag'" in replies[0]   # foreign text is escaped for Markdown
    job, replies = bot.command(f"@flagsweep-bot sweep --config {CONFIG} --models NoSuchModel")
    assert "unknown model 'NoSuchModel'" in replies[0]
    job, replies = bot.command(f"@flagsweep-bot sweep --config {CONFIG} --models Gamma* --modes eval,warp-speed")
    assert "--modes: unknown mode 'warp-speed' (known: bf16," in replies[0]
    # A key that is not a dotted identifier is refused here; whether a key exists is asked of the torch
    # that runs the sweep (the real sweep's engine; see test_config_unavailable), not of the bot's own.
    job, replies = bot.command(f"@flagsweep-bot sweep --config {CONFIG} --models Gamma* "
                               "--base-setting 'torch._dynamo.config.x;__import__(\"os\")=1'")
    assert "I could not read this command" in replies[0]
    job, replies = bot.command(f"@flagsweep-bot sweep --config {CONFIG} --models Gamma* "
                               "--base-setting torch.backends.cudnn.enabled=1")
    assert "could not run:" in replies[0] and "not under one of" in replies[0]
    assert len(bot.world.sweeps) == sweeps


def test_mute_unmute_and_cc(bot):
    bot.command("@flagsweep-bot mute")
    assert links.get(bot.conn, "seeded").muted
    job, replies = bot.command("@flagsweep-bot unmute\n@flagsweep-bot cc add @alice bob")
    assert not links.get(bot.conn, "seeded").muted
    assert links.get(bot.conn, "seeded").cc == ["@alice", "@bob"]
    # One reply for the comment; echoed handles (and the lines it quotes) are defused: it pings nobody.
    assert len(replies) == 1 and "Unmuted" in replies[0] and "`@\u200dalice`" in replies[0]
    assert "@alice" not in replies[0]
    bot.command("@flagsweep-bot cc remove @ALICE")
    assert links.get(bot.conn, "seeded").cc == ["@bob"]


def test_bisect_finds_the_pair_and_explains_an_empty_range(bot):
    job, replies = bot.command(f"@flagsweep-bot bisect --config {CONFIG} --model GammaModel "
                               "--good 2026-11-01 --bad 2026-11-20")
    assert "| last as before | 2026-11-13 |" in replies[0] and "`20261113cafe`" in replies[0]
    assert "| first changed | 2026-11-14 |" in replies[0] and "`20261114cafe`" in replies[0]
    assert len(bot.probes) <= 2 + 5
    job, replies = bot.command(f"@flagsweep-bot bisect --config {CONFIG} --model GammaModel "
                               "--good 2026-12-01 --bad 2026-12-09")
    assert "fewer than two nightlies between 2026-12-01 and 2026-12-09" in replies[0]


def test_edited_comment_runs_only_new_commands(bot):
    job, replies = bot.command("@flagsweep-bot mute\n@flagsweep-bot status", action="edited",
                               previous="@flagsweep-bot mute")
    assert [c["command"] for c in job.result["commands"]] == ["status"]
    assert not links.get(bot.conn, "seeded").muted


def test_rate_limit_per_user(tmp_path, fake_github):
    b = Bot(tmp_path, fake_github, per_hour=2)
    try:
        b.command("@flagsweep-bot mute")
        b.command("@flagsweep-bot unmute")
        job, replies = b.command("@flagsweep-bot mute")
        assert job.result["commands"][0]["outcome"] == "rate limited" and "limit" in replies[0]
        assert not links.get(b.conn, "seeded").muted
        job, replies = b.command("@flagsweep-bot help")   # answering questions is not rate limited
        assert "Commands I understand" in replies[0]
    finally:
        b.close()


def test_a_strangers_comment_of_100_commands_gets_one_reply(bot):
    """Issue 31 item 1: one comment, one reply, however many commands it holds; the cap runs the first ones."""
    lines = []
    for i in range(34):
        lines += [f"@flagsweep-bot help {'' if i == 0 else i}".strip(),            # all but the first: bad commands
                  f"@flagsweep-bot sweep --config c{i} --models Gamma*", f"@flagsweep-bot frob{i}"]
    assert len(lines[:100]) == 100
    sweeps = len(bot.world.sweeps)
    job, replies = bot.command("\n".join(lines[:100]), user=STRANGER)
    assert len(replies) == 1
    cap = bot.settings.commands.max_per_comment
    assert [c["outcome"] for c in job.result["commands"]][:3] == ["answered", "refused", "bad command"]
    assert len(job.result["commands"]) == cap and job.result["not_run"] == 100 - cap
    assert f"{100 - cap} more commands in this comment were not run: one comment runs at most {cap}" in replies[0]
    assert replies[0].count("needs triage permission") == 1          # refused once on this issue this hour
    assert len(bot.world.sweeps) == sweeps
    # The next comment: help again, but the refusal is not answered again on this issue within the hour.
    job, replies = bot.command("@flagsweep-bot help\n@flagsweep-bot rerun", user=STRANGER)
    assert len(replies) == 1 and "Commands I understand" in replies[0] and "needs triage permission" not in replies[0]
    assert job.result["commands"][1]["outcome"] == "refused (answered on this issue within the hour)"
    assert bot.reruns == []


def test_the_budget_outlives_a_restart_of_the_service(tmp_path, fake_github):
    """The per-user budget is in the store: a new Service (a restart) does not give it back."""
    b = Bot(tmp_path, fake_github, per_hour=2)
    try:
        b.command("@flagsweep-bot mute")
        b.command("@flagsweep-bot unmute")
        b.service.stop(grace=5)
        b.service = Service(b.settings, dry_run=False, schedule=False, steps=b.service.steps,
                            gate=PermissionGate(per_hour=2))
        b.service.start()
        job, replies = b.command("@flagsweep-bot mute")
        assert job.result["commands"][0]["outcome"] == "rate limited" and "limit" in replies[0]
        assert not links.get(b.conn, "seeded").muted
    finally:
        b.close()


def test_comments_on_issues_the_bot_does_not_keep_are_left_alone(bot):
    other = bot.fake.state.create_issue(bot.repo, "a human's issue", user="alice")
    r = bot.post("@flagsweep-bot help", TRIAGER, number=other.number)
    job = wait_for(lambda: (j := jobs.get(bot.conn, r.json()["job"])) and j.status == "done" and j)
    assert job.result == {"ignored": "not an issue the bot keeps"}
    assert [c.user for c in bot.fake.state.comments(bot.repo, other.number)] == [TRIAGER]


def test_done_when_serve_takes_a_triagers_rerun_refuses_a_stranger_and_fires_the_nightly(tmp_path, fake_github):
    fired = []
    soon = datetime.now(timezone.utc) + timedelta(seconds=1)
    b = Bot(tmp_path, fake_github, trigger=ListTrigger([soon]), real_publish=True,
            nightly_hook=lambda conn, settings, *, force, dry_run, out_dir: fired.append(force) or {"ok": True})
    try:
        issue = fake_github.state.repo(b.repo).issues[b.number]
        assert "1/5" in issue.title
        body_before = issue.body
        health = httpx.get(b.service.url + "/healthz", timeout=10).json()
        assert health["last_nightly"]["nightly"] == "2026-11-21" and health["queue"] == 0
        assert health["next_nightly"].startswith(soon.isoformat()[:19])
        b.world.version, b.world.date = "2.14.0.dev20261122+cpu", "2026-11-22"
        b.world.crashing = {"GammaModel", "DeltaModel"}
        job, replies = b.command("@flagsweep-bot rerun", user=TRIAGER)
        assert job.result["commands"][0]["outcome"] == "rerun"
        # Two comments: the publisher's "what changed" on the issue, then the command's answer.
        assert "newly crashing (1): `DeltaModel`" in replies[0]
        assert "Re-ran" in replies[1] and "The issue body is updated" in replies[1]
        # The real publisher rewrote the tracking issue: DeltaModel now crashes too.
        assert "2/5" in issue.title and issue.body != body_before
        job, replies = b.command("@flagsweep-bot rerun", user=STRANGER)
        assert job.result["commands"][0]["outcome"] == "refused" and len(b.reruns) == 1
        assert wait_for(lambda: fired)
        nightly_jobs = jobs.list_jobs(b.conn, kind="nightly")
        assert wait_for(lambda: jobs.list_jobs(b.conn, kind="nightly")[0].status == "done")
        assert len(nightly_jobs) == 1 and nightly_jobs[0].payload == {"source": "schedule"} and fired == [False]
    finally:
        b.close()


def _settled(bot, job_id):
    return wait_for(lambda: (j := jobs.get(bot.conn, job_id)) and j.status in ("done", "failed") and j)


def test_a_command_during_a_reactions_outage_is_answered_once(bot):
    """Issue 12 item 1: with POST .../reactions failing, the 👀 is skipped and the command still answered."""
    down = bot.fake.faults.outage(method="POST", path="/reactions")
    r = bot.post("@flagsweep-bot status", TRIAGER)
    job = _settled(bot, r.json()["job"])
    assert job.status == "done" and job.result["commands"][0]["outcome"] == "answered"
    replies = bot.replies()
    assert len(replies) == 1 and SIGNATURE in replies[0]
    assert bot.reactions() == []                 # the acknowledgement was best effort
    bot.fake.faults.end(down)
    job2, replies2 = bot.command("@flagsweep-bot help")
    assert len(replies2) == 1 and bot.reactions() == ["eyes", "+1"]


def test_a_command_during_a_comments_outage_is_retried_and_answered_once_after_recovery(bot):
    """The reply cannot be posted: the job waits in the queue with a backoff and is answered when GitHub is back."""
    down = bot.fake.faults.outage(method="POST", path=f"/issues/{bot.number}/comments")
    r = bot.post("@flagsweep-bot status\n@flagsweep-bot help", TRIAGER)
    job_id = r.json()["job"]
    assert wait_for(lambda: jobs.get(bot.conn, job_id).attempts >= 2)   # tried, backed off, tried again
    job = jobs.get(bot.conn, job_id)
    assert job.status in ("queued", "running") and "GitHubUnavailable" in job.error
    health = httpx.get(bot.service.url + "/healthz", timeout=10).json()
    assert [j["id"] for j in health["jobs"]["retrying"]] == [job_id]
    assert bot.replies() == []
    bot.fake.faults.end(down)
    job = _settled(bot, job_id)
    assert job.status == "done" and [c["outcome"] for c in job.result["commands"]] == ["answered", "answered"]
    replies = bot.replies()
    assert len(replies) == 1 and SIGNATURE in replies[0] and "Commands I understand" in replies[0]
    time.sleep(0.5)                                  # nothing else is coming: no duplicate reply later
    assert len(bot.replies()) == 1
    assert httpx.get(bot.service.url + "/healthz", timeout=10).json()["jobs"]["retrying"] == []


def test_an_outage_at_the_reply_does_not_run_the_comments_commands_twice(bot):
    """The commands run, the one reply meets the outage: the retry posts it without running them again."""
    down = bot.fake.faults.outage(method="POST", path=f"/issues/{bot.number}/comments")
    r = bot.post("@flagsweep-bot rerun\n@flagsweep-bot help", TRIAGER)
    job_id = r.json()["job"]
    assert wait_for(lambda: jobs.get(bot.conn, job_id).attempts >= 2)
    assert bot.replies() == [] and bot.reruns == [True]
    assert [c["outcome"] for c in jobs.get(bot.conn, job_id).result["commands"]] == ["rerun", "answered"]
    bot.fake.faults.end(down)
    job = _settled(bot, job_id)
    replies = bot.replies()
    assert job.status == "done" and len(replies) == 1 and bot.reruns == [True]     # run once, answered once
    assert "Re-ran the nightly set" in replies[0] and "Commands I understand" in replies[0]


def test_a_job_is_failed_when_the_outage_outlasts_retry_for_and_status_says_so(tmp_path, fake_github):
    b = Bot(tmp_path, fake_github, retry_for=0.5)
    try:
        down = fake_github.faults.outage(method="POST", path=f"/issues/{b.number}/comments")
        r = b.post("@flagsweep-bot help", TRIAGER)
        job = _settled(b, r.json()["job"])
        assert job.status == "failed" and job.error.startswith("GitHubUnavailable")
        health = httpx.get(b.service.url + "/healthz", timeout=10).json()
        assert [j["id"] for j in health["jobs"]["failed"]] == [job.id]
        assert health["jobs"]["failed"][0]["error_type"] == "GitHubUnavailable"
        fake_github.faults.end(down)
        _, replies = b.command("@flagsweep-bot status", user=STRANGER)
        assert "1 failed in the last 24 h" in replies[0] and f"job {job.id} (quick)" in replies[0]
        assert "`GitHubUnavailable`" in replies[0]
    finally:
        b.close()


def test_permission_cache_and_budget_window_follow_an_injected_clock(tmp_path):
    now = [1000.0]
    lookups = []
    gate = PermissionGate(ttl=300, per_hour=2, clock=lambda: now[0])

    def lookup(login):
        lookups.append(login)
        return "triage"
    assert gate.role("Tina", lookup) == "triage" and gate.role("tina", lookup) == "triage"
    assert lookups == ["Tina"]                     # cached, case-insensitively
    now[0] += 301
    gate.role("tina", lookup)
    assert len(lookups) == 2                       # expired after the TTL
    conn = db.connect(tmp_path / "s.sqlite")
    where = ("o/r", 7)
    assert gate.spend(conn, "u", where, "run") and gate.spend(conn, "U", where, "refused")
    assert not gate.spend(conn, "u", where, "usage")
    now[0] += 3600
    assert gate.spend(conn, "u", where, "run")     # the hour has passed


def test_questions_are_answered_while_a_nightly_runs(tmp_path, fake_github):
    """The quick lane: `help` and `mute` do not wait behind a long job in the work lane."""
    import threading

    started, release = threading.Event(), threading.Event()

    def long_nightly(conn, settings, *, force, dry_run, out_dir):
        started.set()
        release.wait(60)
        return {"ok": True}
    b = Bot(tmp_path, fake_github, nightly_hook=long_nightly)
    try:
        nightly_job = b.service.queue_nightly()
        assert started.wait(30)
        job, replies = b.command("@flagsweep-bot help\n@flagsweep-bot mute")
        assert job.kind == "quick" and "Commands I understand" in replies[0] and links.get(b.conn, b.key).muted
        assert jobs.get(b.conn, nightly_job).status == "running"
        released_at_start: list[bool] = []
        b.on_rerun = lambda: released_at_start.append(release.is_set())
        r = b.post("@flagsweep-bot rerun", TRIAGER)
        assert jobs.get(b.conn, r.json()["job"]).kind == "command"   # a sweep waits in the work lane
        release.set()
        assert wait_for(lambda: jobs.get(b.conn, r.json()["job"]).status == "done")
        # However late or early the work lane looked at it, the rerun started only once the nightly let go.
        assert released_at_start == [True]
    finally:
        release.set()
        b.close()


def test_shutdown_requeues_a_job_that_outlives_the_grace(tmp_path):
    import threading

    s = Settings(state_path=tmp_path / "state.sqlite", webhook=WebhookSettings(secret=SECRET, port=0))
    started, release = threading.Event(), threading.Event()

    def slow_nightly(conn, settings, *, force, dry_run, out_dir):
        started.set()
        release.wait(30)
        return {"ok": True}
    svc = Service(s, dry_run=True, schedule=False, steps=ServiceSteps(nightly=slow_nightly))
    svc.start()
    job_id = svc.queue_nightly()
    assert started.wait(30)
    assert svc.health().details["running"] == [job_id]
    assert svc.stop(grace=0.2) is False
    conn = db.connect(s.state_path)
    try:
        assert jobs.get(conn, job_id).status == "queued"     # a restart will run it again
        release.set()
        svc.runner.join(10)
        assert jobs.get(conn, job_id).status == "queued"     # the cut-off runner did not mark it done
        # The next start finds it queued and runs it to the end.
        svc2 = Service(s, dry_run=True, schedule=False,
                       steps=ServiceSteps(nightly=lambda conn, settings, *, force, dry_run, out_dir: {"second": True}))
        svc2.start()
        assert wait_for(lambda: jobs.get(conn, job_id).status == "done")
        assert jobs.get(conn, job_id).result == {"second": True}
        assert svc2.stop(grace=5) is True
    finally:
        conn.close()


def test_flagsweep_serve_answers_health_and_stops_on_sigterm(tmp_path):
    import os
    import re
    import signal
    import subprocess
    import sys

    settings_file = tmp_path / "flagsweep.toml"
    settings_file.write_text('[webhook]\nport = 0\n[scheduler]\ncron = "0 3 * * *"\ntimezone = "Europe/Berlin"\n'
                             '[github]\nbase_url = "http://127.0.0.1:9"\n')
    env = dict(os.environ, FLAGSWEEP_WEBHOOK_SECRET=SECRET, FLAGSWEEP_STATE=str(tmp_path / "s.sqlite"))
    env.pop("FLAGSWEEP_GITHUB_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli.main", "--settings", str(settings_file), "serve"],
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        url = None
        for line in proc.stderr:
            m = re.search(r"listening on (http://[\d.]+:\d+)/webhook", line)
            if m:
                url = m.group(1)
                break
        assert url, "serve did not start"
        health = httpx.get(url + "/healthz", timeout=10).json()
        assert health["ok"] and health["queue"] == 0 and health["dry_run"] is True
        assert health["next_nightly"].endswith(("+01:00", "+02:00")) and "T03:00:00" in health["next_nightly"]
        r = httpx.post(url + "/webhook", content=b"{}", timeout=10, headers={"X-GitHub-Event": "ping"})
        assert r.status_code == 401
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        rest = proc.stderr.read()
        # The access log: one line per request, the refused delivery included.
        assert '"GET /healthz" 200' in rest and '"POST /webhook" 401' in rest and "flagsweep serve: stopping" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_refuses_to_start_without_a_webhook_secret(tmp_path):
    from bot.service.daemon import serve

    s = Settings(state_path=tmp_path / "s.sqlite")
    assert serve(s) == 2


def test_healthz_names_stuck_jobs(tmp_path):
    """A job marked running that no runner holds (another process's, or one lost), and one nothing takes."""
    s = Settings(state_path=tmp_path / "state.sqlite", webhook=WebhookSettings(secret=SECRET, port=0),
                 scheduler=SchedulerSettings(stuck_after=1.0))
    svc = Service(s, dry_run=True, schedule=False)
    svc.lanes[0].kinds = ("nightly",)   # a work lane that hangs on its way to comments: a command job waits
    svc.start()
    conn = db.connect(s.state_path)
    try:
        first = httpx.get(svc.url + "/healthz", timeout=10)
        assert first.status_code == 200 and first.json()["jobs"]["stuck"] == []
        orphan = jobs.enqueue(conn, "command", {})      # claimed by another process (this connection)
        assert jobs.claim_next(conn, kinds=("command",)).id == orphan
        waiting = jobs.enqueue(conn, "command", {})
        time.sleep(2.1)                       # past stuck_after (timestamps are whole seconds)
        answer = httpx.get(svc.url + "/healthz", timeout=10)
        assert answer.status_code == 503          # a monitor that reads only the status sees the problem
        health = answer.json()
        stuck = {j["id"]: j["why"] for j in health["jobs"]["stuck"]}
        assert health["ok"] is False and set(stuck) == {orphan, waiting}
        assert "no runner of this service holds it" in stuck[orphan] and "nothing took it" in stuck[waiting]
    finally:
        svc.stop(grace=5)
        conn.close()


def test_serve_with_a_port_out_of_range_is_one_line(tmp_path, capsys):
    from bot.service.daemon import serve

    s = Settings(state_path=tmp_path / "s.sqlite", webhook=WebhookSettings(secret=SECRET, port=99999))
    assert serve(s, schedule=False) == 2
    err = capsys.readouterr().err
    assert err.startswith("flagsweep serve: cannot listen on 127.0.0.1:99999") and "Traceback" not in err


def test_a_dry_run_service_renders_its_replies_and_their_plan_to_files(tmp_path):
    """Without GitHub the commands' port is the dry-run twin: each reply a file, the job's plan-NNN.json written as it ends."""
    s = Settings(state_path=tmp_path / "state.sqlite", webhook=WebhookSettings(secret=SECRET, port=0),
                 issues=IssueSettings(dry_run_out=str(tmp_path / "out")),
                 commands=CommandSettings(any_issue=True))   # no tracking issue in this store: answer on any issue
    svc = Service(s, dry_run=True, schedule=False)
    svc.start()
    conn = db.connect(s.state_path)
    try:
        data = json.loads((FIXTURES / "issue_comment.created.payload.json").read_text())
        data["comment"]["body"] = "@flagsweep-bot help"
        raw = json.dumps(data).encode()
        r = httpx.post(svc.url + "/webhook", content=raw, timeout=10, headers={
            "X-GitHub-Event": "issue_comment", "X-GitHub-Delivery": "dry-1",
            "X-Hub-Signature-256": sign(SECRET, raw), "Content-Type": "application/json"})
        assert r.status_code == 202, r.text
        job = wait_for(lambda: (j := jobs.get(conn, r.json()["job"])) and j.status in ("done", "failed") and j)
        assert job.status == "done" and job.result["commands"][0]["outcome"] == "answered"
        out = tmp_path / "out" / "commands"
        (plan_file,) = out.glob("plan-*.json")          # the job's own plan, beside any other job's
        plan = json.loads(plan_file.read_text())
        replies = [a for a in plan["actions"] if a["action"] == "comment"]
        assert len(replies) == 1 and "Commands I understand" in (out / replies[0]["file"]).read_text()
    finally:
        svc.stop(grace=5)
        conn.close()
