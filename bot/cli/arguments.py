"""Argument types for the CLI: each checks one value and names it when it is wrong.

Used as argparse `type=` by every `bot.cli` area module, so a bad value is refused
by the parser (exit 2, one line) before anything opens the store or starts a
worker. Checks that need the interpreter under test (is CUDA there?) are not
here: see `harness.engine.devices`.
"""
from __future__ import annotations

import argparse
import datetime
import re
import shutil
from pathlib import Path
from typing import Callable

from bot.settings import Settings, SettingsError, repo_key
from harness.core.modes import Mode

SHARD = re.compile(r"^(\d+)/(\d+)$")
DEVICE = re.compile(r"^(cpu|cuda(:\d+)?|mps|xpu(:\d+)?)$")
BACKENDS = ("count", "eager", "aot_eager", "inductor")


def _bad(message: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(message)


def positive_float(text: str) -> float:
    """A number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise _bad(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise _bad(f"must be more than 0 seconds, got {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _bad(f"expected a whole number, got {text!r}") from None


def positive_int(text: str) -> int:
    """A whole number of at least 1."""
    value = _int(text)
    if value < 1:
        raise _bad(f"must be at least 1, got {text!r}")
    return value


def count_or_auto(text: str) -> int:
    """A whole number of at least 0 (0: choose automatically)."""
    value = _int(text)
    if value < 0:
        raise _bad(f"must be 0 (one per core) or more, got {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port, 0 (any free port) to 65535."""
    value = _int(text)
    if not 0 <= value <= 65535:
        raise _bad(f"a TCP port is 0 to 65535, got {text!r}")
    return value


def nonempty(what: str) -> Callable[[str], str]:
    """A string that is not empty or blank."""
    def check(text: str) -> str:
        if not text.strip():
            raise _bad(f"{what} is empty")
        return text
    return check


def name_list(text: str) -> str:
    """A comma-separated list with at least one name (kept as text; commands split it)."""
    if not [part for part in text.split(",") if part.strip()]:
        raise _bad(f"names no config: {text!r}")
    return text


def one_mode(names: str | None, settings: Settings, why_one: str) -> Mode | str:
    """The one mode a command's `--modes` names (eval without it; a `[modes.NAME]` table counts), or why it cannot be
    used (`why_one`: why the command takes one, where a sweep takes several)."""
    chosen = [n.strip() for n in (names or "eval").split(",") if n.strip()]
    if len(chosen) != 1:
        return f"--modes {names}: {why_one}; name one"
    try:
        mode, = settings.sweep_modes(chosen)
    except SettingsError as exc:
        return str(exc)
    return mode


def model_patterns(text: str) -> list[str]:
    """`--models A,B,'Qwen*'`: class names or globs, comma-separated, at least one (the one parser of every
    command's --models: an empty value is refused, never read as "every model")."""
    patterns = [part.strip() for part in text.split(",") if part.strip()]
    if not patterns:
        raise _bad(f"names no model: {text!r} (leave --models out for the default set)")
    return patterns


def device(text: str) -> str:
    """cpu, cuda, cuda:N, mps or xpu[:N] (whether it exists is checked in the interpreter under test)."""
    if not DEVICE.match(text):
        raise _bad(f"unknown device {text!r} (expected cpu, cuda or cuda:N)")
    return text


def backend(text: str) -> str:
    """One of the backends behind the graph counter."""
    if text not in BACKENDS:
        raise _bad(f"unknown backend {text!r} (expected one of {', '.join(BACKENDS)})")
    return text


def iso_date(text: str) -> str:
    """A calendar date, YYYY-MM-DD."""
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        raise _bad(f"expected a date YYYY-MM-DD, got {text!r}") from None
    if len(text) != 10:
        raise _bad(f"expected a date YYYY-MM-DD, got {text!r}")
    return text


def interpreter(text: str) -> str:
    """A Python interpreter that exists and can be executed (a name on PATH or a path)."""
    if not text.strip():
        raise _bad("the interpreter path is empty")
    found = shutil.which(text)
    if found is None:
        path = Path(text)
        why = "is a folder" if path.is_dir() else ("is not executable" if path.exists() else "does not exist")
        raise _bad(f"{text} {why}; pass a Python interpreter that has torch")
    return text


def state_path(text: str) -> str:
    """A state file path: not empty, not a folder."""
    if not text.strip():
        raise _bad("is empty (leave --state out to use the default store)")
    if Path(text).is_dir():
        raise _bad(f"{text} is a folder; pass the state file inside it, e.g. {Path(text) / 'state.sqlite'}")
    return text


def repo(text: str) -> str:
    """OWNER/NAME of a GitHub repository (bot.settings.repo_key: the one rule, compared case-insensitively)."""
    if repo_key(text) is None:
        raise _bad(f"expected OWNER/NAME, got {text!r}")
    return text


def shard(text: str) -> str:
    """i/N: the i-th of N slices, 1 <= i <= N."""
    found = SHARD.match(text)
    if not found or not 1 <= int(found[1]) <= int(found[2]):
        raise _bad(f"expected i/N with 1 <= i <= N (e.g. 2/4), got {text!r}")
    return text
