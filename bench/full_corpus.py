"""Benchmark (not a test): the locked corpus x baseline, capture_scalar_outputs, capture_dynamic_output_shape_ops.

Sweeps all locked ok classes (or a stratified sample) with the engine, stored
in a throwaway store, and prints items per core-minute, the projected wall time
of the whole corpus on a 16-core runner, and where the time goes: worker
start-up and pool overhead, build (from the lock), eager forward, compile.

    nice .venv/bin/python bench/full_corpus.py --sample 150 --workers 2
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sweep_common import machine, timed_sweep  # noqa: E402
from harness import zoo  # noqa: E402
from harness.zoo import lock  # noqa: E402

RUNNER_CORES = 16


def eager_seconds(models: list[str], workers: int) -> float:
    """The summed eager-forward seconds of the models (zoo check's mode: build + one forward)."""
    from harness.engine.engine import SweepOptions, eager_check

    outs = eager_check(models, options=SweepOptions(workers=workers, timeout=600), progress=True)
    return sum(o.compile_s or 0.0 for o in outs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, help="a stratified sample of N locked ok classes (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    current = lock.current()
    ok = [c for c in zoo.candidates() if current.entries[c.model]["status"] == "ok"]
    cands = zoo.sample(ok, args.sample, args.seed) if args.sample else ok
    models = [c.model for c in cands]
    t0 = time.perf_counter()
    res = timed_sweep(models, args.workers)
    wall = time.perf_counter() - t0
    eager = eager_seconds(models, args.workers)
    outs = res["outcomes"]
    core_min = wall * args.workers / 60.0
    rate = res["items"] / core_min
    build = sum(o.build_s or 0.0 for o in outs)
    compile_s = sum(o.compile_s or 0.0 for o in outs)
    overhead = wall * args.workers - build - compile_s
    whole = len(ok) * 3
    print(f"{len(models)} models x 3 configs = {res['items']} items ({res['ok']} ok) in {wall:.1f}s wall, {args.workers} workers")
    print(f"rate: {rate:.2f} items per core-minute; whole corpus ({len(ok)} ok classes, {whole} items) "
          f"projected on {RUNNER_CORES} cores: {whole / rate / RUNNER_CORES:.1f} min")
    total = wall * args.workers
    print(f"core-seconds {total:.0f}: build {build:.0f} ({100 * build / total:.0f}%), compile+run {compile_s:.0f} "
          f"({100 * compile_s / total:.0f}%), start-up + pool overhead {overhead:.0f} ({100 * overhead / total:.0f}%); "
          f"eager forwards alone (separate pass) {eager:.0f}s")
    print(f"slowest items: " + ", ".join(f"{o.model}/{o.config} {(o.build_s or 0) + (o.compile_s or 0):.0f}s"
                                         for o in sorted(outs, key=lambda o: -((o.build_s or 0) + (o.compile_s or 0)))[:5]))
    print(machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
