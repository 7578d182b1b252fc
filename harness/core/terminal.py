"""Text shown on a terminal: every control character but newline and tab made visible, so that it does nothing.

Errors and signatures come from model code, titles and comments from GitHub, and any of them can hold what a
terminal obeys rather than shows: an ANSI escape sequence (`ESC [2J` clears the screen, OSC 52 sets the clipboard),
a carriage return that writes over the line before it, a bell, a bidirectional override that reorders what is
read. Each such character is written as its Python escape (`\\x1b`, `\\r`, `\\u202e`): the sequence shows as text,
and nothing is lost. A Windows line end (CR LF, as GitHub comments have it) is a plain line end.

The one rule for every writer to a terminal: the command line's (`bot.cli.say`, through `bot.text.terminal`), the
service's lines and the progress bars (`harness.engine.progress`), which name models, configs and stages.
"""
from __future__ import annotations

import re

# C0 but tab and newline, DEL, C1 (which 8-bit terminals obey as ESC sequences), and the bidirectional embeddings,
# overrides and isolates.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every control character but newline and tab written as its escape."""
    return _CONTROL.sub(_escape, text.replace("\r\n", "\n"))
