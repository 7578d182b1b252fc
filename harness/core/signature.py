"""Error signatures: a stable, short, human-readable name for an error.

Stdlib only and self-contained: bot/verify/script.py inlines this module's source
into standalone reproducer scripts, so it must not import anything from
flagsweep. A signature keeps the exception type and the message's shape and
drops what varies between runs and models (symbol numbers, sizes, addresses,
paths, line numbers), so the same bug always gets the same name (syzbot's rule).
"""
from __future__ import annotations

import re

MAX_LEN = 150  # a signature is a fragment of an issue title

# Dynamo's documentation page of a graph-break id (the link its own messages carry):
# the one place this URL form lives; GB0124 -> .../gb/gb0124.html.
GB_DOC_URL = "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb{number}.html"
_GB_LINK = re.compile(r"compile-graph-break-site/gb/gb(\d+)\.html")
_GB_ID = re.compile(r"GB\d{4,}")
# Dynamo chains a graph break raised while handling another; the last one is what was raised.
_GB_NESTED = "*** While handling this graph break, another graph break occurred: ***"

# Exceptions that only wrap the real one; the signature names the inner error.
_WRAPPERS = ("BackendCompilerFailed", "InternalTorchDynamoError", "TorchRuntimeError", "UserError",
             "InductorError", "LoweringException")

# Where Dynamo's long hints start: everything after these is advice, not the error
# (harness/core/error_parts.py splits a message for display at the same places).
HINT_STARTS = (
    "\n  Explanation:", "\n  Hint:", "\n  Developer debug context:", "\nfrom user code:",
    "\nUser Stack", "\nSet TORCHDYNAMO_VERBOSE", "\nFor more information", "\nFor more help",
    "\nDid you accidentally", "\nYou can suppress this exception", "\nconsider using data-dependent",
    "\nCaused by:", "\n\nWhile executing", "\nOriginal traceback:",
)

# Prefixes that say nothing about which bug it is.
ADVICE_PREFIXES = (
    "Consider annotating your code using torch._check*(). ",
)

# (pattern, replacement), applied in order to the chosen line. The earlier
# ones cut known messages to their stable part; the later ones are generic.
_RULES: tuple[tuple[str, str], ...] = (
    (r"(Pending unbacked symbols \{[^}]*\} not in returned outputs).*", r"\1"),
    (r"\s*\(unhinted: (?:[^()]|\([^()]*\))*\)", ""),
    (r"\s*\(Size-like symbols: [^)]*\)", ""),
    (r"(CUDA out of memory|out of memory)\. Tried to allocate .*", r"\1"),
    (r"0x[0-9a-fA-F]+", "0xADDR"),
    (r"(?:[A-Za-z]:)?(?:[\w.~+-]*/)+([\w.+-]+\.(?:py|cpp|h|cu|so))", r"\1"),  # paths -> file name
    (r"\.(py|cpp|h|cu):\d+", r".\1:N"),
    (r"\bline \d+", "line N"),
    # Symbols of the shape environment: unbacked (u, zuf), sized (s), floats (zf).
    (r"\b(zuf|zf|u|s)\d+\b", r"\1N"),
    (r"\{\s*(uN|sN|zufN)(\s*,\s*\1)*\s*\}", r"{\1}"),  # {u1, u0} is one pending set, like {u6}
    (r"\b\d+(\.\d+)?\s*(bytes|[KMGT]i?B)\b", r"N \2"),
    (r"\b(size|shape|stride)=\(([^()]*)\)", lambda m: f"{m.group(1)}=({_nums(m.group(2))})"),
    (r"(torch\.Size\(|Size\()\[([^\]]*)\]", lambda m: f"{m.group(1)}[{_nums(m.group(2))}]"),
    (r"\[(\s*-?\d+\s*(,\s*-?\d+\s*)+)\]", lambda m: f"[{_nums(m.group(1))}]"),
    (r"\((\s*-?\d+\s*(,\s*-?\d+\s*)+,?)\)", lambda m: f"({_nums(m.group(1))})"),
    (r"\b\d{3,}\b", "N"),  # ids, pids, sizes: small literals (Eq(uN, 0)) keep their shape
    (r"\s+", " "),
)


def _nums(text: str) -> str:
    """Every integer in a size list becomes N."""
    return re.sub(r"-?\d+", "N", text)


def _short_type(error_type: str) -> str:
    return (error_type or "Error").rsplit(".", 1)[-1]


def _unwrap(error_type: str, message: str) -> tuple[str, str]:
    """Peel Dynamo's wrapper exceptions down to the error they carry."""
    for _ in range(4):
        if _short_type(error_type) not in _WRAPPERS:
            break
        # BackendCompilerFailed: "backend='inductor' raised:\nRuntimeError: msg"
        m = re.search(r"raised:\n([\w.]+(?:Error|Exception|NotFound|SymNode|Failed|Unsupported)\w*): ?(.*)", message, re.S)
        if m:
            error_type, message = m.group(1), m.group(2)
            continue
        # TorchRuntimeError: "... got RuntimeError('msg')" or "... got Exc(\"msg\")"
        m = re.search(r"got (\w+)\((['\"])(.*?)\2\)", message, re.S)
        if m:
            error_type, message = m.group(1), m.group(3)
            continue
        # UserError around a data-dependent guard: name the guard failure itself.
        if "Could not guard on data-dependent expression" in message:
            error_type = "GuardOnDataDependentSymNode"
        # A leading "SomeError: msg" line is the inner error.
        m = re.match(r"\s*([A-Z]\w*(?:Error|Exception|NotFound|SymNode)): (.*)", message, re.S)
        if m:
            error_type, message = m.group(1), m.group(2)
        break
    return _short_type(error_type), message


