"""The nightly pipeline: provider → sweep → finalize → diff → flake confirmation → plan + publish → report.

Each call into another area goes through one small adapter below (`_sweep`,
`_publish`, ...), collected in `Steps` so tests can replace the expensive one.
Idempotent: a nightly already swept with the same configs and models on the same
torch is not swept again unless forced; it still publishes what it has.
"""
from __future__ import annotations

import json
import logging
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from bot import provider
from bot.settings import Settings
from state import runs as runs_mod

log = logging.getLogger(__name__)


class NightlyError(ValueError):
    """A bad request (unknown config or model, bad shard): nothing ran."""


# ---- adapters: the one place each other area's API is called -------------------------------

def _catalog(settings: Settings) -> dict[str, dict]:
    from harness import configs
    return configs.load_catalog(settings.sweep.config_file)


def _select_configs(settings: Settings, names: list[str]) -> dict[str, dict]:
    """{name: settings}, baseline first; ConfigError (a ValueError) for unknown names."""
    from harness import configs
    return configs.select(_catalog(settings), names)


def _resolve_models(patterns: list[str]) -> list[str]:
    """Model class names for globs; the embedded default corpus when none are given."""
    from harness import zoo
    if not patterns:
        from harness.corpus import DEFAULT_CORPUS
        patterns = [getattr(m, "model", m) for m in DEFAULT_CORPUS]
    return [c.model for c in zoo.resolve(list(patterns))]


def _sweep_options(settings: Settings, python: str | None) -> Any:
    from harness.engine import SweepOptions
    s = settings.sweep
    wanted = {"python": python, "workers": s.workers, "timeout": s.timeout, "backend": s.backend,
              "device": s.device, "max_items_per_worker": s.max_items_per_worker, "max_rss_mb": s.max_rss_mb}
    known = getattr(SweepOptions, "__dataclass_fields__", wanted)
    return SweepOptions(**{k: v for k, v in wanted.items() if k in known})


def _sweep(conn: sqlite3.Connection, *, models: list[str], configs: dict[str, dict], base_settings: dict[str, Any],
           settings: Settings, python: str | None, run_id: int | None, resume: bool, nightly: str | None,
           shard: str | None, kind: str = "nightly", progress: bool = True, build: dict | None = None) -> int:
    from harness import engine
    return engine.sweep(conn, models=models, configs=configs, base_settings=base_settings,
                        options=_sweep_options(settings, python), run_id=run_id, resume=resume, kind=kind,
                        nightly=nightly, shard=shard, progress=progress, extra_environment=build)


def _finalize(conn: sqlite3.Connection, run_id: int) -> None:
    from state import history
    history.finalize_run(conn, run_id)


def _diff_with_previous(conn: sqlite3.Connection, run_id: int) -> tuple[int | None, Any]:
    from bot.stored_diff import diff_stored
    from state import history
    prev = history.previous_comparable_run(conn, run_id)
    if prev is None:
        return None, None
    return prev, diff_stored(conn, prev, run_id)


def _confirm(conn: sqlite3.Connection, run_id: int, result: Any, settings: Settings, python: str | None) -> Any:
    if result is None or not result.news() or settings.sweep.confirm_runs <= 0:
        return result
    from bot import flake
    run = runs_mod.get_run(conn, run_id)
    confirmed = flake.confirm(conn, run_id, result.transitions, configs=run.configs,
                              base_settings=run.base_settings, options=_sweep_options(settings, python),
                              runs=settings.sweep.confirm_runs)
    if isinstance(confirmed, list):   # flake may hand back the transitions instead of the result
        result.transitions = confirmed
        return result
    return confirmed or result


def _publish(conn: sqlite3.Connection, settings: Settings, run_id: int, *, dry_run: bool, out_dir: Path,
             progress: bool = False) -> Any:
    from bot import publish
    return publish.publish_run(conn, settings, run_id, dry_run=dry_run, out_dir=str(out_dir), progress=progress)


def _report(conn: sqlite3.Connection, run_id: int, out_dir: Path) -> Path:
    from bot import report
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.html"
    path.write_text(report.render_html(report.build_context(conn, run_id)))
    return path


def _provide(settings: Settings, torch: str, date: str | None, progress: bool) -> provider.Nightly:
    """The torch to sweep, named the way people name builds (provider.parse_spec), ready in its venv.

    `--date D` with `--torch nightly` is the nightly of D. SpecError (bad input) for a
    name that is none of the forms or an interpreter without torch; ProviderError when
    the index is down or has no such build.
    """
    spec = provider.parse_spec(torch)
    if spec.kind == "current":
        return provider.current(settings.sweep.python)
    if spec.kind == "nightly" and date:
        spec = provider.parse_spec(date)
        if spec.kind != "date":
            raise provider.SpecError(f"--date {date!r}: expected YYYY-MM-DD")
    return provider.provide_spec(settings.nightly, spec, progress=progress)


@dataclass
class Steps:
    """The pipeline's calls into other areas; tests swap one (usually `sweep`) for a cheap twin."""

    provide: Callable[[Settings, str, str | None, bool], provider.Nightly] = _provide
    resolve_models: Callable[[list[str]], list[str]] = _resolve_models
    select_configs: Callable[[Settings, list[str]], dict[str, dict]] = _select_configs
    sweep: Callable[..., int] = _sweep
    finalize: Callable[[sqlite3.Connection, int], None] = _finalize
    diff: Callable[[sqlite3.Connection, int], tuple[int | None, Any]] = _diff_with_previous
    confirm: Callable[..., Any] = _confirm
    publish: Callable[..., Any] = _publish
    report: Callable[[sqlite3.Connection, int, Path], Path] = _report


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
    published: Any = None
    dry_run: bool = True
    out_dir: str | None = None
    report: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        d = asdict(self)
        pub = self.published
        d["published"] = pub.to_dict() if hasattr(pub, "to_dict") else (asdict(pub) if hasattr(pub, "__dataclass_fields__") else pub)
        return d


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


