"""The issue planner (pure): the latest run + its diff + history + known links → GitHub actions with rendered text.

One tracking issue per (config, signature) of a crash the flag causes (effect
`crashes`), one summary issue per config. Each issue's *material* content (title,
signature, crashing models, reproducer verdict, cc, labels) is hashed: when the
hash equals the one stored with the link, nothing is written. Volatile parts
(environment, last seen, the config-wide tables) are refreshed whenever the
issue is rewritten for a material reason, so a quiet nightly writes nothing.

Lifecycle: a bot-closed issue reopens when its signature returns; a
human-closed one is left alone unless the signature went away after the close
and came back (a regression). The bot comments and closes only on a verified
fix (`harness.core.fixes.verdict`): every model that crashed compiles under the flag on
`verify_nightlies` consecutive nightlies; a model left untested is never "fixed".
"""
from __future__ import annotations

import json
from collections import Counter
from typing import Any

from harness.core import fixes
from bot.text import render, markdown
from bot.issues.wording import line, render_fitting, short, when
from bot.issues.material import (ENV_FIELDS, REF, Action, Plan, PlanInputs, PlanSettings, break_material, component_material,
                           config_display, leverage_material, material_sha, range_material, repro_material,
                           summary_key, tracking_key)
from bot.issues.routing import route, valid_handle
from harness.core.effects import effect_table
from harness.core.outcome import Effect, Outcome
from harness.core.tracking import crash_signature, tracking_groups as groups_by_signature


def tracking_groups(effects: list[Effect], outcomes: list[Outcome]) -> dict[str, tuple[str, str, list[Effect]]]:
    """{tracking key: (config, signature, effects)} for every tracking group (harness.core.tracking)."""
    return {tracking_key(c, s): (c, s, effs) for (c, s), effs in groups_by_signature(effects, outcomes).items()}


def _gb_id(examples: list[Outcome], sig: str) -> str | None:
    """The graph-break id a signature is named by ('GB0124: ...'), as the crashing outcomes recorded it."""
    ids = {o.gb_id for o in examples if o.gb_id and sig.startswith(f"{o.gb_id}: ")}
    return min(ids) if ids else None


