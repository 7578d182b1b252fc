"""Issue 31 item 1: one reply per comment, the cap on commands a comment holds, and the per-user budget in the
store (refusals and usage replies count; a refusal is answered once per issue an hour). The handlers over a real
store, answering on the fake GitHub through the real publisher."""
from __future__ import annotations

import pytest

from bot.commands import handlers
from bot.commands.context import Context, PermissionGate
from bot.github.client import GitHubPublisher
from bot.settings import CommandSettings, Settings
from state import db, links

H = "@flagsweep-bot"
STRANGER, TRIAGER = "sam-stranger", "tina-triage"


class Desk:
    """A store with two bot issues on the fake GitHub, and a clock the budget reads."""

    def __init__(self, tmp, fake, **commands) -> None:
        self.fake, self.now = fake, [10_000.0]
        self.settings = Settings(state_path=tmp / "state.sqlite", github=fake.settings(retry_backoff=0.0),
                                 commands=CommandSettings(**commands))
        self.conn = db.connect(self.settings.state_path)
        fake.state.add_user(STRANGER)
        fake.state.set_role(fake.repo, TRIAGER, "triage")
        self.issues = []
        for key in ("a", "b"):
            issue = fake.state.create_issue(fake.repo, f"issue {key}", f"<!-- flagsweep:key={key} -->",
                                            user=fake.bot_login)
            links.upsert(self.conn, links.Link(key=key, repo=fake.repo, number=issue.number, kind="tracking"))
            self.issues.append(issue.number)
        self.github = GitHubPublisher(self.settings.github)
        self.restart()

    def restart(self) -> None:
        """A new gate, as a restarted `serve` makes: nothing of the budget lives in it."""
        self.gate = PermissionGate(per_hour=self.settings.commands.rate_limit, clock=lambda: self.now[0])

    def send(self, body: str, user: str, issue: int = 0) -> tuple[dict, list[str]]:
        number = self.issues[issue]
        before = len(self.replies(issue))
        ctx = Context(conn=self.conn, settings=self.settings, github=self.github, gate=self.gate, dry_run=False)
        result = handlers.handle_job(ctx, {"issue": number, "author": user, "repo": self.fake.repo, "body": body})
        return result, self.replies(issue)[before:]

    def replies(self, issue: int = 0) -> list[str]:
        return [c.body for c in self.fake.state.comments(self.fake.repo, self.issues[issue])
                if c.user == self.fake.bot_login]


@pytest.fixture
def desk(tmp_path, fake_github):
    d = Desk(tmp_path, fake_github)
    yield d
    d.conn.close()


def test_every_command_of_a_comment_is_answered_in_one_reply(desk):
    result, replies = desk.send(f"{H} help\n{H} status\n{H} frob\n{H} mute", TRIAGER)
    assert [c["outcome"] for c in result["commands"]] == ["answered", "answered", "bad command", "muted"]
    assert len(replies) == 1
    assert "Commands I understand" in replies[0] and "What I know about this issue" in replies[0]
    assert "I could not read this command" in replies[0] and "Muted:" in replies[0]


def test_a_comment_runs_at_most_max_per_comment_commands_and_says_so(tmp_path, fake_github):
    desk = Desk(tmp_path, fake_github, max_per_comment=2)
    result, replies = desk.send(f"{H} help\n{H} status\n{H} mute\n{H} cc add @bob", TRIAGER)
    assert [c["outcome"] for c in result["commands"]] == ["answered", "answered"] and result["not_run"] == 2
    assert len(replies) == 1 and "2 more commands in this comment were not run: one comment runs at most 2" in replies[0]
    assert not links.get(desk.conn, "a").muted                     # past the cap: not run
    desk.conn.close()


def test_a_line_repeated_in_one_comment_runs_once(desk):
    result, replies = desk.send("\n".join([f"{H} help"] * 50), STRANGER)
    assert len(result["commands"]) == 1 and len(replies) == 1 and replies[0].count("Commands I understand") == 1


def test_a_strangers_refusal_is_answered_once_per_issue_an_hour(desk):
    result, replies = desk.send(f"{H} rerun", STRANGER)
    assert result["commands"][0]["outcome"] == "refused" and len(replies) == 1
    result, replies = desk.send(f"{H} sweep --config a --models B", STRANGER)
    assert result["commands"][0]["outcome"].startswith("refused (answered") and replies == []   # no reply at all
    result, replies = desk.send(f"{H} rerun", STRANGER, issue=1)             # another issue: answered there
    assert result["commands"][0]["outcome"] == "refused" and len(replies) == 1
    desk.now[0] += 3601
    result, replies = desk.send(f"{H} rerun", STRANGER)
    assert result["commands"][0]["outcome"] == "refused" and len(replies) == 1


