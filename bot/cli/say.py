"""The one writer of what the command line prints: human text made safe for a terminal, JSON and data as they are.

Human text (refusals, summaries, templates rendered for a person, log records) goes through
`bot.text.terminal.visible`: it quotes errors and signatures from model code and text from GitHub, and a control
character in them would act on the terminal instead of showing. `--json` output is written as `json.dumps` makes
it (which escapes every control character already); data a program reads (an export, a script) is written as it
is, unless stdout is a terminal. tests/test_say.py checks that nothing else in bot/cli writes to stdout or stderr.
"""
from __future__ import annotations

import json as jsonlib
import logging
import sys
from typing import Any

from bot.text.terminal import visible


def out(text: str = "", end: str = "\n") -> None:
    """Human text on stdout."""
    sys.stdout.write(visible(text + end))


def err(text: str = "", end: str = "\n") -> None:
    """Human text on stderr: refusals, progress, what was written where."""
    sys.stderr.write(visible(text + end))
    sys.stderr.flush()


def json(doc: Any, **dumps: Any) -> None:
    """A --json document on stdout, and a line end."""
    sys.stdout.write(jsonlib.dumps(doc, **dumps) + "\n")


def data(text: str) -> None:
    """Text a program reads (CSV, a script) on stdout: as it is into a pipe or a file, made visible on a terminal."""
    sys.stdout.write(visible(text) if sys.stdout.isatty() else text)


class _Visible(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record))


def log_handler(fmt: str, datefmt: str) -> logging.Handler:
    """Where log records go: stderr, made visible as the rest of the human text (a record can quote a model's error)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Visible(fmt, datefmt=datefmt))
    return handler
