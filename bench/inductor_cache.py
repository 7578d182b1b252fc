"""Inductor on CPU, with and without the shared compile cache, in one run (target: the cache cuts >= 40 %).

N models of the stratified sample x (baseline + the two built-in flags) under --backend inductor, once with no
shared cache (each worker compiles everything, FX graph and AOTAutograd caches off) and once with a fresh shared
cache; prints both wall times, the ratio and the cache's hits. Inductor's C++ compile is CPU-heavy: on a shared
2-core machine use a small N.

Run: .venv/bin/python bench/inductor_cache.py [N_MODELS] [WORKERS]
"""
from __future__ import annotations

import sys

from gpu_check import corpus, inductor_rows, table
from sweep_common import machine

from harness.engine.options import SweepOptions


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    models = corpus(n)
    rows = inductor_rows(models, SweepOptions(device="cpu", timeout=1800.0), workers)
    print(table(rows))
    print(f"models: {', '.join(models)}; {workers} workers [{machine()}]")


if __name__ == "__main__":
    main()
