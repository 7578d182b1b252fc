"""The tracking issue of a wrong result: one per (config, wrong signature) the flag causes, filed like a crash.

The groups are harness.core.tracking's (`wrong_result_groups`); the signature names the scenario and the first
output that differs (harness.core.correctness.wrong_signature). The body says what differs on each model (the
call's detail and metadata differences), the recompiles the later calls made, the accuracy reproducer the verify
step kept (bot/verify/wrong_script.py, judged by oracle.judge_wrong; or why none was), the environment, the history
and the method. Its material (title, signature, the models, cc, the reproducer's verdict once there is one) makes
its body hash; the numbers of each night's detail do not, so a night with the same wrong models rewrites nothing.
"""
from __future__ import annotations

from typing import Any

from bot.issues.context import RunContext, line, render_fitting, seen_fields
from bot.issues.groups import Group, TrackingIssue
from bot.issues.material import BodyHash, repro_material
from bot.issues.routing import route, valid_handle
from bot.text import markdown
from harness.core.correctness import WRONG_RESULT, first_wrong, recompile_reasons, wrong_parts
from harness.core.effects import calls_table
from state.links import Link


def issue(ctx: RunContext, group: Group, link: Link | None) -> TrackingIssue:
    """The tracking issue of a wrong-result `group` (`link`: the issue as known, with any cc a command added)."""
    config, sig = group.config, group.signature
    scenario, output = wrong_parts(sig)
    wrong = _wrong(ctx, group)
    routed = route(ctx.settings.rules, sig, WRONG_RESULT, None)
    extra = [h.lstrip("@") for h in (link.cc if link else []) if valid_handle(h)]
    cc = list(dict.fromkeys(routed.cc + extra))
    labels = list(dict.fromkeys(ctx.settings.labels + routed.labels))
    verdict = ctx.view.verdicts.get((config, sig))          # none: verification was not run
    repro = verdict.verdict if verdict else None
    body_ctx = ctx.shared(config)
    judged = calls_table(ctx.effects(config), config).judged
    title = markdown.title(line("title_wrong_result.txt.j2", config_display=body_ctx["config_display"],
                                wrong=len(wrong), judged=judged, scenario=scenario, output=output,
                                mode=body_ctx["mode_words"]))
    body_ctx.update(key=group.key, marker=markdown.marker(group.key),
                    meta=ctx.meta({"kind": "tracking", "config": config, "signature": sig}),
                    signature=sig, scenario=scenario, output=output, wrong=wrong, judged=judged, repro=repro,
                    wrong_result=True,
                    env=ctx.view.run.environment, cc=cc, **seen_fields(ctx, ctx.timeline.seen(config, sig)))
    material = {"title": title, "sig": sig, "wrong": [r["model"] for r in wrong], "cc": cc,
                **({"repro": repro_material(repro)} if repro else {})}   # unverified: the hash it always had
    return TrackingIssue(group=group, title=title, body=render_fitting("issue_wrong_result.md.j2", body_ctx),
                         labels=labels, models=[r["model"] for r in wrong], hash=BodyHash.of(material, labels))


def _wrong(ctx: RunContext, group: Group) -> list[dict[str, Any]]:
    """The wrong models' rows, by model: what differs, the metadata differences, the later calls' recompiles."""
    rows = []
    for e in sorted(group.effects, key=lambda e: e.model):
        o = ctx.outcome_of(e)
        call = first_wrong(o.calls) if o is not None else None
        rows.append({"model": e.model, "stratum": e.stratum, "detail": call.detail if call else None,
                     "metadata": call.metadata if call else [],
                     "recompiles": recompile_reasons(o.calls) if o is not None else []})
    return rows
