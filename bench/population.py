"""Population `graph-breaking` vs a full sweep: time, work, and identical effects on the breaking models.

    .venv/bin/python bench/population.py                 # the whole embedded default corpus
    .venv/bin/python bench/population.py --sample 12     # a stratified subset (seed 0) when CPU is short

A: one sweep of every model x (baseline + the nightly's configs).
B: a baseline pass over every model, then the configs only on the models with more than one graph at
baseline, reusing their baseline outcomes (what `--population graph-breaking` does when nothing is stored).
Prints wall times, compiled items and the ratio B/A, and checks that every breaking model's effect under
every config (effect, graphs, signature) is the same in A and in B. Not a test: timings vary with load.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.sweep_common import corpus_models, machine  # noqa: E402
from bot.pipeline import sampling  # noqa: E402
from bot.settings import NightlySettings  # noqa: E402
from harness import zoo  # noqa: E402
from harness.engine.configs import BUILTIN  # noqa: E402
from harness.core.effects import effects_for  # noqa: E402
from harness.engine.engine import SweepOptions, collect_environment, sweep  # noqa: E402
from harness.core.population import GRAPH_BREAKING  # noqa: E402
from state import db, runs  # noqa: E402


def _effects(outcomes: list, models: set[str]) -> dict:
    return {(e.model, e.config): (e.effect, e.baseline_graphs, e.config_graphs, e.config_signature)
            for e in effects_for(outcomes) if e.model in models}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, help="a stratified subset of the default corpus (default: all of it)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=0, help="0: one per core")
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    from harness.zoo.corpus import DEFAULT_CORPUS

    models = corpus_models(args.sample, args.seed) if args.sample else list(DEFAULT_CORPUS)
    configs = {"baseline": {}, **{n: BUILTIN[n] for n in NightlySettings().configs}}
    options = SweepOptions(workers=args.workers, timeout=args.timeout)
    print(f"{len(models)} models x {len(configs)} configs ({', '.join(configs)}), {options.workers or 'auto'} workers")
    with tempfile.TemporaryDirectory() as tmp:
        conn_a = db.connect(Path(tmp) / "a.sqlite")
        t = time.perf_counter()
        run_a = sweep(conn_a, models=models, configs=configs, base_settings={}, options=options, progress=True)
        full_s = time.perf_counter() - t
        outs_a = runs.outcomes(conn_a, run_a)

        conn_b = db.connect(Path(tmp) / "b.sqlite")
        torch_version = collect_environment(None).get("torch_version")
        t = time.perf_counter()
        drawn = sampling.draw(
            conn_b, zoo.resolve(models), population=GRAPH_BREAKING, sample=None, seed=0, base_settings={},
            torch_version=torch_version,
            baseline_pass=lambda ms: sweep(conn_b, models=ms, configs={"baseline": {}}, base_settings={},
                                           options=options, kind="baseline", progress=True))
        pass_s = time.perf_counter() - t
        run_b = sweep(conn_b, models=drawn.models, configs=configs, base_settings={}, options=options,
                      progress=True, prior=drawn.prior, population=drawn.meta) if drawn.models else None
        pop_s = time.perf_counter() - t
        outs_b = runs.outcomes(conn_b, run_b) if run_b else []
    breaking = set(drawn.models)
    same = _effects(outs_a, breaking) == _effects(outs_b, breaking)
    items_a = len(models) * len(configs)
    items_b = len(models) + len(breaking) * (len(configs) - 1)
    print(f"graph-breaking at baseline: {len(breaking)} of {len(models)} models ({100 * len(breaking) / len(models):.0f}%)"
          f" per stratum {drawn.meta['strata'] if drawn.meta else {}}")
    print(f"A full sweep:                 {full_s:8.1f} s  {items_a} compiled items")
    print(f"B baseline pass + breaking:   {pop_s:8.1f} s  {items_b} compiled items (baseline pass {pass_s:.1f} s)")
    print(f"ratio B/A: time {pop_s / full_s:.2f}, items {items_b / items_a:.2f}")
    print(f"effects on the breaking models identical in A and B: {same} ({len(_effects(outs_a, breaking))} pairs)")
    print(f"measured on {machine()}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
