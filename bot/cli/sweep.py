"""`flagsweep sweep`: compile models under a baseline and under flags, store and show the effects.

No torch import at module import time (`flagsweep --help` stays instant); the
engine imports it only in its workers, and config validation only when run.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sys
from typing import Any

from bot.cli import arguments as types
from bot.cli.interrupts import sigterm_as_interrupt
from bot.settings import Settings
from harness.core.effects import effect_table
from harness.core.population import POPULATIONS

BACKENDS = ("count", "eager", "aot_eager", "inductor")


def register(sub: argparse._SubParsersAction) -> None:
    """Add `sweep`."""
    p = sub.add_parser("sweep", help="compile models under baseline and flag configs; classify each flag's effect",
                       description="Compile each model once under baseline and once per config, count Dynamo graphs, "
                                   "classify each flag's effect, and store the run (resumable).")
    p.add_argument("--models", metavar="A,B,GLOB", type=types.name_list, help="model class names or globs (default: the embedded corpus)")
    p.add_argument("--configs", metavar="A,B", type=types.name_list,
                   help="config names from the catalog (default: all of them), or a named set: all-dynamo, "
                        "all-functorch, all-inductor (every boolean flag flipped, one config each); baseline always runs")
    p.add_argument("--prune", choices=("on", "off"), help="store a flag the baseline never read as no_effect without "
                   "compiling it, and compile the flags it read together first (pooled), alone only where the pool "
                   "differs from the baseline (default: on for the named sets, off for configs named one by one)")
    p.add_argument("--config-file", metavar="FILE", type=types.nonempty("the config file path"), help="TOML file with more named configs ([configs.NAME] tables)")
    p.add_argument("--base-setting", metavar="KEY=VALUE", action="append", default=[],
                   help="apply to every compile, baseline included (repeatable)")
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
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout and nothing else")
    p.set_defaults(func=cmd_sweep)


def _fail(msg: str) -> int:
    print(f"flagsweep sweep: {msg}", file=sys.stderr)
    return 2


def _candidates(args: argparse.Namespace) -> list[Any]:
    """Zoo candidates from --models (or the corpus), resolved (sampling comes after the population is known)."""
    from harness import zoo

    if args.models:
        patterns = [m.strip() for m in args.models.split(",") if m.strip()]
    else:
        from harness.zoo.corpus import DEFAULT_CORPUS

        patterns = list(DEFAULT_CORPUS)
    return zoo.resolve(patterns)


def _draw(conn: Any, args: argparse.Namespace, population: str, cands: list[Any], base: dict[str, Any],
          configs: dict[str, dict], options: Any) -> Any:
    """The population, then the sample: a `bot.pipeline.sampling.Drawn` (a baseline pass runs first when one is needed)."""
    from bot.pipeline import sampling
    from harness.engine.engine import collect_environment, sweep

    torch_version = None
    if population != "all":
        torch_version = collect_environment(options.python, options.device).get("torch_version")

    def baseline_pass(models: list[str]) -> int:
        print(f"flagsweep sweep: baseline pass over {len(models)} models to find the graph-breaking ones",
              file=sys.stderr)
        return sweep(conn, models=models, configs={"baseline": configs.get("baseline", {})}, base_settings=base,
                     options=options, kind="baseline", progress=not args.json)

    return sampling.draw(conn, cands, population=population, sample=args.sample, seed=args.seed, base_settings=base,
                         torch_version=torch_version, baseline_pass=baseline_pass)


def _configs(catalog: dict[str, dict], names: list[str], args: argparse.Namespace, s: Any,
             options: Any) -> tuple[dict[str, dict], Any]:
    """The configs to sweep (named sets expanded in the torch under test) and what may be pruned."""
    from harness.engine import configs as cfg
    from harness.engine.flags import sets as flagsets
    from harness.engine.flags.pruning import Pruning

    names = [n.strip() for n in names]
    named = [n for n in names if n in flagsets.NAMED]
    configs = cfg.select(catalog, [n for n in names if n not in flagsets.NAMED])
    flips = flagsets.expand_named(named, backend=options.backend, python=options.python)
    if named:
        print(f"flagsweep sweep: {', '.join(named)}: {len(flips)} flags", file=sys.stderr)
    configs.update(flips)
    prune = (args.prune or ("on" if named else "off")) == "on"
    prunable = (flips or configs) if prune else {}
    return configs, Pruning(frozenset(prunable), audit=s.prune_audit, seed=args.seed) if prune else None


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


def cmd_sweep(args: argparse.Namespace, settings: Settings) -> int:
    """Handler of `flagsweep sweep`."""
    import importlib

    from harness.engine import configs as cfg
    from harness.engine import devices
    from harness import zoo
    from harness.engine.engine import ResumeError, SweepInterrupted, sweep
    from state import db

    s = settings.sweep
    if args.extra_modules:
        from harness import PROJECT_ROOT

        # The workers get the project root on PYTHONPATH; the parent resolves the same names.
        if str(PROJECT_ROOT) not in sys.path:
            sys.path.append(str(PROJECT_ROOT))
        for name in args.extra_modules:
            try:
                importlib.import_module(name)
            except ImportError as exc:
                return _fail(f"--import {name}: {exc}")
    options = dataclasses.replace(
        s.options(args.python, list(args.extra_modules)),
        workers=args.workers if args.workers is not None else s.workers,
        timeout=args.timeout if args.timeout is not None else s.timeout,
        backend=args.backend or s.backend, device=args.device or s.device,
    )
    conn = db.connect(settings.state_path)   # first: a store we cannot write fails before any work
    why = devices.unavailable(options.device, options.python)
    if why:
        return _fail(f"--device {options.device}: {why}")
    run_id = None
    models: list[str] = []
    drawn = None
    configs: dict[str, dict] = {}
    pruning = None
    base: dict[str, Any] = {}
    try:
        if args.resume:
            run_id = _resume_id(conn, args.resume)
            if run_id is None:
                return _fail("nothing to resume: no unfinished sweep in the store")
        else:
            catalog = cfg.load_catalog(args.config_file or s.config_file)
            names = args.configs.split(",") if args.configs else [n for n in catalog if n != "baseline"]
            configs, pruning = _configs(catalog, names, args, s, options)
            base = dict(cfg.parse_setting(text) for text in args.base_setting)
            try:
                cands = _candidates(args)
            except zoo.UnknownModel as exc:  # a user error with close matches (or a missing lock entry)
                return _fail(str(exc))
            if not cands:
                return _fail("no models selected")
            with sigterm_as_interrupt():
                drawn = _draw(conn, args, args.population or s.population, cands, base, configs, options)
            models = drawn.models
            if not models:
                return _fail(f"no models in the population {args.population or s.population!r}")
    except cfg.ConfigError as exc:
        return _fail(str(exc))
    except ValueError as exc:  # a bad --resume value
        return _fail(str(exc))
    except SweepInterrupted as exc:
        print(f"flagsweep sweep: interrupted during the baseline pass (run {exc.run_id}); nothing else ran",
              file=sys.stderr)
        return 130

    try:
        with sigterm_as_interrupt():
            run_id = sweep(conn, models=models, configs=configs, base_settings=base, options=options,
                           run_id=run_id, resume=bool(args.resume), progress=not args.json,
                           prior=drawn.prior if drawn else None, population=drawn.meta if drawn else None,
                           pruning=pruning)
    except (ResumeError, cfg.ConfigError) as exc:  # ConfigError: checked in the workers' torch, nothing ran
        return _fail(str(exc))
    except SweepInterrupted as exc:
        print(f"flagsweep sweep: interrupted; finished items are stored. Continue with: flagsweep sweep --resume {exc.run_id}",
              file=sys.stderr)
        return 130
    _show(conn, run_id, options, as_json=args.json)
    return 0


def summary(run: Any, outcomes: list, effects: list, backend: str) -> dict[str, Any]:
    """The context of templates/sweep_effects.txt.j2: counts and % of testable models per config."""
    configs = []
    for name in [c for c in run.configs if c != "baseline"]:
        table = effect_table(effects, name)
        configs.append({"name": name, "testable": table.testable,
                        "counts": [(r.effect, r.count, r.pct) for r in table.rows if r.count]})
    statuses = collections.Counter(o.status for o in outcomes)
    return {"run": run, "env": run.environment, "n_models": len(run.models), "configs": configs,
            "statuses": sorted(statuses.items()), "effects": effects, "backend": backend}


def _show(conn: Any, run_id: int, options: Any, as_json: bool) -> None:
    from bot.text.render import render
    from harness.core.effects import effects_for
    from state import runs

    run = runs.get_run(conn, run_id)
    outcomes = runs.outcomes(conn, run_id)
    effects = effects_for(outcomes)
    if as_json:
        doc = {"run": run.to_dict(), "environment": run.environment.to_dict(), "outcomes": [o.to_dict() for o in outcomes],
               "effects": [e.to_dict() for e in effects]}
        json.dump(doc, sys.stdout, indent=1, sort_keys=False)
        sys.stdout.write("\n")
        return
    sys.stdout.write(render("sweep_effects.txt.j2", **summary(run, outcomes, effects, run.options.get("backend", options.backend))))
