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
