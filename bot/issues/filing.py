"""Which new signatures get a tracking issue tonight: the evidence rule, then the filing budget.

A new tracking issue needs evidence: a confirmed crash (a flake re-run repeated it, or the signature was also
seen on the nightly before: a steady state is seen twice) and either `min_models` crashing models or the
signature on `min_nights` consecutive nightlies. A candidate without it is *watching*. Those with it are
filed by leverage (the models they block, then config and signature), at most `max_new_per_night` per publish
and while fewer than `max_open` tracking issues are open; the rest are *pending* and filed on a later night
as room frees. Nothing is stored: the queue is what the night shows less what already has an issue, so a
signature that goes away leaves it. Signatures that already have an issue are not candidates. A candidate
the verify step did not reach within `[verify] max_minutes` is *verification pending*: held, finished later.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from bot.issues.context import RunContext
from bot.issues.tracking import Group, TrackingIssue


@dataclass(frozen=True)
class Candidate:
    """A tracking group without an issue, with its evidence so far and the issue it would be."""

    issue: TrackingIssue
    nights: int                  # consecutive nightlies seen, tonight included
    confirmed: bool

    @property
    def group(self) -> Group:
        return self.issue.group

    @property
    def models(self) -> int:
        return len(self.issue.models)

    def leverage(self) -> tuple[int, str, str]:
        """Sort key: most models blocked first, then config and signature (deterministic)."""
        return (-self.models, self.group.config, self.group.signature)


@dataclass
class Filing:
    """Tonight's candidates: filed now, pending (over the budget) and watching (not enough evidence yet)."""

    filed: list[Candidate] = field(default_factory=list)
    pending: list[Candidate] = field(default_factory=list)
    watching: list[Candidate] = field(default_factory=list)
    verifying: list[Candidate] = field(default_factory=list)   # evident, but the verify step's budget ran out first

    def of(self, config: str) -> tuple[list[Candidate], list[Candidate]]:
        """(pending, watching) of one config, in leverage order."""
        return ([c for c in self.pending if c.group.config == config],
                [c for c in self.watching if c.group.config == config])


def candidate(ctx: RunContext, issue: TrackingIssue) -> Candidate:
    """The candidate of a group without an issue, with its evidence."""
    g = issue.group
    nights = ctx.timeline.streak(g.config, g.signature)
    return Candidate(issue, nights, nights >= 2 or _rerun_confirmed(ctx, g))


def _rerun_confirmed(ctx: RunContext, group: Group) -> bool:
    """Whether flake confirmation re-ran one of the group's crashes and saw it repeat every time."""
    outcomes = [ctx.outcome_of(e) for e in group.effects]
    return any(o is not None and o.attempts > 1 and o.flaky_rate is None for o in outcomes)


def evident(c: Candidate, ctx: RunContext) -> bool:
    """The evidence rule: a confirmed crash, and enough models or enough consecutive nightlies."""
    s = ctx.settings
    return c.confirmed and (c.models >= s.min_models or c.nights >= s.min_nights)


def _verification_pending(ctx: RunContext, c: Candidate) -> bool:
    """The verify step left the group for a later night (its budget ran out): nothing unverified is filed."""
    seen = ctx.view.verdicts.get((c.group.config, c.group.signature))
    return bool(seen and seen.pending)


def choose(ctx: RunContext, candidates: list[Candidate], open_now: int) -> Filing:
    """Split the candidates: file the most leveraged within the budget (`open_now`: tracking issues open)."""
    out = Filing()
    evidenced = sorted((c for c in candidates if evident(c, ctx)), key=Candidate.leverage)
    out.verifying = [c for c in evidenced if _verification_pending(ctx, c)]
    ready = [c for c in evidenced if c not in out.verifying]
    room = max(0, min(ctx.settings.max_new_per_night, ctx.settings.max_open - open_now))
    out.filed, out.pending = ready[:room], ready[room:]
    out.watching = sorted((c for c in candidates if not evident(c, ctx)), key=Candidate.leverage)
    return out
