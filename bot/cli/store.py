"""The store as the command line opens it: a command that only reads never creates one.

`db.connect` creates the file (and its folders' worth of WAL files) when it is missing, which is right for a
command that writes. A read command (`runs`, `diff`, `report`, `export`, `stats`) at a mistyped `--state` would
then report an empty store as if it were the real one: it is refused instead (StoreError: one line, exit 2).
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from bot.settings import Settings
from state.db import StoreError, connect


def open_existing(settings: Settings) -> sqlite3.Connection:
    """The store at settings.state_path, which must exist; StoreError naming the path when it does not."""
    path = Path(settings.state_path)
    if not path.exists():
        raise StoreError(f"{path}: no state file there (a command that only reads never creates one; "
                         "check --state or $FLAGSWEEP_STATE)")
    return connect(path)
