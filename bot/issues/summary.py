"""One summary issue per config (and mode: harness.core.modes): every model's effect, the config's tracking issues, its trend, graph breaks.

The body links the config's tracking issues by key (bot.issues.keys.REF, resolved to "#N" when sent), shows
the trend as one point per change of the crash and fewer-graphs counts, the new signatures not filed yet
(pending over the filing budget, with their would-be titles; watching, with their evidence so far:
bot.issues.filing), the graph-break ids the flag removes and introduces and the leverage ranking. Its material content makes its body hash (bot.issues.material); what
becomes of the issue is bot.issues.lifecycle's.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from bot.issues.context import RunContext, line, render_fitting
from bot.issues.filing import Candidate, Filing
from bot.issues.keys import REF, summary_key
from bot.issues.material import BodyHash, break_material, leverage_material
from bot.issues.tracking import Group
from bot.text import markdown
from harness.core.correctness import WRONG_RESULT, first_wrong, wrong_signature
from harness.core.effects import calls_table, judged


@dataclass(frozen=True)
class SummaryIssue:
    """What the summary issue of one config should say."""

    key: str
    config: str
    title: str
    body: str
    labels: list[str]
    hash: BodyHash


def issue(ctx: RunContext, config: str, groups: list[Group], filing: Filing | None = None) -> SummaryIssue:
    """The summary issue of `config`, linking the run's tracking groups that have an issue, and listing the new
    signatures held back (`filing`)."""
    key = summary_key(config, ctx.mode)
    effects = ctx.effects(config)
    counts = Counter(e.effect for e in effects)
    rows = [{"model": e.model, "stratum": e.stratum, "effect": e.effect, "baseline": e.baseline_graphs,
             "flagged": e.config_graphs, "signature": e.config_signature} for e in effects]
    calls = _calls(ctx, config) if judged(ctx.view.effects) else None
    if calls is not None:              # only then: a run without calls keeps its rows, and so its hash
        for row, e in zip(rows, effects):
            row.update(correctness=e.correctness, recompile=e.recompile)
    tracking = sorted(({"ref": REF.format(key=g.key), "key": g.key, "signature": g.signature, "count": len(g.effects)}
                       for g in groups if g.config == config), key=lambda r: (-r["count"], r["signature"]))
    trend = _trend(ctx, config) or [{"date": ctx.date[:10], "crashes": counts["crashes"],
                                     "reduces": counts["reduces_graphs"]}]
    body_ctx = ctx.shared(config)
    title = markdown.title(line("title_summary.txt.j2", config_display=body_ctx["config_display"],
                                crashes=counts["crashes"], reduces=counts["reduces_graphs"],
                                testable=body_ctx["testable"], mode=body_ctx["mode_words"]))
    pending, watching = (filing or Filing()).of(config)
    held = {"pending": [_held(c) for c in pending], "watching": [_held(c) for c in watching]}
    verifying = [_held(c) for c in (filing or Filing()).verifying if c.group.config == config]
    if verifying:                     # only then: the hash an older body was stored with stays
        held["verifying"] = verifying
    breaks, lev = ctx.view.breaks.get(config), ctx.view.leverage.get(config)
    skipped = _not_compared(ctx, config)
    body_ctx.update(key=key, marker=markdown.marker(key),
                    meta=ctx.meta({"kind": "summary", "config": config}), crashes=counts["crashes"], reduces=counts["reduces_graphs"], rows=rows, tracking=tracking,
                    trend=trend, breaks=breaks, leverage=lev, **{"verifying": [], **held}, budget=ctx.settings.max_new_per_night,
                    max_open=ctx.settings.max_open, min_models=ctx.settings.min_models,
                    min_nights=ctx.settings.min_nights, not_compared=skipped, previous_text=ctx.previous_text,
                    torch_version=ctx.view.run.environment.torch_version or "unknown", calls=calls)
    material = {"title": title, "rows": rows, "trend": [(p["crashes"], p["reduces"]) for p in trend],
                "tracking": [(r["key"], r["count"]) for r in tracking],
                "breaks": break_material(breaks), "leverage": leverage_material(lev), **ctx.notices()}
    if any(held.values()):            # none held: the hash an older body was stored with
        material["held"] = {k: [(r["key"], r["models"], r["nights"], r["confirmed"]) for r in rows]
                            for k, rows in held.items()}
    if skipped:                       # none: the hash an older body was stored with
        material["not_compared"] = skipped
    if calls is not None:             # none judged: the hash an older body was stored with
        material["calls"] = {"counts": calls["counts"], "wrong": [(r["model"], r["signature"]) for r in calls["wrong"]],
                             "findings": [(f.model, f.signature) for f in calls["findings"].every],
                             "unsafe": calls["unsafe"]}
        if calls["findings"].causes:  # none folded: the hash an older body was stored with
            material["calls"]["causes"] = [(c.default.key, [(s.config, s.right, s.wrong, s.unjudged) for s in c.swept])
                                           for c in calls["findings"].causes]
        if calls["disagreed"]:        # none: the hash an older body was stored with
            material["calls"]["disagreed"] = [(f.model, f.disagreement) for f in calls["disagreed"]]
    labels = list(ctx.settings.labels)
    return SummaryIssue(key=key, config=config, title=title, body=render_fitting("issue_summary.md.j2", body_ctx),
                        labels=labels, hash=BodyHash.of(material, labels))


def _calls(ctx: RunContext, config: str) -> dict[str, Any]:
    """The correctness and recompile section: the config's counts, its wrong results (with what differs), whether
    the flag is unsafe by its own documentation, and the run's baseline findings (the baseline's, no flag's), folded
    by cause (harness.core.defaults)."""
    table = calls_table(ctx.effects(config), config)
    wrong = []
    for e in ctx.effects(config):
        o = ctx.outcome_of(e)
        call = first_wrong(o.calls) if o is not None and e.correctness == WRONG_RESULT else None
        if call is not None:
            wrong.append({"model": e.model, "signature": wrong_signature(call), "detail": call.detail})
    return {"correctness": table.correctness, "recompiles": table.recompiles, "judged": table.judged,
            "compared": table.compared, "counts": [(r.effect, r.count) for r in (*table.correctness, *table.recompiles)],
            "wrong": wrong, "unsafe": ctx.unsafe(config), "findings": ctx.findings(),
            "disagreed": [f for f in ctx.view.answer_audit if f.config == config and f.disagreement]}


def _held(c: Candidate) -> dict[str, Any]:
    """A held signature's row: its would-be title and its evidence so far."""
    return {"key": c.group.key, "signature": c.group.signature, "title": c.issue.title, "models": c.models,
            "nights": c.nights, "confirmed": c.confirmed}


def _not_compared(ctx: RunContext, config: str) -> list[tuple[str, int]]:
    """Why models of `config` were not compared with the previous run (a transformers bump, a changed build),
    with how many models each reason covers."""
    reasons = Counter(t.reason or "its build changed" for t in ctx.transitions
                      if t.config == config and t.transition == "not_comparable")
    return sorted(reasons.items())


def _trend(ctx: RunContext, config: str) -> list[dict[str, Any]]:
    """The config's trend, one point per change of its crash and fewer-graphs counts."""
    trend: list[dict[str, Any]] = []
    for point in ctx.timeline.trend.get(config, ()):
        p = {"date": point.date, "crashes": point.crashes, "reduces": point.reduces}
        if not trend or (trend[-1]["crashes"], trend[-1]["reduces"]) != (p["crashes"], p["reduces"]):
            trend.append(p)
    return trend
