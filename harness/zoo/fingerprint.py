"""Fingerprints: what makes two builds of a model the same, hashed so that comments and formatting do not count.

A model's fingerprint is its lock entry's hash plus materialize_version(): the
AST (docstrings dropped) of the code that turns a lock entry into a module and
tensors. Discovery code is not in it: a change there matters only once it
changes an entry, and then it changes exactly that entry's fingerprint.
"""
from __future__ import annotations

import ast
import hashlib
import json
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).parent
# The code that turns a lock entry into tensors (build.py: config -> module; inputs.py: spec -> inputs).
MATERIALIZE_SOURCES = ("build.py", "inputs.py")


def code_hash(text: str) -> str:
    """A hash of Python source that ignores comments, docstrings and formatting."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()[:16]


@lru_cache(maxsize=4)
def materialize_version(root: Path = HERE) -> str:
    """The hash of the materialization code's AST (build.py and inputs.py under root, default this package)."""
    return digest({name: code_hash((Path(root) / name).read_text()) for name in MATERIALIZE_SOURCES})


def zoo_code_version() -> str:
    """The run environment's recipe fingerprint: materialization code plus the lock's content (comments do not count)."""
    from harness.zoo import lock

    try:
        current = lock.current()
    except lock.LockError:
        return materialize_version()
    entries = {m: e.get("hash") if isinstance(e, dict) else None for m, e in current.entries.items()}
    return digest({"code": materialize_version(), "lock": entries})[:12]


def digest(payload: dict) -> str:
    """A stable short hash of JSON-able data."""
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
