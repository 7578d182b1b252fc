"""The comment-command parser: pure, no I/O. Text in, commands (or problems to reply with) out.

A command is one line that starts with the bot's handle. Quoted lines (`>`),
fenced code blocks and inline code are not commands: people quote the bot and
paste examples. On an edited comment only lines that are new since the previous
body run, so fixing a typo does not re-run the commands above it.
"""
from __future__ import annotations

import argparse
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from harness.core import record

COMMANDS = ("help", "status", "rerun", "sweep", "mute", "unmute", "cc", "bisect", "wrong-culprit")
# Commands that start work or change what the bot writes: they need permission.
PRIVILEGED = ("rerun", "sweep", "mute", "unmute", "cc", "bisect", "wrong-culprit")
# Commands whose author must be a maintainer (role maintain or admin, or the allowlist), whatever min_permission says.
MAINTAINERS = ("wrong-culprit",)
# Commands that answer at once (no sweep, no install): the service runs them in its quick lane.
QUICK = ("help", "status", "mute", "unmute", "cc", "wrong-culprit")

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
_GLOB = re.compile(r"^[A-Za-z0-9_*?\[\]!.-]{1,200}$")
_HANDLE = re.compile(r"^@?[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_BUILD = re.compile(r"^(\d{4}-\d{2}-\d{2}|\d+\.\d+(\.\d+)*((a|b|rc)\d+)?(\.dev\d+)?(\+[A-Za-z0-9.]+)?)$")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$")
_VALUE = re.compile(r"^[A-Za-z0-9_.+\-]{1,100}$")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