def _first_line(message: str) -> str:
    """The part of the message that names the error, without Dynamo's advice."""
    text = message
    for cut in HINT_STARTS:
        idx = text.find(cut)
        if idx > 0:
            text = text[:idx]
    text = text.strip()
    for prefix in ADVICE_PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix):]
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def normalize(text: str) -> str:
    """Drop what varies between runs and models from one line of an error message."""
    for pattern, repl in _RULES:
        text = re.sub(pattern, repl, text)
    return text.strip().rstrip(".:;, ")


def error_kind(error_type: str, message: str) -> str:
    """The short type of the error a message carries, Dynamo's wrappers peeled off ('Unsupported')."""
    return _unwrap(error_type, message or "")[0]


def gb_doc_url(gb_id: str) -> str:
    """The documentation page of a graph-break id such as 'GB0124'."""
    return GB_DOC_URL.format(number=gb_id[2:])


def _last_break(text: str) -> str:
    return text.rsplit(_GB_NESTED, 1)[-1].strip("\n")


def graph_break_type(text: str | None) -> str | None:
    """The gb_type of a Dynamo graph-break message (its first line, followed by '  Explanation:'), else None."""
    block = _last_break(text or "")
    head, sep, _ = block.partition("\n  Explanation:")
    head = head.strip()
    return head if sep and head and "\n" not in head else None


def linked_gb_id(text: str | None) -> str | None:
    """The id in the documentation link Dynamo appends to a graph-break message ('GB0124'), else None."""
    if graph_break_type(text) is None:
        return None
    links = _GB_LINK.findall(_last_break(text or ""))
    return f"GB{links[-1]}" if links else None


def gb_signature(gb_id: str, gb_type: str) -> str:
    """The signature of a graph break with a registry id: 'GB0124: Unsupported Tensor.item() call ...'."""
    sig = f"{gb_id}: {normalize(gb_type)}"
    return sig if len(sig) <= MAX_LEN else sig[: MAX_LEN - 3].rstrip() + "..."


def signature(error_type: str, message: str, traceback_text: str | None = None, gb_id: str | None = None) -> str:
    """A stable signature such as 'PendingUnbackedSymbolNotFound: Pending unbacked symbols {uN} ...'.

    A graph break raised as an error (Dynamo's Unsupported, not a wrapper such as TorchRuntimeError) with a
    registry id is named by the id and its gb_type; `gb_id` is the id the worker looked up, else the id of
    the message's documentation link.
    """
    kind = _short_type(error_type)
    gb_type = graph_break_type(message) if kind == "Unsupported" else None  # other errors keep their inner error
    gb_id = gb_id or linked_gb_id(message)
    if gb_id and gb_type and _GB_ID.fullmatch(gb_id):
        return gb_signature(gb_id, gb_type)
    # Ends that are not exceptions: the parent saw the worker die or hang.
    if kind in ("killed", "timeout"):
        detail = normalize(_first_line(message or ""))
        return f"{kind}: {detail}" if detail else kind
    kind, message = _unwrap(error_type, message or "")
    line = normalize(_first_line(message))
    sig = f"{kind}: {line}" if line else kind
    if len(sig) > MAX_LEN:
        sig = sig[: MAX_LEN - 3].rstrip() + "..."
    return sig


# 'File "/x/site-packages/torch/_dynamo/variables/builtin.py", line 12, in call_function'
# and faulthandler's 'File "/x/torch/_ops.py", line 12 in __call__'.
_FRAME = re.compile(r'File "([^"]+)", line \d+,? in (\S+)')
# Frames that only raise what others decided: not where the error is.
_RAISERS = ("torch/_dynamo/exc.py", "torch/__init__.py:_check", "torch/_dynamo/utils.py:wrap_fake_exception")


def innermost_torch_frame(traceback_text: str | None) -> str | None:
    """The deepest torch frame of a traceback, as 'torch/_dynamo/variables/builtin.py:call_function'."""
    if not traceback_text:
        return None
    # Chained tracebacks print the root cause first; its deepest frame is where
    # the error started (the later blocks end in Dynamo's re-raising wrappers).
    blocks = re.split(r"Traceback \(most recent call last\):|\(most recent call first\):", traceback_text)
    first_call_first = "(most recent call first)" in traceback_text  # faulthandler dumps
    for block in blocks:
        frames = []
        for path, func in _FRAME.findall(block):
            path = path.replace("\\", "/")
            idx = path.rfind("/torch/")
            rel = path[idx + 1:] if idx >= 0 else (path if path.startswith("torch/") else None)
            if rel is None:
                continue
            frame = f"{rel}:{func}"
            if not any(frame.startswith(r) for r in _RAISERS):
                frames.append(frame)
        if frames:
            return frames[0] if first_call_first else frames[-1]
    return None
