"""An error message taken apart for a reader: the error itself, the user-code frames once, and the advice.

Dynamo's messages repeat themselves: the frames of the user's code appear twice ("User Stack (most recent
call last):" and "from user code:"), and the error's own words sit above paragraphs of advice (hints,
logging switches, links). A tracking issue shows the error and those frames once and folds the rest away;
this module is the one place that decides which part is which. The advice starts where a signature stops
reading (harness.core.signature.HINT_STARTS), so the two never disagree about where the error ends.
Stdlib only, pure.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from harness.core.signature import ADVICE_PREFIXES, HINT_STARTS

# The headings Dynamo puts over the frames of the user's code (both list the same frames).
_STACK_HEADINGS = re.compile(r"^(User Stack \(most recent call last\):|from user code:)[ \t]*$", re.M)
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)[ \t]*$')
_CARETS = re.compile(r"^\s*[\^~]+\s*$")          # Python's column markers under a code line
# Where a graph break's explanation ends and its advice begins.
_EXPLANATION = re.compile(r"\n  Explanation:(.*?)(?=\n  Hint:|\n  Developer debug context:|\n\s*For more details|\Z)",
                          re.S)
_CHAIN = ("Traceback (most recent call last):", "The above exception was the direct cause",
          "During handling of the above exception", "[... clipped")   # the worker's own cut of a long traceback
_EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(:|$)")     # "torch._dynamo.exc.Unsupported: ..." at column 0
HEAD_LIMIT = 600        # characters of the error itself shown inline


@dataclass(frozen=True)
class Frame:
    """One frame of the user's code: where, and the line of code Python printed under it."""

    file: str
    line: int
    function: str
    code: str

    @property
    def place(self) -> str:
        """'modeling_x.py:403 in <listcomp>'."""
        return f"{self.file}:{self.line} in {self.function}"

    def text(self) -> str:
        """The frame as Python prints it (without the column markers)."""
        head = f'File "{self.file}", line {self.line}, in {self.function}'
        return f"{head}\n    {self.code}" if self.code else head


@dataclass(frozen=True)
class ErrorParts:
    """One error message, split: the error's own words, the user-code frames once, and the advice."""

    head: str                       # "Type: message", up to where the advice starts
    explanation: str                # a graph break's "Explanation:" paragraph ("" when none)
    frames: tuple[Frame, ...]       # the user's code, outermost first, each frame once
    advice: str                     # everything else: hints, debugging switches, links

    @property
    def frames_text(self) -> str:
        return "\n".join(f.text() for f in self.frames)


def split(error_type: str | None, message: str | None) -> ErrorParts:
    """`message` (as the outcome stored it) taken apart; the error type prefixes its head."""
    text = (message or "").replace("\r\n", "\n")
    stacks, rest = _user_stacks(text)
    explanation = ""
    m = _EXPLANATION.search(rest)
    if m:
        explanation = _dedent(m.group(1))
        rest = rest[:m.start()] + rest[m.end():]
    own, advice = _cut(rest)
    kind = (error_type or "").rsplit(".", 1)[-1]
    head = f"{kind}: {own}" if kind and own else (kind or own)
    return ErrorParts(head=_bound(head, HEAD_LIMIT), explanation=_bound(explanation, HEAD_LIMIT),
                      frames=_once(stacks), advice=re.sub(r"\n{3,}", "\n\n", advice).strip("\n"))


def headline(error_type: str | None, message: str | None) -> str:
    """The error in one line: its head, the explanation when the head is only a graph break's name."""
    parts = split(error_type, message)
    first = parts.explanation.split("\n\n", 1)[0]
    words = f"{parts.head} ({first})" if first else parts.head
    return " ".join(words.split())


def _user_stacks(text: str) -> tuple[list[list[Frame]], str]:
    """Every user-code stack in `text`, and `text` without them."""
    stacks: list[list[Frame]] = []
    lines = text.split("\n")
    keep: list[str] = []
    i = 0
    while i < len(lines):
        if not _STACK_HEADINGS.match(lines[i]):
            keep.append(lines[i])
            i += 1
            continue
        i += 1
        frames: list[Frame] = []
        # The stack runs on while lines are indented: frames, their code, column markers, "(snipped ...)".
        while i < len(lines) and lines[i][:1] in (" ", "\t"):
            f = _FRAME.match(lines[i])
            if f:
                code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.match(lines[i + 1]) else ""
                code = "" if _CARETS.match(code) else code
                frames.append(Frame(f.group(1), int(f.group(2)), f.group(3), code))
            i += 1
        stacks.append(frames)
    return stacks, "\n".join(keep)


def _once(stacks: list[list[Frame]]) -> tuple[Frame, ...]:
    """The frames of the longest stack (the others list the same frames, or a snipped part of them)."""
    longest = max(stacks, key=len, default=[])
    out: list[Frame] = []
    for f in longest:
        if not out or out[-1] != f:
            out.append(f)
    return tuple(out)


def _cut(text: str) -> tuple[str, str]:
    """(the error's own words, the advice after them), split where the first hint starts."""
    at = min((i for i in (text.find(c) for c in HINT_STARTS) if i > 0), default=len(text))
    own, advice = text[:at].strip(), text[at:]
    for prefix in ADVICE_PREFIXES:
        if own.startswith(prefix):
            own = own[len(prefix):]
    return own.strip(), advice


def _dedent(text: str) -> str:
    return "\n".join(ln.strip() for ln in text.strip().split("\n")).strip()


def _bound(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def traceback_excerpt(traceback_text: str | None, limit: int = 4000) -> str:
    """A traceback for reading: no column markers, each exception's message cut to its first line (the
    issue shows the message once, above), and at most `limit` characters: the outermost frames and the
    innermost, the middle of the stack left out with a line that counts it."""
    lines = _without_messages([ln for ln in (traceback_text or "").rstrip("\n").split("\n")
                               if not _CARETS.match(ln)])
    if sum(len(ln) + 1 for ln in lines) <= limit:
        return "\n".join(lines)
    head = _fit(lines, limit // 4)
    while len(head) > 1 and not _FRAME.match(lines[len(head)]):   # end before a frame, not inside one
        head.pop()
    tail = _fit(lines[::-1], limit - limit // 4 - 80)[::-1]
    while len(tail) > 1 and not _FRAME.match(tail[0]):             # start at a frame
        tail.pop(0)
    left = lines[len(head):len(lines) - len(tail)]
    frames = sum(1 for ln in left if _FRAME.match(ln))
    return "\n".join(head + [f"  … {len(left)} lines ({frames} frames) left out …"] + tail)


def _without_messages(lines: list[str]) -> list[str]:
    """Each exception line kept, the rest of its message dropped (until the next chained traceback)."""
    out: list[str] = []
    in_message = False
    for ln in lines:
        if ln.startswith(_CHAIN):
            in_message = False
        elif in_message:
            continue
        elif out and _EXCEPTION_LINE.match(ln):
            in_message = True
            ln = _bound(ln, 300)
        out.append(ln)
    return out


def _fit(lines: list[str], budget: int) -> list[str]:
    """The longest prefix of `lines` within `budget` characters."""
    taken, size = [], 0
    for ln in lines:
        if size + len(ln) + 1 > budget:
            break
        taken.append(ln)
        size += len(ln) + 1
    return taken
