"""What a tracking issue says of the commit behind a crash, and whom it cc's for it (pure, over the stored range).

A confirmed culprit (bisected, its parent passing, not marked wrong) is named with its PR, author, co-authors and
approvers and the re-tests that prove it (most likely wrong, and nobody cc'd, when it changes no file the reproducer
imported); where skips left several, each candidate with why; otherwise at most three suspects, each with why, and
why the bisection named none. The cc (harness.core.suspects.cc_for): the culprit's people, or the suspects' by the
1 / 2-3 / more-than-3 rule, never a login removed from the issue; it is added on top of the routing rules.
Anyone the issue names without cc'ing (an approver, a removed author, a co-author past the cc's bound or without a
login GitHub vouches for) is written as code, never as a mention; at most SHOWN_PEOPLE co-authors and approvers are
named per commit, then how many more.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.core.commits import Commit, Person
from harness.core.suspects import cc_for
from state.culprits import CommitRange, ProbeRow

SHOWN_SUSPECTS = 3
SHOWN_PEOPLE = 5          # co-authors, and approvers, named per commit (a message may list hundreds)
PR_URL = "https://github.com/{repo}/pull/{pr}"          # repo: `[culprit] repo`, the repository the commits are of
COMMIT_URL = "https://github.com/{repo}/commit/{sha}"


@dataclass(frozen=True)
class Attribution:
    """The issue's culprit section (template data) and the handles it adds to the cc."""

    section: dict[str, Any] | None = None
    cc: list[str] = field(default_factory=list)
    material: tuple[Any, ...] = ()        # what changes the body hash: the culprit, the suspects, a "wrong" mark


def attribute(found: CommitRange | None, removed: frozenset[str], repo: str) -> Attribution:
    """The culprit section and cc of one stored commit range (None: nothing was searched)."""
    if found is None or found.status == "failed" and not found.commits:
        return Attribution(section={"status": "failed", "reason": found.reason} if found else None,
                           material=(found.status, found.reason) if found else ())
    culprit = found.culprit
    if culprit is not None and not found.wrong_by:
        doubt = bool(found.bisection and found.bisection.likely_wrong)     # it changes nothing the reproducer imported
        cc = [] if doubt else cc_for([culprit], removed)
        return Attribution(section={"status": "found", "commit": _commit(culprit, cc, repo), "likely_wrong": doubt,
                                    "evidence": _evidence(found), "cost": _cost(found), "reason": found.reason},
                           cc=cc, material=("found", culprit.sha, doubt))
    suspects = [c for c in (found.commit(s.sha) for s in found.suspects) if c is not None]
    cc = [] if culprit is not None else cc_for(suspects, removed)     # a culprit marked wrong: nobody
    why = {s.sha: s.why for s in found.suspects}
    shown = [{**_commit(c, cc, repo), "why": why.get(c.sha, [])} for c in suspects[:SHOWN_SUSPECTS]]
    candidates = [{**_commit(c, [], repo), "why": x.why} for x in (found.bisection.candidates if found.bisection else [])
                  if (c := found.commit(x.sha)) is not None] if found.status == "one_of" else []
    section = {"status": found.status, "suspects": shown, "more": max(len(suspects) - SHOWN_SUSPECTS, 0),
               "candidates": candidates,
               "commits": len(found.commits), "reason": found.reason, "cost": _cost(found),
               "wrong": {"sha": culprit.short, "by": found.wrong_by} if culprit is not None else None}
    return Attribution(section=section, cc=cc, material=(found.status, tuple(s["sha"] for s in shown),
                                                         found.wrong_by))


def fixed_by(found: CommitRange | None, repo: str) -> dict[str, Any] | None:
    """The commit a fix's search confirmed (the first where the signature is gone), as the close comment names it:
    its author written as code, never a mention."""
    fix = found.culprit if found is not None and found.bisection and found.bisection.fix else None
    return _commit(fix, [], repo) if fix is not None and not found.wrong_by else None        # type: ignore[union-attr]


def _commit(c: Commit, cc: list[str], repo: str) -> dict[str, Any]:
    """A commit as the template shows it: people in the cc as mentions, the rest as plain logins."""
    title = c.title.removesuffix(f"(#{c.pr})").rstrip() if c.pr else c.title     # the PR is linked beside it
    return {"sha": c.short, "url": COMMIT_URL.format(repo=repo, sha=c.sha), "title": title, "pr": c.pr,
            "pr_url": PR_URL.format(repo=repo, pr=c.pr) if c.pr else None,
            "author": _person(Person(c.author, c.author), cc) if c.author else None,
            "coauthors": [_person(p, cc) for p in c.coauthors[:SHOWN_PEOPLE]],
            "more_coauthors": max(len(c.coauthors) - SHOWN_PEOPLE, 0),
            "approvers": [_person(Person(p), []) for p in c.approvers[:SHOWN_PEOPLE]],
            "more_approvers": max(len(c.approvers) - SHOWN_PEOPLE, 0)}


def _person(p: Person, cc: list[str]) -> dict[str, Any]:
    """A person as shown: a mention only for a login the cc holds; anyone else by login or name, as code."""
    return {"shown": p.login or p.name, "mention": p.login is not None and p.login in cc}


def _evidence(found: CommitRange) -> list[dict[str, Any]]:
    """The re-tests at the culprit and at its parent: the two runs that prove it."""
    rows: list[ProbeRow] = [p for p in (found.bisection.probes if found.bisection else []) if p.phase == "retest"]
    return [{"sha": p.sha[:12], "verdict": p.verdict, "runs": len(p.runs), "build": p.build,
             "failed": sum(1 for r in p.runs if r == found.signature), "passed": p.runs.count("ok")} for p in rows]


def _cost(found: CommitRange) -> dict[str, Any] | None:
    b = found.bisection
    return {"probes": len(b.probes), "runs": b.runs, "minutes": round(b.seconds / 60, 1),
            "commits": len(found.commits), "builds": sorted({p.build for p in b.probes}, key=["good", "bad"].index)} \
        if b else None
