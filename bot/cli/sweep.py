"""`flagsweep sweep`: compile models under a baseline and under flags, store and show the effects.

No torch import at module import time (`flagsweep --help` stays instant); the
engine imports it only in its workers, and config validation only when run.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
from typing import Any

from bot.cli import arguments as types, say
from bot.cli.interrupts import sigterm_as_interrupt
from bot.settings import Settings
from harness.core import defaults
from harness.core.effects import calls_table, effect_table, judged
from harness.core.outcome import skipped
from harness.core.population import POPULATIONS

BACKENDS = ("count", "eager", "aot_eager", "inductor")


def register(sub: argparse._SubParsersAction) -> None:
    """Add `sweep`."""
    p = sub.add_parser("sweep", help="compile models under baseline and flag configs; classify each flag's effect",
                       description="Compile each model once under baseline and once per config, count Dynamo graphs, "
                                   "classify each flag's effect, and store the run (resumable).")
    p.add_argument("--models", metavar="A,B,GLOB", type=types.model_patterns, help="model class names or globs (default: the embedded corpus)")
    p.add_argument("--configs", metavar="A,B", type=types.name_list,
                   help="config names from the catalog (default: all of them), or a named set: all-dynamo, "
                        "all-functorch, all-inductor (every boolean flag flipped, one config each); baseline always runs")
    p.add_argument("--prune", choices=("on", "off"), help="store a flag the baseline never read as no_effect without "
                   "compiling it, and compile the flags it read together first (pooled), alone only where the pool "
                   "differs from the baseline (default: on for the named sets, off for configs named one by one)")
    p.add_argument("--config-file", metavar="FILE", type=types.nonempty("the config file path"), help="TOML file with more named configs ([configs.NAME] tables)")
    p.add_argument("--base-setting", metavar="KEY=VALUE", action="append", default=[],
                   help="apply to every compile, baseline included (repeatable)")
    p.add_argument("--modes", metavar="A,B", type=types.name_list,
                   help="the modes each item runs in, one run each: eval, train, bf16, fp16, train-bf16, dynamic-true, "
                        "dynamic-marked, sdpa, eager-attention or a [modes.NAME] table (default: [sweep] modes, else eval)")
    p.add_argument("--sample", type=types.positive_int, metavar="N", help="a stratified random sample of N of the models")
    p.add_argument("--seed", type=int, default=0, help="seed for --sample (default 0)")
    p.add_argument("--population", choices=POPULATIONS, metavar="all|graph-breaking",
                   help="draw from every model, or only those with more than one graph at baseline (default: settings, else all)")
    p.add_argument("--workers", type=types.count_or_auto, metavar="N", help="worker processes (default: settings, else one per core)")
    p.add_argument("--timeout", type=types.positive_float, metavar="S", help="seconds per item before it is killed (default: settings)")
    p.add_argument("--backend", choices=BACKENDS, help="backend behind the graph counter (default: count only)")
    p.add_argument("--device", type=types.device, help="cpu or cuda[:N] (default: settings)")
    p.add_argument("--python", metavar="PATH", type=types.interpreter, help="run the workers under this interpreter (its own torch)")
    p.add_argument("--resume", nargs="?", const="latest", metavar="RUN",
                   help="continue an interrupted run (default: the latest unfinished one) without redoing finished items")
    p.add_argument("--import", dest="extra_modules", action="append", default=[], metavar="MODULE",
                   help="import MODULE in the sweep and in every worker (registers extra models, e.g. tests.fault_models)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document on stdout and nothing else (the progress bar stays on stderr)")
    p.set_defaults(func=cmd_sweep)


def _fail(msg: str) -> int:
    say.err(f"flagsweep sweep: {msg}")
    return 2


class _Refused(ValueError):
    """A request that cannot run (nothing to resume, no models): said in one line, exit 2, nothing ran."""


def cmd_sweep(args: argparse.Namespace, settings: Settings) -> int:
    """Handler of `flagsweep sweep`."""
    from bot.pipeline import steps
    from harness.engine import configs as cfg
    from harness.engine import devices
    from harness.engine.engine import ResumeError, SweepInterrupted
    from state import db

    settings = _with_arguments(settings, args)
    refused = settings.compile_cache_refusal()     # under --backend inductor (or the setting): before any worker
    if refused:
        return _fail(refused)
    try:
        _import_modules(args.extra_modules)
    except ImportError as exc:
        return _fail(str(exc))
    options = settings.sweep_options(args.python, list(args.extra_modules))
    try:
        modes = settings.sweep_modes(_names(args.modes))
    except ValueError as exc:
        return _fail(str(exc))
    if args.resume and args.modes:
        return _fail("--resume continues a run in its own mode; drop --modes")
    conn = db.connect(settings.state_path)   # first: a store we cannot write fails before any work
    why = devices.unavailable(options.device, options.python)
    if why:   # named as it was given: on this command line, or in the settings file
        given = f"--device {options.device}" if args.device else \
            f"{settings.source or 'settings'}: [sweep] device = {options.device!r}"
        return _fail(f"{given}: {why}")
    try:
        request = _request(conn, args, settings, options)
    except ValueError as exc:   # a config or model that is not there, a bad --resume value, nothing to sweep
        return _fail(str(exc))
    except SweepInterrupted as exc:
        say.err(f"flagsweep sweep: interrupted during the baseline pass (run {exc.run_id}); nothing else ran")
        return 130
    done = []
    for mode in [None] if args.resume else modes:    # one run per mode, each with its own baseline
        each = request if mode is None else dataclasses.replace(
            request, options=dataclasses.replace(request.options, mode=mode))
        try:
            with sigterm_as_interrupt():
                done.append(steps.sweep(conn, each))
        except (ResumeError, cfg.ConfigError) as exc:  # ConfigError: checked in the workers' torch, nothing ran
            return _fail(str(exc))
        except SweepInterrupted as exc:
            say.err("flagsweep sweep: interrupted; finished items are stored. Continue with: "
                    f"flagsweep sweep --resume {exc.run_id}")
            return 130
    _show(conn, done, as_json=args.json)
    return 0


def _names(value: str | None) -> list[str] | None:
    return [n.strip() for n in value.split(",")] if value else None


def _with_arguments(settings: Settings, args: argparse.Namespace) -> Settings:
    """The settings with this command line's overrides of their [sweep] section."""
    s = settings.sweep
    return dataclasses.replace(settings, sweep=dataclasses.replace(
        s, workers=args.workers if args.workers is not None else s.workers,
        timeout=args.timeout if args.timeout is not None else s.timeout,
        backend=args.backend or s.backend, device=args.device or s.device, config_file=args.config_file or s.config_file))