class CommandSyntaxError(Exception):
    """A command line argparse could not make sense of; the message is for the user."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of printing and exiting the process."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CommandSyntaxError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        raise CommandSyntaxError(message or f"{self.prog}: stopped")


def _typed(pattern: re.Pattern[str], what: str):
    """An argparse type that accepts only values matching `pattern` (arguments never reach a shell, but stay tidy)."""
    def check(value: str) -> str:
        if not pattern.match(value):
            raise argparse.ArgumentTypeError(f"not a valid {what}: {value!r}")
        return value
    check.__name__ = what
    return check


def _listed(pattern: re.Pattern, what: str):
    """A comma-separated list of `what`, each matching `pattern`: `--models A,B` (model globs, split as the command
    line splits them), `--modes A,B` (names; which exist is the handler's to say, from the settings)."""
    def check(value: str) -> list[str]:
        parts = [p.strip() for p in value.split(",") if p.strip()]
        bad = [p for p in parts if not pattern.match(p)]
        if not parts or bad:
            raise argparse.ArgumentTypeError(f"not a valid {what}: {(bad[0] if bad else value)!r}")
        return parts
    check.__name__ = what
    return check


def _setting(value: str) -> str:
    key, sep, val = value.partition("=")
    if not sep or not _KEY.match(key.strip()) or not _VALUE.match(val.strip()):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with a dotted config key, got {value!r}")
    return value


def _wide(prog: str) -> argparse.HelpFormatter:
    # Usage goes into a Markdown code span: never wrap it.
    return argparse.HelpFormatter(prog, width=1000)


def build_parser(prog: str = "@flagsweep-bot") -> argparse.ArgumentParser:
    """The parser of every command; `help` is generated from it."""
    parser = _Parser(prog=prog, add_help=False, allow_abbrev=False, formatter_class=_wide)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def add(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text, add_help=False, allow_abbrev=False,
                              formatter_class=_wide)

    add("help", "show this help")
    add("status", "what the bot knows about this issue: models, last nightly, first seen")
    add("rerun", "sweep this issue's models on the newest nightly now and update the issue")
    p = add("sweep", "ad-hoc sweep of one config over some models; replies with the effects table")
    p.add_argument("--config", required=True, type=_typed(_NAME, "config name"), help="a config from the catalog")
    p.add_argument("--models", required=True, type=_listed(_GLOB, "model glob"),
                   help="model class globs, comma-separated, e.g. 'Qwen*,GPT2Model'")
    p.add_argument("--base-setting", action="append", default=[], type=_setting, metavar="K=V",
                   help="a setting applied to baseline and config alike (repeatable)")
    p.add_argument("--modes", type=_listed(_NAME, "mode name"), metavar="A,B",
                   help="the modes to sweep in, one run each (default: eval), e.g. 'train-bf16,dynamic-true'")
    add("mute", "stop updating this issue")
    add("unmute", "resume updating this issue")
    p = add("cc", "add or remove people cc'd on this issue")
    p.add_argument("action", choices=["add", "remove"])
    p.add_argument("handles", nargs="+", type=_typed(_HANDLE, "GitHub handle"), metavar="@handle")
    p = add("bisect", "find the first nightly where one model's outcome under one config changed; "
                      "with neither --config nor --model, search this issue's regression range again")
    p.add_argument("--config", type=_typed(_NAME, "config name"))
    p.add_argument("--model", type=_typed(_NAME, "model class name"))
    p.add_argument("--good", type=_typed(_BUILD, "date (YYYY-MM-DD) or version (2.14.1)"),
                   help="a build (nightly date or version) that behaved as before")
    p.add_argument("--bad", type=_typed(_BUILD, "date (YYYY-MM-DD) or version (2.14.1)"),
                   help="a build (nightly date or version) that shows the change")
    add("wrong-culprit", "say the commit this issue was bisected to is not the cause (maintainers): the attribution "
                         "is recorded as wrong and its authors are no longer cc'd")
    return parser


@dataclass
class Command:
    """One parsed command."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    line: str = ""

    @property
    def privileged(self) -> bool:
        return self.name in PRIVILEGED

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (stored in a job)."""
        return {"name": self.name, "args": self.args, "line": self.line}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Command":
        """Inverse of to_dict; RecordError naming a field it does not know or the missing name."""
        return record.parse(cls, data, "command")


@dataclass
class Problem:
    """A line addressed to the bot that is not a valid command: reply with this and the usage."""

    line: str
    message: str
    usage: str


def command_lines(body: str, handle: str) -> list[str]:
    """Lines of a comment addressed to `handle`, outside quotes and code."""
    out: list[str] = []
    fence: str | None = None
    handle_l = handle.lower()
    for raw in (body or "").replace("\r\n", "\n").split("\n"):
        m = _FENCE.match(raw)
        if fence is not None:
            # A fence closes on a line of the same character, at least as long.
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not raw.strip()[len(m.group(1)):].strip():
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        line = _INLINE_CODE.sub(" ", raw).strip()
        if not line or line.startswith(">"):
            continue
        low = line.lower()
        if low.startswith(handle_l) and (len(line) == len(handle) or line[len(handle)] in " \t:,"):
            out.append(line)
    return out


def new_command_lines(body: str, previous: str | None, handle: str) -> list[str]:
    """Command lines of `body` that were not already in `previous` (an edited comment)."""
    lines = command_lines(body, handle)
    if previous is None:
        return lines
    seen = set(command_lines(previous, handle))
    return [ln for ln in lines if ln not in seen]


def parse_line(line: str, handle: str) -> Command | Problem:
    """Parse one line that starts with the handle."""
    parser = build_parser(handle)
    usage = parser.format_usage().strip()
    rest = line[len(handle):].lstrip(" \t:,")
    try:
        words = shlex.split(rest)
    except ValueError as exc:  # unbalanced quotes
        return Problem(line, f"cannot split the command: {exc}", usage)
    if not words:
        return Problem(line, "no command given", usage)
    try:
        ns = parser.parse_args(words)
    except CommandSyntaxError as exc:
        name = words[0] if words[0] in COMMANDS else None
        if name:
            usage = sub_usage(parser, name)
        return Problem(line, str(exc).strip(), usage)
    args = {k: v for k, v in vars(ns).items() if k != "command"}
    if ns.command == "cc":
        args["handles"] = ["@" + h.lstrip("@") for h in args["handles"]]
    if ns.command == "bisect" and (not args.get("config")) != (not args.get("model")):
        return Problem(line, "--config and --model go together (give neither to search this issue's regression "
                             "range again)", sub_usage(parser, "bisect"))
    if ns.command == "bisect" and not args.get("model") and (args.get("good") or args.get("bad")):
        return Problem(line, "--good and --bad need --config and --model", sub_usage(parser, "bisect"))
    if ns.command == "bisect" and _DATE.match(args.get("good") or "") and _DATE.match(args.get("bad") or "") \
            and args["good"] >= args["bad"]:
        return Problem(line, "--good must be an earlier date than --bad", sub_usage(parser, "bisect"))
    return Command(ns.command, args, line)


def sub_usage(parser: argparse.ArgumentParser, name: str) -> str:
    """The usage line of one command."""
    for action in parser._subparsers._group_actions:  # argparse keeps subparsers here
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name].format_usage().strip()
    return parser.format_usage().strip()


def parse_comment(body: str, handle: str, previous: str | None = None) -> list[Command | Problem]:
    """Every command (or problem) in a comment; with `previous`, only the new lines."""
    return [parse_line(ln, handle) for ln in new_command_lines(body, previous, handle)]


def help_entries(handle: str) -> list[dict[str, str]]:
    """One entry per command (usage and description), from the parser itself, for the help template."""
    parser = build_parser(handle)
    entries = []
    for action in parser._subparsers._group_actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                usage = sub.format_usage().strip()
                usage = usage[len("usage: "):] if usage.startswith("usage: ") else usage
                entries.append({"name": name, "usage": usage, "description": sub.description or "",
                                "privileged": name in PRIVILEGED})
    return entries
