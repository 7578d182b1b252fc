"""Inductor on CPU, with and without the shared compile cache, in one run (issue 32's target: the cache cuts >= 40 %).

N models of the stratified sample x (baseline + the two built-in flags) under --backend inductor, three times:
  no cache  as a sweep with `compile_cache = ""` runs: FX graph and AOTAutograd caches off, each worker in its own
            folder. Inductor's C++ kernels are still found again by their source within a worker, and a model's
            configs all run in one worker: a flag that changes nothing re-traces and re-lowers, but compiles no C++
  fresh     a fresh shared cache (the first night of a build): the baseline misses, a flag that changes nothing
            hits and costs Dynamo's trace
  warm      the same cache again (the next night of the same build): everything hits
Prints one table: wall times, hits per config, compile seconds per config, same results; and the load.
bench/inductor_phases.py splits one compile into its parts. Inductor's C++ compile is CPU-heavy: on a shared
2-core machine use a small N.

Run: .venv/bin/python bench/inductor_cache.py [N_MODELS] [WORKERS]
"""
from __future__ import annotations

import os
import sys

from gpu_check import corpus, inductor_rows, table
from sweep_common import machine

from harness.core.options import SweepOptions


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    models = corpus(n)
    load = os.getloadavg()[0]
    rows = inductor_rows(models, SweepOptions(device="cpu", timeout=1800.0), workers, warm=True)
    print(table(rows))
    print(f"models: {', '.join(models)}; {workers} workers; load average {load:.2f} at the start [{machine()}]")


if __name__ == "__main__":
    main()
