"""cc routing: `[[routing.rule]]` tables in the settings file → GitHub handles and labels for a crash.

A rule has at least one matcher and at least one of `cc`/`labels`:

    [[routing.rule]]
    signature = "PendingUnbacked|GuardOnDataDependent"   # regex, searched in the signature
    exception = "PendingUnbackedSymbolNotFound"          # exact exception type name
    torch_file = "torch/fx/experimental/*"               # glob over the innermost torch frame's file
                                                         # ("re:" prefix for a regex)
    cc = ["ezyang", "pytorch/compiler-team"]
    labels = ["module: dynamic shapes"]

Every matcher a rule names must match. Rules combine by **union**: every
matching rule adds its handles and labels, in rule order, without repeats — so a
broad "anything in torch/_inductor" rule and a precise signature rule can both
apply. A bad rule is a RoutingError at start-up naming its index and line.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from state.verdicts import Verdict

KEYS = {"signature", "exception", "torch_file", "cc", "labels"}
_HANDLE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")


class RoutingError(ValueError):
    """A routing rule is wrong; the message names the rule and its line."""


@dataclass
class Rule:
    index: int
    signature: re.Pattern[str] | None = None
    exception: str | None = None
    torch_file: re.Pattern[str] | None = None
    cc: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)

    def matches(self, signature: str | None, exception: str | None, torch_frame: str | None) -> bool:
        """True when every matcher this rule names matches."""
        if self.signature is not None and not (signature and self.signature.search(signature)):
            return False
        if self.exception is not None and exception != self.exception:
            return False
        if self.torch_file is not None:
            path = (torch_frame or "").split(":", 1)[0]
            if not (path and self.torch_file.search(path)):
                return False
        return True


@dataclass
class Route:
    """What routing decided for one crash."""

    cc: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    rules: list[int] = field(default_factory=list)


def _rule_lines(source: str | None) -> list[int]:
    """Line numbers of each `[[routing.rule]]` header in the settings file, for error messages."""
    if not source:
        return []
    try:
        text = Path(source).read_text()
    except OSError:
        return []
    return [n for n, line in enumerate(text.splitlines(), 1) if line.strip().replace(" ", "") == "[[routing.rule]]"]


def compile_rules(raw: list[dict[str, Any]], source: str | None = None) -> list[Rule]:
    """Validate and compile the settings' routing rules."""
    lines = _rule_lines(source)
    rules = []
    for i, data in enumerate(raw):
        where = f"routing rule {i + 1}" + (f" ({source}, line {lines[i]})" if i < len(lines) else "")
        if not isinstance(data, dict):
            raise RoutingError(f"{where}: expected a table, got {type(data).__name__}")
        unknown = set(data) - KEYS
        if unknown:
            raise RoutingError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(KEYS))})")
        if not ({"signature", "exception", "torch_file"} & set(data)):
            raise RoutingError(f"{where}: needs at least one of signature, exception, torch_file")
        if not (data.get("cc") or data.get("labels")):
            raise RoutingError(f"{where}: needs cc or labels (what should happen when it matches?)")
        rule = Rule(index=i)
        for key in ("signature", "exception", "torch_file"):
            if key in data and not isinstance(data[key], str):
                raise RoutingError(f"{where}: {key} must be a string")
        try:
            if "signature" in data:
                rule.signature = re.compile(data["signature"])
            if "torch_file" in data:
                pat = data["torch_file"]
                rule.torch_file = re.compile(pat[3:]) if pat.startswith("re:") else re.compile(fnmatch.translate(pat))
        except re.error as exc:
            raise RoutingError(f"{where}: bad regular expression: {exc}") from None
        rule.exception = data.get("exception")
        for key in ("cc", "labels"):
            value = data.get(key, [])
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
                raise RoutingError(f"{where}: {key} must be a list of non-empty strings")
            setattr(rule, key, [v.strip() for v in value])
        for h in rule.cc:
            if not _HANDLE.match(h.lstrip("@")):
                raise RoutingError(f"{where}: {h!r} is not a GitHub handle (user or org/team)")
        rule.cc = [h.lstrip("@") for h in rule.cc]
        rules.append(rule)
    return rules


def valid_handle(handle: str) -> bool:
    """A GitHub user or org/team handle (with or without the leading @)."""
    return bool(_HANDLE.match(handle.lstrip("@")))


def route(rules: list[Rule], signature: str | None, exception: str | None, torch_frame: str | None) -> Route:
    """The union of every matching rule's handles and labels, in rule order."""
    out = Route()
    for rule in rules:
        if rule.matches(signature, exception, torch_frame):
            out.rules.append(rule.index)
            out.cc += [h for h in rule.cc if h not in out.cc]
            out.labels += [l for l in rule.labels if l not in out.labels]
    return out


def verdict_labels(dynamic_label: str, repro: Verdict | None) -> list[str]:
    """Labels a reproducer's verdict earns: `dynamic_label` when dynamic=False makes its maintainer's script pass."""
    passes = repro is not None and repro.maintainer is not None and repro.maintainer.static_passes
    return [dynamic_label] if passes and dynamic_label else []