class _Planner:
    def __init__(self, inputs: PlanInputs, settings: PlanSettings) -> None:
        self.i, self.s = inputs, settings
        self.actions: list[Action] = []
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.out = {(o.model, o.config): o for o in inputs.outcomes}
        self.by_config: dict[str, list[Effect]] = {}
        for e in inputs.effects:
            self.by_config.setdefault(e.config, []).append(e)
        self.date = inputs.run.get("date") or ""
        prev = (inputs.previous or {}).get("date")
        self.prev_text = short(prev) if prev else "the previous run"

    # -- shared context ----------------------------------------------------
    def common(self, config: str) -> dict[str, Any]:
        run = self.i.run
        env = run.get("environment") or {}
        table = effect_table(self.by_config.get(config, []), config)
        strata = Counter(o.stratum or "unknown" for o in self.i.outcomes if o.config == "baseline")
        configs = run.get("configs") or {}
        return {
            "config": config, "config_display": config_display(config, configs.get(config, {})),
            "environment": [(k, env[k]) for k in ENV_FIELDS if env.get(k)],
            "n_models": len(run.get("models") or strata), "strata": sorted(strata.items()),
            "configs": [(n, json.dumps(v, sort_keys=True)) for n, v in sorted(configs.items())],
            "backend": (run.get("options") or {}).get("backend", "count"),
            "device": (run.get("options") or {}).get("device", "cpu"),
            "effects_table": table.rows, "testable": table.testable, "report_url": self.s.report_url,
            "begin": markdown.BEGIN, "end": markdown.END, "date": self.date, "date_text": when(self.date),
            "population": (run.get("options") or {}).get("population"),
            "unavailable": sorted((n, u.get("missing") or []) for n, u in (run.get("unavailable") or {}).items()),
        }

    def news(self, config: str, signature: str) -> tuple[list[str], list[str]]:
        """(models newly crashing with it, models no longer crashing with it) per the believed diff."""
        new, gone = set(), set()
        for t in self.i.transitions:
            if t["config"] != config or t.get("flaky"):
                continue
            before, after = t.get("before") or {}, t.get("after") or {}
            if after.get("signature") == signature and before.get("signature") != signature and after.get("effect") == "crashes":
                new.add(t["model"])
            if before.get("signature") == signature and after.get("signature") != signature:
                gone.add(t["model"])
        return sorted(new), sorted(gone)

    def comment_marker(self, key: str, what: str) -> str:
        return f"<!-- flagsweep:comment={key}/{self.i.run.get('id')}/{what} -->"

    # -- tracking issues ---------------------------------------------------
    def tracking(self) -> dict[str, tuple[str, str, list[str]]]:
        active_keys: dict[str, tuple[str, str, list[str]]] = {}
        for key, (config, sig, effs) in tracking_groups(self.i.effects, self.i.outcomes).items():
            active_keys[key] = (config, sig, [e.model for e in effs])
            self.active(config, sig, key, effs)
        for key, link in sorted(self.i.links.items()):
            if link["kind"] == "tracking" and key not in active_keys and link.get("config") in self.by_config:
                self.inactive(key, link)
        return active_keys

    def active(self, config: str, sig: str, key: str, effs: list[Effect]) -> None:
        link = self.i.links.get(key)
        ctx = self.common(config)
        crashing = []
        for e in sorted(effs, key=lambda e: e.model):
            o = self.out.get((e.model, e.config))
            crashing.append({"model": e.model, "stratum": e.stratum, "baseline": e.baseline_graphs,
                             "status": o.status if o else "error", "error_type": o.error_type if o else None,
                             "message": (o.error_message if o else None) or (o.status if o else "")})
        examples = [self.out.get((e.model, config)) for e in effs]
        examples = [o for o in examples if o is not None]
        example = min(examples, key=lambda o: (not o.error_message, o.model)) if examples else None
        hist = self.i.signatures.get((config, sig), {})
        error_type = (example.error_type if example else None) or hist.get("error_type") or sig.split(":", 1)[0]
        frame = (example.torch_frame if example else None) or hist.get("torch_frame")
        routed = route(self.s.rules, sig, error_type, frame)
        # Handles added by the `cc` command are stored as typed ("@alice"); only valid handles are mentioned.
        extra = [h.lstrip("@") for h in (link or {}).get("cc") or [] if valid_handle(h)]
        cc = list(dict.fromkeys(routed.cc + extra))
        labels = list(dict.fromkeys(self.s.labels + routed.labels))
        helps = sorted(({"model": e.model, "baseline": e.baseline_graphs, "flagged": e.config_graphs,
                         "reduction": (e.baseline_graphs or 0) - (e.config_graphs or 0)}
                        for e in self.by_config.get(config, []) if e.effect == "reduces_graphs"),
                       key=lambda r: (-r["reduction"], r["model"]))
        crash_models = {c["model"] for c in crashing}
        overlap = Counter(e.config for c, effs2 in self.by_config.items() if c != config for e in effs2
                          if e.effect == "crashes" and e.model in crash_models)
        all_crashes = sum(1 for e in self.by_config.get(config, []) if e.effect == "crashes")
        repro = self.i.reproducers.get((config, sig))      # None: verification was not run
        component = self.i.components.get((config, sig))
        same_type = {crash_signature(self.out.get((e.model, e.config)), e) for e in self.by_config.get(config, [])
                     if e.effect == "crashes"}
        named = error_type
        if sum(1 for s in same_type if s.split(":", 1)[0] == error_type) > 1:
            named = sig[:100]
        title = markdown.title(line("title_tracking.txt.j2", config_display=ctx["config_display"], crashing=len(crashing),
                                 testable=ctx["testable"], error=named))
        tb = example.traceback if example and example.traceback else ""
        ctx.update(
            key=key, marker=markdown.marker(key), meta=markdown.meta_marker({"kind": "tracking", "config": config, "signature": sig}),
            signature=sig, error_type=error_type, crashing=crashing, gb_id=_gb_id(examples, sig),
            example={"model": example.model if example else "", "message": (example.error_message if example else None)
                     or hist.get("example_message") or sig, "traceback": tb,
                     "traceback_lines": tb.count("\n") + 1, "torch_frame": frame},
            helps=helps, overlap=sorted(overlap.items()), repro=repro, component=component,
            first_seen=short(hist.get("first_seen") or self.date), last_seen=short(hist.get("last_seen") or self.date),
            first_seen_text=when(hist.get("first_seen") or self.date), last_seen_text=when(hist.get("last_seen") or self.date),
            nightlies_seen=hist.get("nightlies_seen") or 1,
            ratio=f"{all_crashes} : {len(helps)} (this signature: {len(crashing)})", cc=cc,
            regression=self.i.ranges.get((config, sig, "new_crash")),
        )
        body = render_fitting("issue_tracking.md.j2", ctx)
        material = material_sha({"title": title, "sig": sig, "crashing": [(c["model"], c["baseline"], c["status"])
                                 for c in crashing], "repro": repro_material(repro), "cc": cc,
                                 "component": component_material(component)})
        results_material = material
        material += range_material(ctx["regression"])
        labels_sha = material_sha(sorted(labels))
        base = dict(key=key, kind="tracking", config=config, signature=sig)
        if link is None:
            self.actions.append(Action("create", title=title, body=body, labels=labels, number=None,
                                       material=f"{material}.{labels_sha}", reason="new signature", **base))
            return
        number = link["number"]
        if link.get("muted"):
            return
        old_material, _, old_labels = (link.get("body_sha") or "").partition(".")
        state, closed_by = link.get("state"), link.get("closed_by")
        new, gone = self.news(config, sig)
        if state == "closed":
            if closed_by == "human":
                return                     # a person closed it while it still crashes: do not fight them
            regression = closed_by == "human-fixed"
            self.actions.append(Action("reopen", number=number, reason="signature is back", **base))
            self.actions.append(Action("comment", number=number, reason="reopen", body=render.render(
                "comment_reopen.md.j2", comment_marker=self.comment_marker(key, "reopen"), date_text=when(self.date),
                count=len(crashing), models=[c["model"] for c in crashing], regression=regression), **base))
            old_material = ""              # refresh the body whatever it was
        if old_material != material:
            self.actions.append(Action("edit", number=number, title=title, body=body,
                                       material=f"{material}.{labels_sha}", reason="results changed", **base))
            if state != "closed" and (new or gone) and old_material.split("+")[0] != results_material:
                self.actions.append(Action("comment", number=number, reason="what changed", body=self.changes(
                    key, new, gone, [], quiet=False), **base))
        if old_labels != labels_sha:
            self.actions.append(Action("labels", number=number, labels=labels, material=f"{material}.{labels_sha}",
                                       reason="routing labels changed", **base))

    def inactive(self, key: str, link: dict[str, Any]) -> None:
        config, sig = link.get("config") or "", link.get("signature") or ""
        quiet = self.i.quiet.get((config, sig), 0)
        base = dict(key=key, kind="tracking", config=config, signature=sig)
        if link.get("state") == "closed":
            if link.get("closed_by") == "human" and quiet >= 1:
                self.notes.append((key, {"closed_by": "human-fixed"}))
            return
        if link.get("muted"):
            return
        if link.get("quiet_nightlies") != quiet:
            self.notes.append((key, {"quiet_nightlies": quiet}))
        number = link["number"]
        hist = self.i.signatures.get((config, sig), {})
        found = fixes.verdict(sig, list(hist.get("models") or []), self.i.nights.get((config, sig), []),
                              self.s.verify_nightlies, hist.get("last_seen"))
        if found.close:
            self.actions.append(Action("comment", number=number, reason="closing", body=render.render(
                "comment_close.md.j2", comment_marker=self.comment_marker(key, "close"), config=config,
                fixed_in=when(found.fixed_in or self.date), last_failing=short(found.last_failing or "earlier"),
                streak=found.streak, models=list(hist.get("models") or []), quiet=quiet,
                fix_range=self.i.ranges.get((config, sig, "fixed"))), **base))
            self.actions.append(Action("close", number=number, reason=f"verified fixed on {found.streak} nightlies",
                                       **base))
            return
        new, gone = self.news(config, sig)
        if gone:
            self.actions.append(Action("comment", number=number, reason="signature gone", body=self.changes(
                key, [], gone, [], quiet=True, untested=found.untested), **base))

    def changes(self, key: str, new: list[str], fixed: list[str], other: list[tuple[str, list[str]]], *, quiet: bool,
                untested: dict[str, str] | None = None) -> str:
        return render.render("comment_changes.md.j2", comment_marker=self.comment_marker(key, "changes"),
                             date_text=when(self.date), previous_text=self.prev_text, new=new, fixed=fixed, other=other,
                             quiet=quiet, verify_nightlies=self.s.verify_nightlies, untested=sorted((untested or {}).items()),
                             limit=50)

    # -- summary issues ----------------------------------------------------
    def summary(self, config: str, active: dict[str, tuple[str, str, list[str]]]) -> None:
        key = summary_key(config)
        link = self.i.links.get(key)
        ctx = self.common(config)
        effects = self.by_config.get(config, [])
        counts = Counter(e.effect for e in effects)
        rows = [{"model": e.model, "stratum": e.stratum, "effect": e.effect, "baseline": e.baseline_graphs,
                 "flagged": e.config_graphs, "signature": e.config_signature} for e in effects]
        tracking = []
        for tkey, (tconfig, sig, models) in active.items():
            if tconfig == config:
                tracking.append({"ref": REF.format(key=tkey), "key": tkey, "signature": sig, "count": len(models)})
        tracking.sort(key=lambda r: (-r["count"], r["signature"]))
        trend = []
        for point in self.i.trend.get(config, []):
            c = point.get("counts") or {}
            p = {"date": str(point.get("date", ""))[:10], "crashes": c.get("crashes", 0),
                 "reduces": c.get("reduces_graphs", 0)}
            if not trend or (trend[-1]["crashes"], trend[-1]["reduces"]) != (p["crashes"], p["reduces"]):
                trend.append(p)
        if not trend:
            trend = [{"date": self.date[:10], "crashes": counts["crashes"], "reduces": counts["reduces_graphs"]}]
        title = markdown.title(line("title_summary.txt.j2", config_display=ctx["config_display"], crashes=counts["crashes"],
                                 reduces=counts["reduces_graphs"], testable=ctx["testable"]))
        breaks, lev = self.i.breaks.get(config), self.i.leverage.get(config)
        ctx.update(key=key, marker=markdown.marker(key), meta=markdown.meta_marker({"kind": "summary", "config": config}), crashes=counts["crashes"], reduces=counts["reduces_graphs"],
                   rows=rows, tracking=tracking, trend=trend, breaks=breaks, leverage=lev,
                   torch_version=(self.i.run.get("environment") or {}).get("torch_version") or "unknown")
        body = render_fitting("issue_summary.md.j2", ctx)
        material = material_sha({"title": title, "rows": rows, "trend": [(p["crashes"], p["reduces"]) for p in trend],
                                 "tracking": [(r["key"], r["count"]) for r in tracking],
                                 "breaks": break_material(breaks), "leverage": leverage_material(lev)})
        labels = list(self.s.labels)
        base = dict(key=key, kind="summary", config=config, signature=None)
        if link is None:
            self.actions.append(Action("create", number=None, title=title, body=body, labels=labels,
                                       material=f"{material}.{material_sha(sorted(labels))}", reason="new config", **base))
            return
        if link.get("state") == "closed" or link.get("muted"):
            return                          # closed by a person: leave it be
        if (link.get("body_sha") or "").partition(".")[0] != material:
            self.actions.append(Action("edit", number=link["number"], title=title, body=body,
                                       material=f"{material}.{material_sha(sorted(labels))}", reason="results changed", **base))
            other: dict[str, list[str]] = {}
            for t in self.i.transitions:
                if t["config"] == config and not t.get("flaky") and t["transition"] not in ("unchanged", "still_crashing"):
                    other.setdefault(t["transition"].replace("_", " "), []).append(t["model"])
            if other:
                self.actions.append(Action("comment", number=link["number"], reason="what changed", body=self.changes(
                    key, [], [], sorted(other.items()), quiet=False), **base))


def plan(inputs: PlanInputs, settings: PlanSettings) -> Plan:
    """All the actions for one run: tracking issues first (their numbers feed the summaries), then summaries."""
    p = _Planner(inputs, settings)
    active = p.tracking()
    for config in sorted(p.by_config):
        p.summary(config, active)
    return Plan(actions=p.actions, notes=p.notes)
