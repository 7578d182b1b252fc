"""Files written whole or not at all: the one atomic write (a lock, a shard export, a plan, a venv's ready marker)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, text: str, mode: int = 0o644) -> Path:
    """Write `text` to `path` through a temporary file in the same folder and a rename: a reader sees the old
    file or the new one, never half of it. `mode`: the permissions of the result (a temp file's are private)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


class UnreadableFile(ValueError):
    """A file the person named cannot be read as what it should be; the message names it and why, in one line."""


def read_toml(path: str | Path, what: str) -> dict:
    """The TOML document at `path`; `what` names it in errors ("settings file", "config file")."""
    import tomllib  # 3.11+; only the parent reads TOML files

    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UnreadableFile(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise UnreadableFile(f"{path}: is a folder, not a {what}") from None
    except OSError as exc:          # no permission, an unreadable device
        raise UnreadableFile(f"{path}: cannot read the {what} ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise UnreadableFile(f"{path}: not a text file (a TOML {what} is UTF-8 text)") from None
    except tomllib.TOMLDecodeError as exc:
        raise UnreadableFile(f"{path}: {exc}") from None


def table_entries(path: str | Path, what: str, name: str, error: type[Exception]) -> list[tuple[str, object]]:
    """The `[[name]]` entries of a reviewed TOML table, each with where it stands (`path: name #i`); `error` (one
    line naming the file) when it cannot be read, holds another top-level key, or has no entries: an emptied table
    is never read as "none"."""
    path = Path(path)
    try:
        doc = read_toml(path, what)
    except UnreadableFile as exc:
        raise error(str(exc)) from None
    extra = sorted(set(doc) - {name})
    if extra:
        raise error(f"{path}: unknown key {extra[0]!r} (the table is [[{name}]] entries)")
    rows = doc.get(name)
    if not isinstance(rows, list) or not rows:
        raise error(f"{path}: the table has no [[{name}]] entries")
    return [(f"{path}: {name} #{i + 1}", row) for i, row in enumerate(rows)]
