"""Every path a person gives the command line, made absolute once, before any command or worker runs.

Workers run in the checkout (harness.engine.handle), not in the directory the command
was started from, and a path derived from a relative one (the lock directory, the
dry-run folder, an export) would land wherever the process that uses it happens to
be. So main() calls absolute_args() right after parsing: the arguments named below are
joined to the current directory (the settings that hold paths are, by bot.settings.load),
and nothing downstream ever sees a relative path. A symlink is kept as it is (a venv's python is one).
"""
from __future__ import annotations

import argparse

from bot.settings import absolute, named_path

# Arguments that always hold a file or folder path (by dest, across every subcommand).
PATH_ARGS = ("settings", "state", "output", "out", "export", "lock_dir", "config_file", "repro", "checkout")
# Arguments that hold a path when they name one ("../venv/bin/python"), else a name or version ("python3", "2.14.1").
MAYBE_PATH_ARGS = ("python", "torch")


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