def _import_modules(names: list[str]) -> None:
    """--import: the modules the workers import too (ImportError naming the module)."""
    import importlib

    from harness import PROJECT_ROOT

    # The workers get the project root on PYTHONPATH; the parent resolves the same names.
    if names and str(PROJECT_ROOT) not in sys.path:
        sys.path.append(str(PROJECT_ROOT))
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ImportError(f"--import {name}: {exc}") from None


def _request(conn: Any, args: argparse.Namespace, settings: Settings, options: Any) -> Any:
    """The sweep the arguments ask for: a resume, or models x configs assembled as the nightly's are
    (bot.pipeline.assemble); ValueError (a ConfigError, UnknownModel, _Refused) when there is none to run."""
    from bot.pipeline import assemble, steps
    from harness.engine.engine import SweepRequest

    if args.resume:
        run_id = _resume_id(conn, args.resume)
        if run_id is None:
            raise _Refused("nothing to resume: no unfinished sweep in the store")
        return SweepRequest.resuming(run_id, options)
    chosen = _configs(args, settings, options)
    cands = steps.candidates(args.models or [])
    if not cands:
        raise _Refused("no models selected")
    population = args.population or settings.sweep.population
    request = SweepRequest(models=[], configs=chosen.configs, options=options, base_settings=_base_settings(args),
                           pruning=chosen.pruning, together=chosen.together)
    with sigterm_as_interrupt():
        request = assemble.draw(conn, steps.Steps(), request, cands, population=population, sample=args.sample,
                                seed=args.seed, torch_version=_torch_version(options, population),
                                say=lambda line: say.err(f"flagsweep sweep: {line}"))
    if not request.models:
        raise _Refused(f"no models in the population {population!r}")
    return request


