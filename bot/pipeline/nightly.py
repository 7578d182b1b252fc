"""The nightly pipeline: provider → sweep (the engine finalizes) → diff → gate → flake confirmation → ranges → verify
→ culprits (bot/pipeline/culprit.py) → publish → report.

The gate (bot/pipeline/gate.py) judges the environment before anything is filed: a suspect night is stored,
reported and published to its summary issues only (nothing filed or closed, no confirmation, range or verify runs).

Each call into another area is one public function of bot/pipeline/steps.py, collected
in `Steps` so tests can replace the expensive one through its typed seam.
Idempotent: a nightly already swept with the same configs and models on the same
torch is not swept again unless forced; it still publishes what it has.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bot.builds import provider
from bot.pipeline import assemble, gate as gate_mod, sampling
from bot.github.publish import PublishSummary, dry_run_dir, stderr_progress
from bot.settings import Settings
from bot.pipeline.steps import Steps, load_night
from bot.view import run_view
from harness.core.run_environment import RunEnvironment
from harness.engine.engine import SweepRequest
from harness.zoo import UnknownModel
from state import runs as runs_mod

log = logging.getLogger(__name__)


class NightlyError(ValueError):
    """A bad request (unknown config or model, bad shard): nothing ran."""


# ---- the pipeline ----------------------------------------------------------------------------

@dataclass
class NightlyResult:
    """What one `flagsweep nightly` did (printed, or --json)."""

    status: str                           # swept | reused | failed | shard_done
    run_id: int | None
    torch: dict[str, Any] = field(default_factory=dict)
    nightly: str | None = None
    shard: str | None = None
    models: int = 0
    configs: list[str] = field(default_factory=list)
    previous_run: int | None = None
    transitions: dict[str, int] = field(default_factory=dict)
    published: PublishSummary | None = None
    dry_run: bool = True
    out_dir: str | None = None
    report: str | None = None
    reason: str | None = None
    unavailable: dict[str, Any] = field(default_factory=dict)   # configs the swept torch lacks a key of
    ranges: list[dict[str, Any]] = field(default_factory=list)  # regression ranges searched (state.ranges.Range)
    range_cost: dict[str, int] = field(default_factory=dict)    # installs, sweeps, items the search took
    missing_shards: list[str] = field(default_factory=list)     # a merge of only some shards: those it lacks
    gate: dict[str, Any] | None = None    # the environment gate's verdict (state.gates.EnvironmentVerdict), once judged
    verify: dict[str, Any] | None = None  # the verify step's cost (state.verdicts.StepCost), once it ran
    culprits: list[dict[str, Any]] = field(default_factory=list)   # commit ranges (state.culprits.CommitRange)
    mode: str = "eval"                    # the mode this run swept in (harness.core.modes)
    others: list["NightlyResult"] = field(default_factory=list)   # the night's runs of its other modes, in order

    @property
    def each(self) -> list["NightlyResult"]:
        """This mode's result and the other modes', in the order they were swept."""
        return [self, *self.others]

    @property
    def suspect(self) -> bool:
        """The environment gate marked the run environment_suspect: nothing was filed or closed."""
        return bool(self.gate and self.gate["verdict"] == "environment_suspect")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """`i/N` (1-based) → (i, N)."""
    if not text:
        return None
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise NightlyError(f"--shard must be i/N, e.g. 2/4, got {text!r}") from None
    if not (n >= 1 and 1 <= i <= n):
        raise NightlyError(f"--shard {text}: need 1 <= i <= N")
    return i, n


INSTALLED = ("nightly", "date", "version")   # build kinds installed from [nightly] index_url and channel


def device_refusal(settings: Settings, torch: str) -> str | None:
    """Why `[sweep] device` cannot run on the build `torch` names, known before anything is installed: a CUDA
    device with a torch from a CPU channel. None otherwise (an interpreter named, or `current`, is asked by whoever
    can start it: harness.engine.devices)."""
    device, channel = settings.sweep.device, settings.nightly.channel
    if not device.startswith("cuda") or provider.parse_spec(torch).kind not in INSTALLED:
        return None
    if not channel.rsplit("/", 1)[-1].startswith("cpu"):
        return None
    return (f"{settings.source or 'settings'}: [sweep] device = {device!r} with [nightly] channel = {channel!r}: "
            "a torch from a CPU channel has no CUDA (set a CUDA channel, e.g. \"cu128\", or device = \"cpu\")")


def device_missing(settings: Settings, python: str | None) -> str | None:
    """Why `[sweep] device` is missing from the torch at `python`, asked in it and said with the setting named (as
    `sweep` and `zoo check` say it: the nightly has no --device); None when it is there (a CPU is not asked)."""
    from harness.engine import devices
    why = devices.unavailable(settings.sweep.device, python)
    return f"{settings.source or 'settings'}: [sweep] device = {settings.sweep.device!r}: {why}" if why else None


def setting_models(steps: Steps, settings: Settings, name: str, patterns: list[str]) -> list[str]:
    """The class names `[nightly] <name>` (models, canaries) resolves to; NightlyError naming the setting and its
    file when one is not in the zoo lock (the nightly and `serve`'s start-up check say it in the same words)."""
    try:
        return steps.resolve_models(list(patterns))
    except UnknownModel as exc:
        raise NightlyError(f"{settings.source or 'settings'}: [nightly] {name} = {list(patterns)!r}: {exc}") from None


def shard_slice(models: list[str], shard: tuple[int, int] | None) -> list[str]:
    """The deterministic slice of `models` for shard (i, N): every N-th name of the sorted list."""
    names = sorted(set(models))
    if shard is None:
        return names
    i, n = shard
    return names[i - 1::n]


def find_existing(conn: sqlite3.Connection, *, nightly: str, shard: str | None, configs: dict[str, dict],
                  models: list[str], torch_version: str, mode: str = "") -> runs_mod.Run | None:
    """The latest nightly run of this date, shard, configs, models, torch and mode (its key; any status)."""
    want_configs = json.loads(json.dumps(configs, sort_keys=True))
    for run in runs_mod.list_runs(conn, kinds=["nightly"], limit=200):
        if run.nightly != nightly or run.shard != shard or run.status in ("failed", "merged") \
                or run.options.sweep.mode.key != mode:
            continue
        asked = {**run.configs, **{name: u["settings"] for name, u in run.unavailable.items()}}
        if asked == want_configs and sorted(run.models) == sorted(models) \
                and run.environment.torch_version == torch_version:
            return run
    return None


def record_failure(conn: sqlite3.Connection, *, reason: str, nightly: str | None, configs: dict[str, dict],
                   models: list[str], shard: str | None, environment: RunEnvironment) -> int:
    """A nightly that could not start (no wheel, install failed) is a failed run with its reason."""
    run_id = runs_mod.create_run(conn, environment=environment, models=models, configs=configs, kind="nightly",
                                 nightly=nightly, shard=shard)
    runs_mod.finish_run(conn, run_id, status="failed", reason=reason)
    return run_id


def run_nightly(conn: sqlite3.Connection, settings: Settings, *, torch: str = "nightly", date: str | None = None,
                configs: list[str] | None = None, models: list[str] | None = None, force: bool = False,
                shard: str | None = None, dry_run: bool | None = None, out_dir: str | Path | None = None,
                progress: bool = True, steps: Steps | None = None, population: str | None = None,
                modes: list[str] | None = None) -> NightlyResult:
    """The whole nightly; a provider failure is a failed run in the store, never an exception. Each mode (`modes`,
    else `[sweep] modes`) is a run of its own, swept and published in turn on the one installed torch: the result is
    the first mode's, the others' in `others`. A shard sweeps every mode too, a shard run each: `flagsweep merge`
    joins each mode's shards."""
    steps = steps or Steps()
    provider.parse_spec(torch)       # a build name that is none of the forms: SpecError before anything runs
    refused = device_refusal(settings, torch) or settings.compile_cache_refusal()
    if refused:
        raise NightlyError(refused)
    swept_modes = settings.sweep_modes(modes)     # SettingsError (a ValueError) naming an unknown one, before anything
    dry_run = (not settings.github.has_credentials) if dry_run is None else dry_run
    out = dry_run_dir(settings, out_dir, swept_modes[0])
    shard_t = parse_shard(shard)
    config_names = list(configs if configs is not None else settings.nightly.configs)
    chosen = steps.select_configs(settings, config_names)
    wanted = steps.resolve_models(list(models)) if models is not None else \
        setting_models(steps, settings, "models", settings.nightly.models)
    canaries = setting_models(steps, settings, "canaries", settings.nightly.canaries) \
        if settings.nightly.canaries else []
    names = shard_slice(wanted + [c for c in canaries if c not in wanted], shard_t)   # canaries sweep with the night
    canaries = [c for c in canaries if c in names]                                  # this shard's
    result = NightlyResult(status="swept", run_id=None, shard=shard, models=len(names), configs=list(chosen),
                           dry_run=dry_run, out_dir=str(out))
    try:
        built = steps.provide(settings, torch, date, progress)
    except provider.ProviderError as exc:
        result.status, result.reason = "failed", str(exc)
        result.nightly = date
        result.run_id = record_failure(conn, reason=str(exc), nightly=date, configs=chosen, models=names, shard=shard,
                                       environment=RunEnvironment.failed(None, None, settings.nightly.index_url,
                                                                         settings.nightly.channel))
        log.error("nightly failed: %s", exc)
        return result
    missing = device_missing(settings, built.python)    # before any worker, which would name `--device`
    if missing:
        raise NightlyError(missing)
    result.torch, result.nightly = built.to_dict(), built.date
    swept = assemble.configs(steps, settings, config_names, chosen, python=built.python, prune=None,
                             seed=_audit_seed(built.date))
    result.configs = list(swept.configs)
    request = SweepRequest(models=names, configs=swept.configs, options=settings.sweep_options(built.python),
                           kind="nightly", nightly=built.date, shard=shard, progress=progress,
                           build=built.origin(), pruning=swept.pruning, together=swept.together)
    request = assemble.draw(conn, steps, request, [sampling.Pick(n) for n in names], sample=None, seed=0,
                            population=population or settings.sweep.population, torch_version=built.version,
                            say=log.info)
    if request.population is not None:      # a drawn population keeps the canaries: the gate needs them
        request = dataclasses.replace(request, models=request.models + [c for c in canaries if c not in request.models])
        result.models = len(request.models)
    result.mode = swept_modes[0].name
    others = [dataclasses.replace(result, mode=m.name) for m in swept_modes[1:]]
    for mode, each in zip(swept_modes, [result, *others]):     # one run per mode, each with its own baseline
        _night_of_mode(conn, settings, each, dataclasses.replace(
            request, options=dataclasses.replace(request.options, mode=mode)), built=built, force=force, steps=steps,
            out=dry_run_dir(settings, out_dir, mode), progress=progress)
    result.others = others
    return result


def _night_of_mode(conn: sqlite3.Connection, settings: Settings, result: NightlyResult, request: SweepRequest, *,
                   built: provider.Nightly, force: bool, steps: Steps, out: Path, progress: bool) -> NightlyResult:
    """One mode's run of the night: swept (or reused, or resumed), then diffed, verified and published on its own.
    out: where its dry-run issues and report go (another mode than eval: a folder of its own in the night's)."""
    mode = request.options.mode
    existing = find_existing(conn, nightly=built.date, shard=request.shard, configs=request.configs,
                             models=request.models, torch_version=built.version, mode=mode.key)
    if existing and existing.status == "finished" and not force:
        result.status, run = "reused", existing
        log.info("nightly %s already swept as run %s: not sweeping again (--force to redo)", built.date, existing.id)
    else:
        resume = existing.id if existing and existing.status in ("running", "interrupted") and not force else None
        run = steps.sweep(conn, dataclasses.replace(request, resume=resume))
    result.run_id, result.unavailable = run.id, run.unavailable
    result.configs = [c for c in result.configs if c not in result.unavailable]
    result.out_dir = str(out)
    if request.shard:
        # A shard stops here: `flagsweep merge` joins the shards and publishes once.
        result.status = "shard_done" if result.status == "swept" else result.status
        return result
    return publish_stage(conn, settings, result, run, python=built.python, steps=steps, out=out, progress=progress)


def _audit_seed(date: str | None) -> int:
    """The pruning audit's seed for a nightly: its date, so each night traces another sample of pruned pairs."""
    return int("".join(ch for ch in date or "" if ch.isdigit()) or 0)


def publish_stage(conn: sqlite3.Connection, settings: Settings, result: NightlyResult, run: runs_mod.Run, *,
                  python: str | None, steps: Steps, out: Path, progress: bool = True) -> NightlyResult:
    """Diff with the previous comparable run, confirm, search regression ranges, verify reproducers, publish, report.

    One night: `run` as read after its sweep, its previous comparable run found once, the diff computed once (and
    carried, confirmed, into the view), the gate judged once; publish and report read only the view.
    progress: say on stderr what the verify step is doing (a shrink takes minutes; without it the console is silent).
    """
    prev, diff_result = steps.diff(conn, run)
    judged = gate_mod.check(conn, run, prev, settings)
    result.gate, result.previous_run = judged.to_dict(), prev.id if prev else None
    if diff_result is not None:
        result.transitions = {k: v for k, v in diff_result.counts().items() if v}
    if judged.suspect:
        log.error("nightly run %s is environment_suspect: nothing is filed or closed", result.run_id)
        night = run_view.Night(run=run, previous=prev, diff=diff_result, gate=judged)
        return _publish_and_report(conn, settings, result, steps, out, night)
    diff_result = steps.confirm(conn, run.id, diff_result, settings, python)
    found = steps.ranges(conn, run.id, prev.id if prev else None, diff_result, settings, seams=steps.range_steps())
    result.ranges = [r.to_dict() for r in found.ranges]
    result.range_cost = {"installs": found.installs, "sweeps": found.sweeps, "items_swept": found.items_swept}
    if diff_result is not None:
        result.transitions = {k: v for k, v in diff_result.counts().items() if v}
    # stores the verdicts: publishing only reads them
    steps.verify(conn, run.id, settings, progress=stderr_progress(progress, "nightly") if progress else None)
    # after verify: a bisection runs the verified reproducer; publishing reads what it stored
    result.culprits = [c.to_dict() for c in steps.culprits(conn, run.id, settings, dry_run=result.dry_run,
                                                           progress=progress)]
    night = run_view.Night(run=run, previous=prev, diff=diff_result, gate=judged)
    return _publish_and_report(conn, settings, result, steps, out, night, verified=True)


def _publish_and_report(conn: sqlite3.Connection, settings: Settings, result: NightlyResult, steps: Steps,
                        out: Path, night: run_view.Night, verified: bool = False) -> NightlyResult:
    """Publish (the view carries the run's gate: a suspect run files nothing) and write the report.

    verified: the verify step ran tonight (its cost goes into the result)."""
    view = load_night(conn, night, settings)     # read once: the publisher and the report share it
    if verified:
        result.verify = asdict(view.verify_cost) if view.verify_cost else None
    publisher = steps.open_publisher(settings, dry_run=result.dry_run, out_dir=out)
    result.published = steps.publish(conn, settings, view, publisher=publisher, dry_run=result.dry_run, out_dir=out)
    # the report shows the precision as this publish left it
    result.report = str(steps.report(conn, view, out, result.published.after))
    return result
