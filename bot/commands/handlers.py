"""Comment-command handlers: a stored `command` job in, reactions and one reply out.

The flow per command: parse (pure) → permission (role ≥ triage, or the
allowlist) → per-user hourly budget → acknowledge with a reaction → do it.
Each command's answer is a part of the comment's one reply, posted when all
have run; a comment runs at most `[commands] max_per_comment` commands. The
budget (kept in the store) counts commands that start work, refusals and usage
replies; a refusal is answered once per issue an hour, the limit once an hour.
User errors (bad config, unknown model, empty bisect range) are answered with
what went wrong; internal errors are logged and answered with a short generic
message. Every word comes from templates/reply_*.md.j2.
"""
from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from harness.core import record
from harness.core.suspects import people_of
from bot.commands import parse as cmd_mod
from bot.commands import work
from bot.commands.context import Context, RetryLater, UserError, role_at_least
from bot.github.port import GitHubUnavailable
from bot.text.render import render
from state.history import SignatureRow
from state.jobs import CommentJob

log = logging.getLogger(__name__)


# ---- adapters to other areas (one place each) ------------------------------------------------

def _link_for(conn: sqlite3.Connection, repo: str, number: int) -> Any:
    from state import links
    return links.by_number(conn, repo, number)


def _update_link(conn: sqlite3.Connection, key: str, **fields: Any) -> None:
    from state import links
    links.update(conn, key, **fields)


def _signature_row(conn: sqlite3.Connection, config: str | None, signature: str | None,
                   mode: str = "") -> SignatureRow | None:
    from state import history
    for row in history.signature_history(conn, config, mode):
        if row.signature == signature:
            return row
    return None


def _unavailable(conn: sqlite3.Connection, run_id: int) -> dict[str, Any]:
    from state import runs
    run = runs.get_run(conn, run_id)
    return run.unavailable if run else {}


def _last_nightly(conn: sqlite3.Connection) -> Any:
    from state import runs
    done = runs.list_runs(conn, kinds=["nightly"], status="finished", limit=1)
    return done[0] if done else None


# ---- the handlers ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Said:
    """What a handler did (the job result's outcome) and its part of the comment's one reply."""

    outcome: str
    text: str


def _words(ctx: Context, template: str, **values: Any) -> str:
    return render(template, handle=ctx.settings.commands.handle, **values)


def _ack(ctx: Context, comment_id: int | None, content: str) -> None:
    """React to the command's comment: best effort, never fatal (the reply is what matters)."""
    if comment_id is None:
        return
    try:
        ctx.github.react(comment_id, content)
    except Exception as exc:   # GitHub down or the comment gone: the command still runs and is answered
        log.warning("could not react %s to comment %s: %s", content, comment_id, exc)


def do_help(ctx: Context, number: int, link: Any, args: dict[str, Any], author: str) -> Said:
    return Said("answered", _words(ctx, "reply_help.md.j2", entries=cmd_mod.help_entries(ctx.settings.commands.handle),
                                   min_permission=ctx.settings.commands.min_permission,
                                   maintainers=cmd_mod.MAINTAINERS))


def do_status(ctx: Context, number: int, link: Any, args: dict[str, Any], author: str) -> Said:
    sig = _signature_row(ctx.conn, link.config, link.signature) if link else None
    last = _last_nightly(ctx.conn)
    return Said("answered", _words(ctx, "reply_status.md.j2", link=link.to_dict() if link else None, sig=sig,
                                   jobs=ctx.jobs_health(ctx.conn),
                                   last_nightly={"id": last.id, "nightly": last.nightly,
                                                 "torch": last.environment.torch_version} if last else None))


def do_mute(ctx: Context, number: int, link: Any, args: dict[str, Any], author: str, muted: bool = True) -> Said:
    if link is None:
        raise UserError("this issue is not one the bot keeps, so there is nothing to mute")
    _update_link(ctx.conn, link.key, muted=muted)
    return Said("muted" if muted else "unmuted", _words(ctx, "reply_mute.md.j2", muted=muted, author=author))


