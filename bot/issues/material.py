"""The planner's plain data: its inputs and settings, the actions it plans, and the keys and hashes naming issues.

Shared by the planner (bot/issues/planner.py) and the publisher glue; no I/O and no rendering here.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.core.fixes import Night
from bot.issues.routing import Rule
from harness.core.graph_breaks import FlagBreaks, Leverage
from harness.core.outcome import Effect, Outcome
from state.verdicts import Component, Verdict

REF = "[[flagsweep-ref:{key}]]"          # resolved to "#N" at send time (the number may not exist yet)
# The environment fields an issue shows, in this order.
ENV_FIELDS = ("torch_version", "torch_git", "transformers_version", "python_version", "device", "cuda_version",
              "flagsweep_version", "recipe_fingerprint")

@dataclass
class PlanInputs:
    """Everything the planner reads, as plain data (built by bot.issues.inputs)."""

    run: dict[str, Any]                        # id, date, environment, configs, base_settings, options, models
    effects: list[Effect]
    outcomes: list[Outcome]
    transitions: list[dict[str, Any]] = field(default_factory=list)   # harness.core.diff Transition.to_dict() + "flaky"
    previous: dict[str, Any] | None = None     # id, date of the previous comparable run
    signatures: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (config, sig) -> history row
    quiet: dict[tuple[str, str], int] = field(default_factory=dict)  # (config, sig) -> nightlies since last seen
    links: dict[str, dict[str, Any]] = field(default_factory=dict)   # key -> state.links.Link as dict
    # (config, sig) -> the nightlies since it was last seen (oldest first), for open issues awaiting a verified fix
    nights: dict[tuple[str, str], list[Night]] = field(default_factory=dict)
    trend: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # config -> [{date, counts}] oldest first
    # (config, sig) -> the reproducer verdict and the component the verify step stored (none: verification off)
    reproducers: dict[tuple[str, str], Verdict] = field(default_factory=dict)
    components: dict[tuple[str, str], Component] = field(default_factory=dict)
    breaks: dict[str, FlagBreaks] = field(default_factory=dict)      # config -> ids it removes/introduces
    leverage: dict[str, Leverage] = field(default_factory=dict)      # config -> crashes and breaks by models
    # (config, signature, kind) -> the newest regression range (state.ranges.Range.to_dict()), kind new_crash | fixed
    ranges: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)


@dataclass
class PlanSettings:
    verify_nightlies: int = 2    # consecutive nightlies on which every crashing model must compile before a close
    labels: list[str] = field(default_factory=lambda: ["flagsweep"])
    rules: list[Rule] = field(default_factory=list)
    report_url: str | None = None


@dataclass
class Action:
    """One GitHub write the planner wants, with its rendered text."""

    action: str                  # create | edit | comment | close | reopen | labels
    key: str
    number: int | None           # None for create
    kind: str                    # tracking | summary
    title: str | None = None
    body: str | None = None
    labels: list[str] | None = None
    material: str | None = None  # stored with the link once done
    config: str | None = None
    signature: str | None = None
    reason: str = ""

    def payload(self) -> dict[str, Any]:
        """What the outbox stores."""
        return {k: v for k, v in asdict(self).items() if k not in ("action", "key")}


@dataclass
class Plan:
    actions: list[Action]
    notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (key, link fields) store-only updates


def tracking_key(config: str, signature: str) -> str:
    """Stable key of a (config, signature) tracking issue."""
    return "t" + hashlib.sha256(f"{config}\n{signature}".encode()).hexdigest()[:16]


def summary_key(config: str) -> str:
    """Stable key of a config's summary issue."""
    return "s" + hashlib.sha256(config.encode()).hexdigest()[:16]


def material_sha(data: Any) -> str:
    """Hash of what matters in an issue; equal hashes mean nothing to write."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:20]


def config_display(name: str, settings: dict[str, Any]) -> str:
    """`capture_scalar_outputs=True` for a one-flag config, else its name."""
    if len(settings) == 1:
        (key, value), = settings.items()
        return f"{key.rsplit('.', 1)[-1]}={value!r}"
    return name


def break_material(b: FlagBreaks | None) -> Any:
    """What of a config's removed/introduced graph breaks makes a summary worth rewriting."""
    if b is None:
        return None
    return [[(r.gb_id, r.count) for r in rows] for rows in (b.removes, b.introduces)] + [
        [(r.gb_id, r.count, flag) for r, flag in b.hinted_kept]]


def leverage_material(lev: Leverage | None) -> Any:
    """The leverage ranking as plain, comparable data."""
    if lev is None:
        return None
    return [[(s, len(ms)) for s, ms in lev.crashes], [(r.gb_id, r.count) for r in lev.breaks]]


def component_material(record: Component | None) -> Any:
    """What of a crash's component (bot/verify/isolate.py) makes a tracking issue worth rewriting."""
    if record is None:
        return None
    return [record.component, record.backend, [(s.backend, s.result) for s in record.stages]]


def range_material(r: dict[str, Any] | None) -> str:
    """`+sha` of what of a regression range the body shows ("" when none): a range alone rewrites the body,
    and the planner tells it apart from changed results, which alone earn a "what changed" comment."""
    if not r:
        return ""
    return "+" + material_sha([r["status"], r["good"]["date"], r["good"]["git"], r["bad"]["date"], r["bad"]["git"],
                               r["reason"]])


def repro_material(repro: Verdict | None) -> list[Any]:
    """What of a reproducer verdict makes a tracking issue worth rewriting: status, model and, when it was shrunk,
    the parameters and steps kept (none without a shrink: older bodies keep their hash); "skipped" when not run."""
    if repro is None:
        return ["skipped", None]
    stats = repro.shrink.stats if repro.shrink else {}
    shrunk = [stats.get("after", {}).get("parameters"), stats.get("kept")] if stats else []
    return [repro.status, repro.model] + shrunk
