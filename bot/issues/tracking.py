"""One tracking issue per (config, mode, signature) of a crash the flag causes: its title, body, labels, cc and hash.

The groups are harness.core.tracking's. The body reads in one screen, in this order: a summary; the error
(its head and user-code frames once, harness.core.error_parts; the advice and the traceback folded); the
affected models; the observations (bot.issues.observations); the reproducer the verify step confirmed (or
why none was) and the component it lives in; the environment; the history, regression range and method.
Its material content (title, signature, crashing models, reproducer verdict, cc, component) and the range
it shows make its body hash (bot.issues.material); what becomes of the issue is bot.issues.lifecycle's.
"""
from __future__ import annotations

from typing import Any

from bot.issues import wrong
from bot.issues.culprit import attribute
from bot.issues.context import RunContext, line, render_fitting, seen_fields
from bot.issues.groups import Group, TrackingIssue
from bot.issues.keys import tracking_key
from bot.issues.material import BodyHash, component_material, repro_material
from bot.issues.observations import observe
from bot.issues.routing import route, valid_handle, verdict_labels
from bot.issues.timeline import Seen
from bot.text import markdown
from harness.core import error_parts
from harness.core.outcome import Effect, Outcome
from harness.core.correctness import is_wrong_signature
from harness.core.tracking import crash_signature, issue_groups
from state.links import Link


TRACEBACK_CHARS = 4000     # the traceback excerpt's bound: the outermost frames and the innermost


def groups(ctx: RunContext) -> list[Group]:
    """Every tracking group of the run, sorted by (config, signature): the crashes, and the wrong results of the
    flags that are not unsafe by their own documentation (those stay in the summary and the report)."""
    found = issue_groups(list(ctx.view.effects), list(ctx.view.outcomes))
    return [Group(tracking_key(c, s, ctx.mode), c, s, tuple(effs)) for (c, s), effs in found.items()
            if not (is_wrong_signature(s) and ctx.unsafe(c))]


def _gb_id(examples: list[Outcome], sig: str) -> str | None:
    """The graph-break id a signature is named by ('GB0124: ...'), as the crashing outcomes recorded it."""
    ids = {o.gb_id for o in examples if o.gb_id and sig.startswith(f"{o.gb_id}: ")}
    return min(ids) if ids else None


def issue(ctx: RunContext, group: Group, link: Link | None) -> TrackingIssue:
    """The tracking issue of `group` (`link`: the issue as known, whose cc handles a command may have added)."""
    if group.wrong_result:
        return wrong.issue(ctx, group, link)
    config, sig = group.config, group.signature
    crashing = _crashing(ctx, group)
    examples = [o for o in map(ctx.outcome_of, group.effects) if o is not None]
    example = min(examples, key=lambda o: (not o.error_message, o.model)) if examples else None
    seen = ctx.timeline.seen(config, sig)
    error_type = (example.error_type if example else None) or seen.error_type or sig.split(":", 1)[0]
    frame = (example.torch_frame if example else None) or seen.torch_frame
    cc, labels = _audience(ctx, sig, error_type, frame, link)
    found = attribute(ctx.view.culprits.get((config, sig, "new_crash")), ctx.view.cc_removed.get(group.key, frozenset()),
                      ctx.settings.culprit_repo)
    cc = list(dict.fromkeys(cc + found.cc))       # the culprit's people on top of the routing rules
    helps = _helps(ctx.effects(config))
    verdict = ctx.view.verdicts.get((config, sig))          # none: verification was not run
    repro = verdict.verdict if verdict else None
    component = verdict.component if verdict else None
    labels = list(dict.fromkeys(labels + verdict_labels(ctx.settings.dynamic_label, repro)))
    regression = ctx.view.ranges.get((config, sig, "new_crash"))
    body_ctx = ctx.shared(config)
    title = markdown.title(line("title_tracking.txt.j2", config_display=body_ctx["config_display"],
                                crashing=len(crashing), testable=body_ctx["testable"], mode=body_ctx["mode_words"],
                                error=_named(ctx, config, sig, error_type)))
    body_ctx.update(
        key=group.key, marker=markdown.marker(group.key),
        meta=ctx.meta({"kind": "tracking", "config": config, "signature": sig}),
        signature=sig, error_type=error_type, crashing=crashing, gb_id=_gb_id(examples, sig),
        example=_example(example, seen, frame), error=_error(example, seen, error_type), helps=helps,
        observations=observe(ctx, config, sig, [c["model"] for c in crashing]), repro=repro, component=component,
        env=ctx.view.run.environment, cc=cc, regression=regression, culprit=found.section, **seen_fields(ctx, seen),
    )
    material = {"title": title, "sig": sig, "crashing": [(c["model"], c["baseline"], c["status"]) for c in crashing],
                "repro": repro_material(repro), "cc": cc, "component": component_material(component)}
    if found.material:       # only then: the hash of an issue without a commit range stays what it was
        material["culprit"] = list(found.material)
    return TrackingIssue(group=group, title=title, body=render_fitting("issue_tracking.md.j2", body_ctx),
                         labels=labels, models=[c["model"] for c in crashing],
                         hash=BodyHash.of(material, labels, regression))