def shard_slice(models: list[str], shard: tuple[int, int] | None) -> list[str]:
    """The deterministic slice of `models` for shard (i, N): every N-th name of the sorted list."""
    names = sorted(set(models))
    if shard is None:
        return names
    i, n = shard
    return names[i - 1::n]


def find_existing(conn: sqlite3.Connection, *, nightly: str, shard: str | None, configs: dict[str, dict],
                  models: list[str], torch_version: str) -> runs_mod.Run | None:
    """The latest nightly run of this date, shard, configs, models and torch (any status)."""
    want_configs = json.loads(json.dumps(configs, sort_keys=True))
    for run in runs_mod.list_runs(conn, kinds=["nightly"], limit=200):
        if run.nightly != nightly or run.shard != shard or run.status in ("failed", "merged"):
            continue
        if run.configs == want_configs and sorted(run.models) == sorted(models) \
                and run.environment.get("torch_version") == torch_version:
            return run
    return None


def record_failure(conn: sqlite3.Connection, *, reason: str, nightly: str | None, configs: dict[str, dict],
                   models: list[str], shard: str | None, torch: dict[str, Any] | None = None) -> int:
    """A nightly that could not start (no wheel, install failed) is a failed run with its reason."""
    # The same keys as a swept run's environment, so reports and listings can show a failed run too.
    env = {"torch_version": (torch or {}).get("version"), "torch_git": (torch or {}).get("git"),
           "transformers_version": None, "python_version": None, "device": None, "cuda_version": None,
           "flagsweep_version": None, "recipe_fingerprint": None,
           "torch_index": (torch or {}).get("index"), "torch_channel": (torch or {}).get("channel")}
    run_id = runs_mod.create_run(conn, environment=env, models=models, configs=configs, kind="nightly",
                                 nightly=nightly, shard=shard)
    runs_mod.finish_run(conn, run_id, status="failed", reason=reason)
    return run_id


def run_nightly(conn: sqlite3.Connection, settings: Settings, *, torch: str = "nightly", date: str | None = None,
                configs: list[str] | None = None, models: list[str] | None = None, force: bool = False,
                shard: str | None = None, dry_run: bool | None = None, out_dir: str | Path | None = None,
                progress: bool = True, steps: Steps | None = None) -> NightlyResult:
    """The whole nightly; a provider failure is a failed run in the store, never an exception."""
    steps = steps or Steps()
    provider.parse_spec(torch)       # a build name that is none of the forms: SpecError before anything runs
    dry_run = (not settings.github.has_credentials) if dry_run is None else dry_run
    out = Path(out_dir or settings.issues.dry_run_out)
    shard_t = parse_shard(shard)
    config_names = list(configs if configs is not None else settings.nightly.configs)
    chosen = steps.select_configs(settings, config_names)
    names = shard_slice(steps.resolve_models(list(models if models is not None else settings.nightly.models)), shard_t)
    result = NightlyResult(status="swept", run_id=None, shard=shard, models=len(names), configs=list(chosen),
                           dry_run=dry_run, out_dir=str(out))
    try:
        built = steps.provide(settings, torch, date, progress)
    except provider.ProviderError as exc:
        result.status, result.reason = "failed", str(exc)
        result.nightly = date
        result.run_id = record_failure(conn, reason=str(exc), nightly=date, configs=chosen, models=names, shard=shard,
                                       torch={"index": settings.nightly.index_url, "channel": settings.nightly.channel})
        log.error("nightly failed: %s", exc)
        return result
    result.torch, result.nightly = built.to_dict(), built.date
    existing = find_existing(conn, nightly=built.date, shard=shard, configs=chosen, models=names,
                             torch_version=built.version)
    if existing and existing.status == "finished" and not force:
        result.status, result.run_id = "reused", existing.id
        log.info("nightly %s already swept as run %s: not sweeping again (--force to redo)", built.date, existing.id)
    else:
        resume = bool(existing and existing.status in ("running", "interrupted") and not force)
        result.run_id = steps.sweep(conn, models=names, configs=chosen, base_settings={}, settings=settings,
                                    python=built.python, run_id=existing.id if resume else None, resume=resume,
                                    nightly=built.date, shard=shard, progress=progress, build=built.environment())
    steps.finalize(conn, result.run_id)
    if shard:
        # A shard stops here: `flagsweep merge` joins the shards and publishes once.
        result.status = "shard_done" if result.status == "swept" else result.status
        return result
    return publish_stage(conn, settings, result, python=built.python, steps=steps, out=out)


def publish_stage(conn: sqlite3.Connection, settings: Settings, result: NightlyResult, *, python: str | None,
                  steps: Steps, out: Path) -> NightlyResult:
    """Diff with the previous comparable run, confirm, publish, write the report."""
    prev, diff_result = steps.diff(conn, result.run_id)
    diff_result = steps.confirm(conn, result.run_id, diff_result, settings, python)
    result.previous_run = prev
    if diff_result is not None:
        result.transitions = {k: v for k, v in diff_result.counts().items() if v}
    result.published = steps.publish(conn, settings, result.run_id, dry_run=result.dry_run, out_dir=out)
    result.report = str(steps.report(conn, result.run_id, out))
    return result