def do_unmute(ctx: Context, number: int, link: Any, args: dict[str, Any], author: str) -> Said:
    return do_mute(ctx, number, link, args, author, muted=False)


def _remove_cc(conn: sqlite3.Connection, key: str, logins: list[str]) -> None:
    from state import culprits
    culprits.remove_cc(conn, key, logins)


def _mark_wrong(conn: sqlite3.Connection, config: str, signature: str, by: str, mode: str) -> Any:
    from state import culprits
    return culprits.mark_wrong(conn, config, signature, by, mode)


def do_cc(ctx: Context, number: int, link: Any, args: dict[str, Any], author: str) -> Said:
    if link is None:
        raise UserError("this issue is not one the bot keeps, so it has no cc list")
    if args["action"] == "remove":    # never cc'd on this issue again, by a culprit search either
        _remove_cc(ctx.conn, link.key, args["handles"])
    cc = list(link.cc)
    for h in args["handles"]:
        present = [c for c in cc if c.lower() == h.lower()]
        if args["action"] == "add" and not present:
            cc.append(h)
        elif args["action"] == "remove":
            cc = [c for c in cc if c.lower() != h.lower()]
    _update_link(ctx.conn, link.key, cc=cc)
    return Said(f"cc {args['action']}", _words(ctx, "reply_cc.md.j2", action=args["action"], handles=args["handles"],
                                               cc=cc))


def do_wrong_culprit(ctx: Context, number: int, link: Any, args: dict[str, Any], author: str) -> Said:
    """Record that the bisected commit is not the cause: kept on the commit range, its people taken off the cc."""
    if link is None or link.kind != "tracking" or not link.signature:
        raise UserError("this issue is not a tracking issue the bot keeps, so it names no culprit")
    found = _mark_wrong(ctx.conn, link.config or "", link.signature, author, link.mode)
    if found is None:
        raise UserError("this issue names no bisected culprit (none was found, or it is already marked wrong)")
    people = list(people_of(found.culprit)) if found.culprit else []
    _remove_cc(ctx.conn, link.key, people)
    return Said(f"wrong culprit {found.bisection.culprit[:12]}",
                _words(ctx, "reply_wrong_culprit.md.j2", sha=found.bisection.culprit[:12], people=people))


def _issue_models(ctx: Context, link: Any) -> list[str]:
    sig = _signature_row(ctx.conn, link.config, link.signature, link.mode) if link and link.signature else None
    return list(sig.models) if sig else []


def do_rerun(ctx: Context, number: int, link: Any, args: dict[str, Any], author: str) -> Said:
    if link is None:
        raise UserError("this issue is not one the bot keeps, so there is nothing to re-run")
    models = _issue_models(ctx, link)
    # The issue's mode must be one the nightly sweeps (the rerun is the nightly's, every mode of it).
    named = {m.key: m.name for m in ctx.settings.sweep_modes()}
    if link.mode not in named:
        raise UserError(f"this issue's mode ({link.mode}) is not in [sweep] modes "
                        f"({', '.join(named.values())}): the nightly does not sweep it")
    # The whole nightly set is swept, not only this issue's models: the planner reads a run as
    # the corpus, so a run of one model would retitle the issue "1/1 models".
    result = ctx.steps.rerun(ctx.conn, ctx.settings, force=True, dry_run=ctx.dry_run, out_dir=ctx.out_dir)
    mine = next((r for r in result.each if r.mode == named[link.mode]), result)    # the run of the issue's mode
    return Said("rerun", _words(ctx, "reply_rerun.md.j2", r=mine, models=models, config=link.config,
                                rows=work.model_rows(ctx.conn, mine.run_id, link.config, models)))


