"""The subset of GitHub's issue search syntax the bot uses: quoted phrases and qualifiers.

Like GitHub, a phrase with no `in:` qualifier matches title, body *and* comments
(so a human quoting a marker in a comment matches too), and search sees nothing
newer than its lag.
"""
from __future__ import annotations

import shlex
import time

from tests.fakegithub.state import FakeState, Issue


def parse(q: str) -> tuple[list[str], dict[str, list[str]]]:
    """Split `q` into free-text terms and qualifiers (`repo:`, `is:`, `in:`, `author:`, `label:`, `state:`)."""
    terms: list[str] = []
    quals: dict[str, list[str]] = {}
    lexer = shlex.shlex(q, posix=True)
    lexer.whitespace_split = True
    lexer.quotes = '"'
    lexer.escape = ""          # GitHub has no backslash escapes
    lexer.commenters = ""
    for token in lexer:
        key, sep, value = token.partition(":")
        if sep and key in {"repo", "is", "in", "author", "label", "state", "type", "user", "org"} and value:
            quals.setdefault(key, []).append(value)
        else:
            terms.append(token)
    return terms, quals


def search_issues(state: FakeState, q: str) -> list[tuple[str, Issue]]:
    """(repo full name, issue) pairs matching `q`, newest first."""
    terms, quals = parse(q)
    where = set(quals.get("in", [])) or {"title", "body", "comments"}
    horizon = time.time() - state.search_lag
    found = []
    with state.lock:
        for full_name, repo in state.repos.items():
            if "repo" in quals and full_name.lower() not in {r.lower() for r in quals["repo"]}:
                continue
            for issue in repo.issues.values():
                if issue.created > horizon:
                    continue
                if "is" in quals and not _is(issue, quals["is"]):
                    continue
                if "state" in quals and issue.state not in quals["state"]:
                    continue
                # GitHub spells an App's author as "app/<slug>"; its login is "<slug>[bot]".
                authors = {a.lower()[4:] + "[bot]" if a.lower().startswith("app/") else a.lower() for a in quals.get("author", [])}
                if "author" in quals and issue.user.lower() not in authors:
                    continue
                if "label" in quals and not set(quals["label"]) <= set(issue.labels):
                    continue
                texts = []
                if "title" in where:
                    texts.append(issue.title)
                if "body" in where:
                    texts.append(issue.body or "")
                if "comments" in where:
                    texts += [repo.comments[c].body for c in issue.comments]
                haystack = "\n".join(texts).lower()
                if all(term.lower() in haystack for term in terms):
                    found.append((full_name, issue))
    found.sort(key=lambda pair: -pair[1].created)
    return found


def _is(issue: Issue, values: list[str]) -> bool:
    for value in values:
        if value in ("open", "closed") and issue.state != value:
            return False
        if value in ("pr", "pull-request"):
            return False
    return True
