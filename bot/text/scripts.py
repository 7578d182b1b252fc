"""Values in the scripts the bot writes: one helper per context, and `Code`, the only thing a script prints.

A reproducer is run on the host that verifies it (the one holding the GitHub token) and by the maintainers who read
its issue, and what fills it comes from stored runs, a shard's export file or the command line: foreign text. So no
value reaches a script as it is. Each context has its helper, which returns `Code`: a Python literal
(`python_literal`, any JSON value), a Python name (`python_name`, `dotted_name`: refused unless they are one), a `#`
comment line (`comment`: one line, whatever the value holds), a shell word (`shell_word`). Lines made of several
parts are put together by `compose`, which takes only `Code`. The script templates (`*.py.j2`) are rendered by
bot.text.render with a finalize that refuses anything but `Code`, so a forgotten filter is an error, never text.
"""
from __future__ import annotations

import json
import math
import re
import shlex
from typing import Any

from harness.core.names import is_python_name


class Code(str):
    """Source text a helper of this module made safe for its context (or flagsweep's own source, `own_source`)."""


class ScriptValueError(ValueError):
    """A value cannot stand where a script needs it (a name that is not a name, a value that is not JSON data)."""


# Python reads an encoding from a comment on a script's first two lines (PEP 263): "coding: utf-7" there would let
# the rest of a comment decode to new lines of code. The helper breaks the pattern wherever it appears.
_CODING = re.compile(r"(coding)([:=])", re.I)


def python_literal(value: Any) -> Code:
    """A JSON value (None, bool, int, float, str, list, dict) as Python source: `dict(a=1)` where keys are names."""
    if isinstance(value, dict) and value and all(is_python_name(k) for k in value):
        return Code("dict(" + ", ".join(f"{k}={python_literal(v)}" for k, v in value.items()) + ")")
    if isinstance(value, dict):
        return Code("{" + ", ".join(f"{python_literal(k)}: {python_literal(v)}" for k, v in value.items()) + "}")
    if isinstance(value, (list, tuple)):
        return Code("[" + ", ".join(python_literal(v) for v in value) + "]")
    if isinstance(value, float) and not math.isfinite(value):
        return Code(f"float({str(value)!r})")
    if isinstance(value, str):
        return Code(_string(value))
    if value is None or isinstance(value, (bool, int, float)):
        return Code(repr(value))      # repr of these types is a literal that reads back to the same value
    raise ScriptValueError(f"{type(value).__name__} {value!r} is not JSON data")


def python_json(value: Any) -> Code:
    """JSON data as a raw triple-quoted string literal, one key per line (for `json.loads`): ASCII only, and `'` is
    written \\u0027, so nothing inside can close it."""
    text = json.dumps(value, sort_keys=True, indent=1, ensure_ascii=True).replace("'", "\\u0027")
    return Code(f"r'''{text}'''")


def _string(text: str) -> str:
    """repr(text) (a literal that reads back to `text`), in double quotes where that needs no escape."""
    quoted = repr(str(text))
    if quoted.startswith("'") and "'" not in text and '"' not in text:
        return '"' + quoted[1:-1] + '"'
    return quoted


def python_name(value: Any) -> Code:
    """An identifier (a model or config class, a keyword argument) as itself; ScriptValueError otherwise."""
    if not is_python_name(value):
        raise ScriptValueError(f"{value!r} is not a Python name")
    return Code(value)


def dotted_name(value: Any) -> Code:
    """A dotted path of identifiers (`torch._dynamo.config.verbose`) as itself; ScriptValueError otherwise."""
    if not isinstance(value, str) or not all(is_python_name(part) for part in value.split(".")):
        raise ScriptValueError(f"{value!r} is not a dotted Python name")
    return Code(value)


def comment(value: Any) -> Code:
    """Text for the rest of a `#` comment line: line breaks and other unprintable characters written as escapes, and
    no encoding declaration (PEP 263), so the line stays one comment."""
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(value))
    return Code(_CODING.sub(r"\1 \2", text))


def shell_word(value: Any) -> Code:
    """One word of a POSIX shell command line, quoted where it needs to be."""
    return Code(shlex.quote(str(value)))


def compose(template: str, *parts: Code) -> Code:
    """`template.format(*parts)`, where every part is `Code` (a raw value is a TypeError: it has no context yet)."""
    for part in parts:
        if not isinstance(part, Code):
            raise TypeError(f"compose: {part!r} is a raw {type(part).__name__}, not Code from a helper")
    return Code(template.format(*parts))


def own_source(text: str) -> Code:
    """flagsweep's own source text (an inlined module, read from this checkout), taken as code as it is."""
    return Code(text)


class RawValue(TypeError):
    """A script template printed a value no helper made safe."""


def finalize(value: Any) -> Code:
    """The script templates' finalize: `Code` passes, anything else is refused (its filter was forgotten)."""
    if isinstance(value, Code):
        return value
    raise RawValue(f"a script template printed a raw {type(value).__name__} {str(value)[:60]!r}: "
                   "give it the filter of its context (py, comment, name, ...)")


# The script templates' filters, one per context (bot.text.render registers them).
FILTERS = {"py": python_literal, "py_json": python_json, "name": python_name, "dotted": dotted_name,
           "comment": comment, "shell": shell_word}
