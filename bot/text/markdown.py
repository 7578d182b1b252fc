"""Text safety for everything the bot writes: foreign text never mentions anyone or breaks our markup.

"Foreign" text is anything taken from errors, models, tracebacks or users. It
can hold `@someone` (a GitHub notification), `|` (a broken table), backticks
(a broken code span), or our own `<!-- flagsweep:... -->` markers (which would
confuse the splice of the bot's region). The jinja environment (bot.text.render) has
them as filters, so templates say `{{ msg | cell }}` instead of escaping by hand.
"""
from __future__ import annotations

import re

MAX_BODY = 65536          # GitHub rejects longer issue and comment bodies with 422
MAX_TITLE = 256
ZWJ = "\u200d"            # invisible, and GitHub no longer sees a mention after it

_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_HTML_COMMENT = re.compile(r"<!--|-->")
_REFERENCE = re.compile(r"(?<![\w&])#(?=\d)")   # "#123" would link (and notify) an unrelated issue


def neutralize(text: object) -> str:
    """Foreign text with mentions, issue references and HTML comment delimiters defused."""
    s = "" if text is None else str(text)
    s = _MENTION.sub("@" + ZWJ, s)
    s = _REFERENCE.sub("#" + ZWJ, s)
    return _HTML_COMMENT.sub(lambda m: m.group(0)[0] + ZWJ + m.group(0)[1:], s)


def cell(text: object, limit: int = 300) -> str:
    """Foreign text for one Markdown table cell: one line, `|` and backticks escaped, bounded length."""
    s = neutralize(text)
    s = " ".join(s.split())                     # newlines end a table row
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    s = s.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
    s = s.replace("<", "&lt;").replace(">", "&gt;")
    s = s.replace("*", "\\*").replace("_", "\\_").replace("[", "\\[").replace("]", "\\]")
    return s or " "


def code(text: object, limit: int = 200) -> str:
    """Foreign text as one inline code span (fence longer than any backtick run inside)."""
    s = " ".join(neutralize(text).split())
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def fenced(text: object, lang: str = "", limit: int = 20000) -> str:
    """Foreign text as a fenced code block whose fence no line inside can close."""
    s = neutralize(text).rstrip("\n")
    if len(s) > limit:
        cut = len(s) - limit
        s = s[:limit] + f"\n… ({cut} more characters)"
    longest = max((len(m) for m in re.findall(r"`{3,}", s)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{s}\n{fence}"


def script(text: object, lang: str = "python", limit: int = 30000) -> str:
    """Code meant to be copied and run, fenced: left byte-exact (GitHub does not notify mentions inside
    code blocks, and a ZWJ after `@` would break a decorator), except that our own markers are defused."""
    s = str(text or "").rstrip("\n").replace("<!-- flagsweep", "<!--" + ZWJ + " flagsweep")
    if len(s) > limit:
        s = s[:limit] + f"\n# … ({len(s) - limit} more characters)"
    longest = max((len(m) for m in re.findall(r"`{3,}", s)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{s}\n{fence}"


def prose(text: object, limit: int = 2000) -> str:
    """Foreign text inside a sentence: neutralized, one line, Markdown emphasis and HTML escaped."""
    s = cell(text, limit).replace("\\|", "|")
    return s


def title(text: str) -> str:
    """A title GitHub accepts: one line, at most 256 characters, no mentions."""
    s = " ".join(neutralize(text).split())
    return s if len(s) <= MAX_TITLE else s[: MAX_TITLE - 1] + "…"


def handle(login: str) -> str:
    """A trusted handle from the routing rules, as a mention (validated by bot.issues.routing)."""
    return "@" + login.lstrip("@")


def fits(body: str) -> bool:
    """True when GitHub will accept `body`."""
    return len(body) <= MAX_BODY


BEGIN = "<!-- flagsweep:begin -->"
END = "<!-- flagsweep:end -->"


def marker(key: str) -> str:
    """The hidden marker that makes an issue the bot's (found by search and by listing)."""
    return f"<!-- flagsweep:key={key} -->"


def splice(current: str | None, new: str) -> str:
    """`new` (a whole bot body) merged into `current`: the bot's region replaced, a human's text around it kept.

    When `current` has lost its markers (a human rewrote the body) the bot's
    body is appended below what the human wrote, so nothing of theirs is lost.
    The key and meta marker lines above the region are the new body's (an issue re-keyed to a shifted signature).
    """
    current = current or ""
    nb, ne = new.find(BEGIN), new.rfind(END)
    cb, ce = current.find(BEGIN), current.rfind(END)
    if nb < 0 or ne < 0:
        return new
    if cb < 0 or ce < cb:
        if not current.strip():
            return new
        head = current if marker_key(current) else new[:nb] + current
        return head.rstrip("\n") + "\n\n" + new[nb:]
    return _markers_of(new, current[:cb]) + new[nb:ne] + current[ce:]


def _markers_of(new: str, head: str) -> str:
    """`head` with its key and meta marker lines replaced by those of `new` (where both have them)."""
    for pattern in (_KEY, _META):
        m = pattern.search(new)
        if m:
            head = pattern.sub(lambda _: m.group(0), head, count=1)
    return head


_KEY = re.compile(r"<!-- flagsweep:key=([A-Za-z0-9_.-]+) -->")


def marker_key(body: str | None) -> str | None:
    """The key in a body's marker, if any."""
    m = _KEY.search(body or "")
    return m.group(1) if m else None


_META = re.compile(r"<!-- flagsweep:meta=(\{.*?\}) -->")


def meta_marker(data: dict) -> str:
    """A hidden line with the issue's config and signature, so links can be rebuilt from GitHub alone."""
    import json
    raw = json.dumps(data, sort_keys=True)
    # Escaped so no signature can close the HTML comment or fake a marker.
    raw = raw.replace("<", "\\u003c").replace(">", "\\u003e").replace("-", "\\u002d")
    raw = raw.replace("@", "\\u0040").replace("#", "\\u0023")      # no mention, even hidden
    return f"<!-- flagsweep:meta={raw} -->"


def marker_meta(body: str | None) -> dict:
    """The data of a body's meta line ({} if none or unreadable)."""
    import json
    m = _META.search(body or "")
    if not m:
        return {}
    try:
        data = json.loads(m.group(1))
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
