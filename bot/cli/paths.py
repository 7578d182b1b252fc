"""Every path a person gives the command line, made absolute once, before any command or worker runs.

Workers run in the checkout (harness.engine.handle), not in the directory the command
was started from, and a path derived from a relative one (the lock directory, the
dry-run folder, an export) would land wherever the process that uses it happens to
be. So main() calls absolute() right after parsing: the arguments named below and the
settings that hold paths are joined to the current directory, and nothing downstream
ever sees a relative path. A symlink is kept as it is (a venv's python is one).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

# Arguments that always hold a file or folder path (by dest, across every subcommand).
PATH_ARGS = ("settings", "state", "output", "out", "export", "lock_dir", "config_file")
# Arguments that hold a path when they name one ("../venv/bin/python"), else a name or version ("python3", "2.14.1").
MAYBE_PATH_ARGS = ("python", "torch")
# Settings (section, field) that hold paths; sweep.python may also be a command name.
SETTINGS_PATHS = (("sweep", "config_file"), ("issues", "dry_run_out"), ("nightly", "venv_dir"), ("zoo", "cache_dir"),
                  ("github", "private_key_path"))
SETTINGS_MAYBE_PATHS = (("sweep", "python"),)


def absolute(text: str) -> str:
    """text as an absolute path: `~` expanded, joined to the current directory, `..` folded; symlinks kept."""
    return os.path.abspath(os.path.expanduser(text))


def named_path(text: str) -> bool:
    """True when text names a path (it has a folder separator) rather than a command or a version."""
    return os.sep in text or (os.altsep is not None and os.altsep in text) or text.startswith("~")


def absolute_args(args: argparse.Namespace) -> None:
    """Make the path arguments of a parsed command line absolute, in place."""
    for name in PATH_ARGS:
        value = getattr(args, name, None)
        if isinstance(value, str) and value:
            setattr(args, name, absolute(value))
    for name in MAYBE_PATH_ARGS:
        value = getattr(args, name, None)
        if isinstance(value, str) and named_path(value):
            setattr(args, name, absolute(value))
    runs = getattr(args, "runs", None)    # `merge RUN|FILE...`: a file from another host, or a run id
    if isinstance(runs, list):
        args.runs = [absolute(r) if isinstance(r, str) and named_path(r) else r for r in runs]


def absolute_settings(settings: Any) -> None:
    """Make the settings that hold paths absolute, in place (a relative one is taken from the current directory)."""
    settings.state_path = Path(absolute(str(settings.state_path)))
    for section, name in SETTINGS_PATHS:
        part = getattr(settings, section)
        value = getattr(part, name)
        if isinstance(value, str) and value:
            setattr(part, name, absolute(value))
    for section, name in SETTINGS_MAYBE_PATHS:
        part = getattr(settings, section)
        value = getattr(part, name)
        if isinstance(value, str) and named_path(value):
            setattr(part, name, absolute(value))