def test_refusals_and_usage_replies_spend_the_budget_and_the_limit_is_told_once(tmp_path, fake_github):
    desk = Desk(tmp_path, fake_github, rate_limit=3)
    desk.send(f"{H} frob", STRANGER)                                  # usage: 1
    desk.send(f"{H} rerun", STRANGER)                                 # refused: 2
    desk.send(f"{H} frob2", STRANGER)                                 # usage: 3
    result, replies = desk.send(f"{H} rerun", STRANGER, issue=1)
    assert result["commands"][0]["outcome"] == "rate limited" and "is the limit" in replies[0]
    result, replies = desk.send(f"{H} frob3\n{H} mute", STRANGER, issue=1)
    assert [c["outcome"] for c in result["commands"]] == ["rate limited", "rate limited"] and replies == []
    result, replies = desk.send(f"{H} help", STRANGER)                # questions stay free
    assert "Commands I understand" in replies[0]
    desk.now[0] += 3601
    result, replies = desk.send(f"{H} frob4", STRANGER)
    assert result["commands"][0]["outcome"] == "bad command" and len(replies) == 1
    desk.conn.close()


def test_the_budget_is_in_the_store_and_outlives_a_restart(tmp_path, fake_github):
    desk = Desk(tmp_path, fake_github, rate_limit=2)
    desk.send(f"{H} mute", TRIAGER)
    desk.send(f"{H} unmute", TRIAGER)
    desk.restart()
    desk.conn.close()
    desk.conn = db.connect(desk.settings.state_path)
    result, replies = desk.send(f"{H} mute", TRIAGER)
    assert result["commands"][0]["outcome"] == "rate limited" and not links.get(desk.conn, "a").muted
    desk.conn.close()


def test_an_edited_comment_answers_only_its_new_commands_in_one_reply(desk):
    ctx = Context(conn=desk.conn, settings=desk.settings, github=desk.github, gate=desk.gate, dry_run=False)
    result = handlers.handle_job(ctx, {"issue": desk.issues[0], "author": TRIAGER, "repo": desk.fake.repo,
                                       "body": f"{H} mute\n{H} status\n{H} help", "previous": f"{H} mute"})
    assert [c["command"] for c in result["commands"]] == ["status", "help"] and not links.get(desk.conn, "a").muted
    assert len(desk.replies()) == 1


def test_a_reply_past_githubs_size_limit_leaves_out_its_last_answers_and_says_so():
    """GitHub refuses a comment over 65,536 characters: the one reply keeps what fits and names what it left out."""
    parts = [handlers.Answered(f"{H} sweep {i}", "swept", "sweep", f"answer {i} " + "x" * 3000) for i in range(5)]
    body = handlers.compose(parts, not_run=0, cap=10, handle=H, limit=10_000)
    assert len(body) <= 10_000 and "answer 2" in body and "answer 3" not in body
    assert "The answers to 2 more commands of this comment do not fit in one GitHub comment" in body
    assert "do not fit" not in handlers.compose(parts, not_run=0, cap=10, handle=H)


def test_while_paused_a_comment_gets_one_reply_per_issue_an_hour_counted_against_the_budget(tmp_path, fake_github):
    """Issue 38: while paused each comment got its own "paused" reply outside the budget (6 comments, 6 replies).
    The paused reply is said as a refusal is: once per issue an hour, and it spends the author's budget."""
    desk = Desk(tmp_path, fake_github, rate_limit=2)
    switch = desk.fake.state.create_issue(desk.fake.repo, "stop the bot", "", user=desk.fake.human,
                                          labels=["flagsweep: pause"])
    said = [desk.send(f"{H} rerun\n{H} mute", STRANGER, issue)[1] for issue in (0, 0, 0, 1, 1, 1)]
    assert [len(r) for r in said] == [1, 0, 0, 1, 0, 0]
    assert f"issue #{switch.number}" in said[0][0] and "flagsweep-bot rerun`, `@\u200dflagsweep-bot mute`" in said[0][0]
    result, _ = desk.send(f"{H} rerun", STRANGER)
    assert result["paused"] == switch.number
    assert result["commands"] == [{"line": f"{H} rerun", "outcome": "paused (answered on this issue within the hour)"}]
    desk.fake.state.close_issue(desk.fake.repo, switch.number, user=desk.fake.human)
    result, replies = desk.send(f"{H} frob", STRANGER)          # the two paused replies spent the budget
    assert result["commands"][0]["outcome"] == "rate limited" and "is the limit" in replies[0]
    desk.now[0] += 3601
    result, replies = desk.send(f"{H} frob", STRANGER)
    assert result["commands"][0]["outcome"] == "bad command" and len(replies) == 1
    desk.conn.close()