def do_sweep(ctx: Context, number: int, link: Any, args: dict[str, Any], author: str) -> Said:
    from state import history
    chosen = work.check_configs(ctx, [args["config"]])
    models = work.check_models(ctx, args["models"])
    base = work.check_base_settings(ctx, args.get("base_setting") or [])
    modes = work.check_modes(ctx, args.get("modes"))
    said = []
    for mode in modes:       # one run per mode, each with its own baseline
        run_id = work.sweep(ctx, models, chosen, base, mode)   # the sweep finalizes the run it ends
        effects = [e.to_dict() for e in history.effects(ctx.conn, run_id) if e.config == args["config"]]
        unavailable = _unavailable(ctx.conn, run_id)
        said.append((run_id, _words(ctx, "reply_sweep.md.j2", run_id=run_id, config=args["config"], models=models,
                                    base=base, effects=effects, unavailable=unavailable.get(args["config"]),
                                    mode=_words(ctx, "mode_words.txt.j2", mode=mode).strip())))
    return Said("swept " + ", ".join(f"run {r}" for r, _ in said), "\n".join(text for _, text in said))


def do_range(ctx: Context, number: int, link: Any) -> Said:
    """`bisect` with no model: search the tracking issue's regression range again and rewrite the issue."""
    if link is None or link.kind != "tracking" or not link.signature:
        raise UserError("`bisect` without --config and --model searches a tracking issue's regression range "
                        "again; this issue is not a tracking issue")
    result = work.search_range(ctx, link)
    return Said("range: " + ", ".join(f"{r['kind']} {r['status']}" for r in result["ranges"]),
                _words(ctx, "reply_range.md.j2", r=result, dry_run=ctx.dry_run))


def do_bisect(ctx: Context, number: int, link: Any, args: dict[str, Any], author: str) -> Said:
    if not args.get("config") and not args.get("model"):
        return do_range(ctx, number, link)
    work.check_configs(ctx, [args["config"]])
    model = work.check_models(ctx, [args["model"]])
    if len(model) != 1:
        raise UserError(f"--model must name one model, {args['model']} names {len(model)}")
    result = work.bisect(ctx, model[0], args["config"], args.get("good"), args.get("bad"))
    return Said(f"bisected: {result.good.date}..{result.bad.date}",
                _words(ctx, "reply_bisect.md.j2", r=result.to_dict(), model=model[0], config=args["config"]))


HANDLERS: dict[str, Callable[..., str]] = {
    "help": do_help, "status": do_status, "rerun": do_rerun, "sweep": do_sweep, "mute": do_mute,
    "unmute": do_unmute, "cc": do_cc, "bisect": do_bisect, "wrong-culprit": do_wrong_culprit,
}


def _permitted(ctx: Context, author: str, command: str = "") -> bool:
    allow = {a.lower().lstrip("@") for a in ctx.settings.commands.allowlist}
    if author.lower() in allow:
        return True
    try:
        role = ctx.gate.role(author, ctx.github.user_permission)
    except GitHubUnavailable:
        raise   # GitHub down: neither run nor refuse; the job is tried again when it is back
    except Exception:   # an odd answer: refuse rather than run work for someone unknown
        log.exception("permission lookup for %s failed", author)
        return False
    least = "maintain" if command in cmd_mod.MAINTAINERS else ctx.settings.commands.min_permission
    return role_at_least(role, least) and role_at_least(role, ctx.settings.commands.min_permission)