def _audience(ctx: RunContext, sig: str, error_type: str, frame: str | None,
              link: Link | None) -> tuple[list[str], list[str]]:
    """(cc handles, labels): the routing rules', then the handles a `cc` command added to the issue."""
    routed = route(ctx.settings.rules, sig, error_type, frame)
    # Handles added by the `cc` command are stored as typed ("@alice"); only valid handles are mentioned.
    extra = [h.lstrip("@") for h in (link.cc if link else []) if valid_handle(h)]
    return list(dict.fromkeys(routed.cc + extra)), list(dict.fromkeys(ctx.settings.labels + routed.labels))


def _example(example: Outcome | None, seen: Seen, frame: str | None) -> dict[str, Any]:
    """The one crash the body shows the error of (the history's example when no crash of this run has one)."""
    tb = example.traceback if example and example.traceback else ""
    excerpt = error_parts.traceback_excerpt(tb, TRACEBACK_CHARS)
    return {"model": example.model if example else "", "traceback": tb, "traceback_lines": tb.count("\n") + 1,
            "excerpt": excerpt, "excerpt_lines": excerpt.count("\n") + 1, "torch_frame": frame}


def _error(example: Outcome | None, seen: Seen, error_type: str) -> dict[str, Any]:
    """The example's error taken apart (harness.core.error_parts): its head, user-code frames once, advice."""
    message = (example.error_message if example else None) or seen.example_message or seen.signature
    parts = error_parts.split((example.error_type if example else None) or error_type, message)
    return {"head": parts.head, "explanation": parts.explanation, "frames": parts.frames_text,
            "advice": parts.advice, "advice_lines": parts.advice.count("\n") + 1}


def _crashing(ctx: RunContext, group: Group) -> list[dict[str, Any]]:
    """The crashing models' table rows, by model: where each fails (its innermost user frame), else its error."""
    rows = []
    for e in sorted(group.effects, key=lambda e: e.model):
        o = ctx.outcome_of(e)
        parts = error_parts.split(o.error_type, o.error_message) if o and o.error_message else None
        rows.append({"model": e.model, "stratum": e.stratum, "baseline": e.baseline_graphs,
                     "status": o.status if o else "error", "error_type": o.error_type if o else None,
                     "where": parts.frames[-1].place if parts and parts.frames else None,
                     "message": error_parts.headline(o.error_type, o.error_message) if parts
                     else (o.status if o else "")})
    return rows


def _helps(effects: list[Effect]) -> list[dict[str, Any]]:
    """The models the flag gives fewer graphs, the biggest reduction first."""
    return sorted(({"model": e.model, "baseline": e.baseline_graphs, "flagged": e.config_graphs,
                    "reduction": (e.baseline_graphs or 0) - (e.config_graphs or 0)}
                   for e in effects if e.effect == "reduces_graphs"), key=lambda r: (-r["reduction"], r["model"]))


def _named(ctx: RunContext, config: str, sig: str, error_type: str) -> str:
    """How the title names the crash: its error type, or the signature when the type alone is ambiguous."""
    same_type = {crash_signature(ctx.outcome_of(e), e) for e in ctx.effects(config)
                 if e.effect == "crashes"}
    if sum(1 for s in same_type if s.split(":", 1)[0] == error_type) > 1:
        return sig[:100]
    return error_type
