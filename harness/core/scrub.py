"""Machine paths out of text: what the runner's disk looks like never reaches GitHub or a report.

`scrub(text)` makes installed files package-relative
(`.../site-packages/transformers/models/x.py` -> `transformers/models/x.py`),
standard-library files bare (`contextlib.py`), and drops the checkout, the
interpreter's prefix, the home directory and temporary directories from any
other path. Line numbers and everything that is not a path are kept, so error
signatures (which keep only file names) are the same before and after.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from functools import lru_cache

from harness import PROJECT_ROOT

_SEG = r"[\w.~+@%=-]+"
_START = r"(?<![\w.~+@%=/\\-])"  # a path starts here, not in the middle of a word or another path

# Generic rules, applied after the known roots: they hold for any runner's layout.
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # installed packages: everything up to site-packages/ or dist-packages/
    (re.compile(_START + rf"(?:[A-Za-z]:)?(?:[/\\]{_SEG})*?[/\\](?:site|dist)-packages[/\\]"), ""),
    # the standard library: everything up to lib/pythonX.Y/
    (re.compile(_START + rf"(?:[A-Za-z]:)?(?:[/\\]{_SEG})*?[/\\]lib[/\\]python\d[\d.]*t?[/\\]"), ""),
    # an interpreter anywhere (a nightly's venv, a pyenv build): its name only
    (re.compile(_START + rf"(?:/{_SEG})+/bin/(python[\d.]*)\b"), r"\1"),
    # temporary directories: the file name only
    (re.compile(_START + rf"/(?:tmp|var/tmp|private/var/folders|var/folders)(?:/{_SEG})*/(?={_SEG})"), ""),
    # anyone's home: relative to it
    (re.compile(_START + rf"/(?:home|Users)/{_SEG}/"), ""),
    (re.compile(_START + r"/root/"), ""),
)


@lru_cache(maxsize=1)
def _roots() -> tuple[str, ...]:
    """This machine's own roots, longest first: the checkout, the interpreter prefixes, temp, home."""
    roots = {str(PROJECT_ROOT), sys.prefix, sys.base_prefix, tempfile.gettempdir(), os.path.expanduser("~")}
    return tuple(sorted((r.rstrip("/") for r in roots if r and r.rstrip("/")), key=len, reverse=True))


def scrub(text: str | None) -> str | None:
    """`text` with every machine path made package-relative or dropped (None stays None)."""
    if not text or "/" not in text and "\\" not in text:
        return text
    for pattern, repl in _RULES[:2]:   # package-relative first: a venv may live under the checkout
        text = pattern.sub(repl, text)
    for root in _roots():
        text = re.sub(_START + re.escape(root) + r"(?:/|\b)", "", text)
    for pattern, repl in _RULES[2:]:
        text = pattern.sub(repl, text)
    return text