@dataclass(frozen=True)
class Answered:
    """One command of a comment as the job result keeps it: its line, the command (none for a bad or paused line),
    what became of it, and its part of the comment's one reply (None: nothing to say). `handle_job` writes it into
    the result and reads it back when an outage cut it short, so the reply is composed without running it again."""

    line: str
    outcome: str
    command: str | None = None
    reply: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Its stored form (a bad or paused line has no command key, a silent one no reply key)."""
        return {"line": self.line, **({"command": self.command} if self.command is not None else {}),
                "outcome": self.outcome, **({"reply": self.reply} if self.reply is not None else {})}


@dataclass(frozen=True)
class Progress:
    """The result an attempt cut short by a GitHub outage stored (RetryLater): the commands it answered, and how
    many past `[commands] max_per_comment` it did not run."""

    commands: list[dict[str, Any]]
    not_run: int = 0


def _answered(earlier: Mapping[str, Any] | None) -> list[Answered]:
    """The commands an earlier attempt answered, read strictly from its stored result."""
    if earlier is None:
        return []
    stored = record.parse(Progress, earlier, "command job result")
    return [record.parse(Answered, c, "command job result entry") for c in stored.commands]


def _stored(done: list[Answered], not_run: int = 0) -> dict[str, Any]:
    return {"commands": [a.to_dict() for a in done], **({"not_run": not_run} if not_run else {})}


@dataclass
class _Turn:
    """One comment being answered: where, by whom, and the reactions given so far (each at most once)."""

    ctx: Context
    number: int
    link: Any
    author: str
    comment_id: int | None
    where: tuple[str, int]                 # (repository, issue): where refusals are answered once an hour
    reacted: set[str] = field(default_factory=set)

    def ack(self, content: str) -> None:
        if content not in self.reacted:
            self.reacted.add(content)
            _ack(self.ctx, self.comment_id, content)


def handle_job(ctx: Context, payload: Mapping[str, Any], earlier: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run the commands of one stored comment (a `CommentJob` payload) and post one reply for them all; returns
    what happened to each (stored as the job result).

    At most `[commands] max_per_comment` run; the reply says how many did not. `earlier` is the result of an
    attempt cut short by a GitHub outage: commands it answered are not run again, their stored parts go into the
    reply. A new outage raises RetryLater with the progress so far.
    """
    job = CommentJob.parse(payload)
    number, author = job.issue, job.author or ""
    repo = job.repo or ctx.settings.github.repo or ""
    link = _link_for(ctx.conn, repo, number)
    if link is None and not ctx.settings.commands.any_issue:
        return {"ignored": "not an issue the bot keeps"}   # "not mine" is a normal answer, said quietly
    answered = _answered(earlier)
    handle, cap = ctx.settings.commands.handle, ctx.settings.commands.max_per_comment
    # Only the lines that will run are parsed: a 1 MB comment holds ~50,000 lines, parsing each costs a millisecond.
    lines = list(dict.fromkeys(cmd_mod.new_command_lines(job.body or "", job.previous, handle)))   # repeats once
    items = [cmd_mod.parse_line(line, handle) for line in lines[:cap]]
    switch = _switch(ctx) if items else None
    turn = _Turn(ctx, number, link, author, job.comment_id, (repo, number))
    done: list[Answered] = []
    for i, item in enumerate(items):
        if i < len(answered) and answered[i].outcome:
            done.append(answered[i])
            continue
        try:
            done.append(_paused(turn, switch, items, i) if switch else _run_one(turn, item))
        except GitHubUnavailable as exc:
            raise RetryLater(str(exc), _stored(done)) from exc
    not_run = len(lines) - len(done)
    _answer(ctx, number, done, not_run)
    return {**({"paused": switch.number} if switch else {}), **_stored(done, not_run)}


def _answer(ctx: Context, number: int, done: list[Answered], not_run: int) -> None:
    """The comment's one reply: every command's part, and a line for those not run; none when nothing is to be said."""
    parts = [a for a in done if a.reply is not None]
    if not parts:
        return   # all silent (answered already this hour, or over the budget): no reply at all
    body = compose(parts, not_run, ctx.settings.commands.max_per_comment, ctx.settings.commands.handle)
    try:   # on a retried job the reply may have landed before the outage hit: look for it first
        ctx.github.comment(number, body, look=ctx.retry)
    except GitHubUnavailable as exc:
        raise RetryLater(str(exc), _stored(done, not_run)) from exc


MAX_REPLY = 65_000   # characters: GitHub refuses a comment over 65,536 with a 422


def compose(parts: list[Answered], not_run: int, cap: int, handle: str, limit: int = MAX_REPLY) -> str:
    """The one reply's text; when it would pass `limit`, the last parts are left out and it says how many."""
    kept = list(parts)
    while True:
        body = render("reply_comment.md.j2", parts=kept, not_run=not_run, cap=cap, cut=len(parts) - len(kept),
                      handle=handle)
        if len(body) <= limit or len(kept) == 1:
            return body[:limit]
        kept.pop()


