"""What a name is where it reaches a script: a Python name (a model or config class, a keyword argument).

One rule for the reproducer's helpers (bot.text.scripts.python_name) and for the records that carry a model's name
in from a shard or the store (read as foreign text: a name holding a newline would be Python in a reproducer).
"""
from __future__ import annotations

import keyword
import re
from typing import Any

from harness.core.record import RecordError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def is_python_name(value: Any) -> bool:
    """An ASCII identifier that is no keyword: it stands in a script as itself."""
    return isinstance(value, str) and bool(_NAME.match(value)) and not keyword.iskeyword(value)


def check_model(value: Any, what: str) -> None:
    """RecordError naming the record and the value unless `value` is a model's name (a Python class name)."""
    if not is_python_name(value):
        raise RecordError(f"{what}: model {value!r} is not a model name (a Python class name)")