def _configs(args: argparse.Namespace, settings: Settings, options: Any) -> Any:
    """--configs (default: the whole catalog), named sets expanded in the torch under test, and what may be pruned
    (--prune; by default what the named sets flip)."""
    from bot.pipeline import assemble, steps
    from harness.engine import configs as cfg
    from harness.engine.flags import sets as flagsets

    if args.configs:
        names = [n.strip() for n in args.configs.split(",")]
    else:
        names = [n for n in cfg.load_catalog(settings.sweep.config_file) if n != "baseline"]
    flagsets.refuse(names, options.backend)      # in this command's words: the backend is its --backend
    seams = steps.Steps()
    chosen = assemble.configs(seams, settings, names, seams.select_configs(settings, names), python=options.python,
                              prune=None if args.prune is None else args.prune == "on", seed=args.seed)
    named = [n for n in names if n in flagsets.NAMED]
    if named:
        say.err(f"flagsweep sweep: {', '.join(named)}: {len(chosen.flips)} flags")
    return chosen


def _base_settings(args: argparse.Namespace) -> dict[str, Any]:
    from harness.engine import configs as cfg

    return dict(cfg.parse_setting(text) for text in args.base_setting)


def _torch_version(options: Any, population: str) -> str | None:
    """The torch under test's version, which a stored baseline must match (asked only when a population needs it)."""
    from harness.core.run_environment import RunEnvironment
    from harness.engine.engine import collect_environment

    if population == "all":
        return None
    return RunEnvironment.from_dict(collect_environment(options.python, options.device)).torch_version


def _resume_id(conn: Any, value: str) -> int | None:
    from state import runs

    if value != "latest":
        if not value.isdigit():
            raise ValueError(f"--resume takes a run id, got {value!r}")
        return int(value)
    for run in runs.list_runs(conn, kinds=["sweep"], limit=50):
        if run.status in ("running", "interrupted"):
            return run.id
    return None


def summary(run: Any, outcomes: list, effects: list, backend: str) -> dict[str, Any]:
    """The context of templates/sweep_effects.txt.j2: counts and % of testable models per config; where calls were
    judged, the correctness and recompile counts too (and the baseline's own wrong results, folded by cause)."""
    configs, shown = [], judged(effects)
    for name in [c for c in run.configs if c != "baseline"]:
        table, calls = effect_table(effects, name), calls_table(effects, name)
        configs.append({"name": name, "testable": table.testable,
                        "counts": [(r.effect, r.count, r.pct) for r in table.rows if r.count],
                        "calls": [(r.effect, r.count, r.pct) for r in (*calls.correctness, *calls.recompiles)
                                  if r.count] if shown else []})
    statuses = collections.Counter(o.status for o in outcomes)
    return {"run": run, "env": run.environment, "n_models": len(run.models), "configs": configs,
            "mode": run.options.sweep.mode, "items": len(outcomes), "seconds": _seconds(outcomes),
            "skipped": skipped(outcomes),
            "statuses": sorted(statuses.items()), "effects": effects, "backend": backend, "judged": shown,
            "findings": defaults.explain(outcomes, run.configs, defaults.load())}


def _show(conn: Any, done: list, as_json: bool) -> None:
    """Each mode's run: its effects table, or one JSON document (a list of them, one per mode, where several ran)."""
    from bot.text.render import render
    from harness.core.effects import effects_for
    from state import runs

    docs = []
    for run in done:
        outcomes = runs.outcomes(conn, run.id)
        effects = effects_for(outcomes)
        if as_json:
            docs.append({"run": run.to_dict(), "environment": run.environment.to_dict(),
                         "mode": run.options.sweep.mode.to_dict(), "seconds": _seconds(outcomes),
                         "skipped": skipped(outcomes),
                         "outcomes": [o.to_dict() for o in outcomes], "effects": [e.to_dict() for e in effects]})
        else:
            say.out(render("sweep_effects.txt.j2", **summary(run, outcomes, effects, run.options.sweep.backend)),
                    end="")
    if as_json:
        say.json(docs[0] if len(docs) == 1 else {"modes": docs}, indent=1, sort_keys=False)


def _seconds(outcomes: list) -> float:
    """A run's item seconds: each item's build and compile."""
    return round(sum((o.build_s or 0.0) + (o.compile_s or 0.0) for o in outcomes), 3)