def _switch(ctx: Context) -> Any:
    """The kill switch: the open issue with the pause label (None: not paused); GitHub down: try the job later."""
    try:
        return ctx.github.paused(ctx.settings.issues.pause_label)
    except GitHubUnavailable as exc:
        raise RetryLater(str(exc), _stored([])) from exc


def _paused(turn: _Turn, switch: Any, items: list[Any], i: int) -> Answered:
    """While paused nothing runs (the comment's command `i` of `items`), and the comment's one reply says so as a
    refusal is said: counted against the author's budget and given at most once per issue an hour (six comments
    there: one reply, not six). The first command carries the reply, naming every line; the others are paused."""
    ctx, line = turn.ctx, items[i].line
    if i:
        return Answered(line, "paused")
    if ctx.gate.told(ctx.conn, turn.author, "paused", turn.where):
        return Answered(line, "paused (answered on this issue within the hour)")
    if not ctx.gate.spend(ctx.conn, turn.author, turn.where, "paused"):
        return _limited(turn, line, None)
    label = ctx.settings.issues.pause_label
    return Answered(line, "paused", reply=_words(ctx, "reply_paused.md.j2", switch=switch.number, label=label,
                                                  lines=[i.line for i in items]))


def _run_one(turn: _Turn, item: Any) -> Answered:
    """One command: permission, budget, acknowledge, run; returns its entry for the job result (with its reply)."""
    ctx = turn.ctx
    if isinstance(item, cmd_mod.Problem):
        if not ctx.gate.spend(ctx.conn, turn.author, turn.where, "usage"):
            return _limited(turn, item.line, None)
        turn.ack("confused")
        return Answered(item.line, "bad command", reply=_words(ctx, "reply_usage.md.j2", problem=item))
    if item.privileged and not _permitted(ctx, turn.author, item.name):
        return _refused(turn, item)
    if item.privileged and not ctx.gate.spend(ctx.conn, turn.author, turn.where, "run"):
        return _limited(turn, item.line, item.name)
    turn.ack("eyes")
    try:
        said = HANDLERS[item.name](ctx, turn.number, turn.link, item.args, turn.author)
    except UserError as exc:
        return Answered(item.line, f"user error: {exc}", item.name,
                        _words(ctx, "reply_error.md.j2", message=str(exc), command=item.name, internal=False))
    except GitHubUnavailable:
        raise
    except Exception as exc:
        log.exception("command %r on #%s failed", item.line, turn.number)
        return Answered(item.line, f"internal error: {type(exc).__name__}", item.name,
                        _words(ctx, "reply_error.md.j2", message="", command=item.name, internal=True))
    turn.ack("+1")
    return Answered(item.line, said.outcome, item.name, said.text)


def _refused(turn: _Turn, item: cmd_mod.Command) -> Answered:
    """A command its author may not give: answered at most once per issue an hour, and counted against the budget."""
    ctx = turn.ctx
    if ctx.gate.told(ctx.conn, turn.author, "refused", turn.where):
        return Answered(item.line, "refused (answered on this issue within the hour)", item.name)
    if not ctx.gate.spend(ctx.conn, turn.author, turn.where, "refused"):
        return _limited(turn, item.line, item.name)
    return Answered(item.line, "refused", item.name,
                    _words(ctx, "reply_refused.md.j2", author=turn.author, command=item.name,
                           min_permission="maintain" if item.name in cmd_mod.MAINTAINERS
                           else ctx.settings.commands.min_permission))


def _limited(turn: _Turn, line: str, command: str | None) -> Answered:
    """Over the hourly budget: nothing runs, and the author is told so once an hour."""
    ctx = turn.ctx
    if ctx.gate.told(ctx.conn, turn.author, "limited"):
        return Answered(line, "rate limited", command)
    ctx.gate.tell(ctx.conn, turn.author, turn.where, "limited")
    return Answered(line, "rate limited", command,
                    _words(ctx, "reply_rate_limited.md.j2", author=turn.author, per_hour=ctx.gate.per_hour))
