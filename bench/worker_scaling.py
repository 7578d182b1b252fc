"""Throughput of 2 workers against 1 on the same items (target >= 1.6x on 2 cores).

Run: .venv/bin/python bench/worker_scaling.py [N_MODELS]
"""
from __future__ import annotations

import sys

from sweep_common import corpus_models, machine, timed_sweep


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    models = corpus_models(n)
    one = timed_sweep(models, workers=1)
    two = timed_sweep(models, workers=2)
    print(f"scaling: {len(models)} models x 3 configs = {one['items']} items")
    print(f"  1 worker {one['wall_s']:.1f} s, 2 workers {two['wall_s']:.1f} s")
    print(f"  speedup 2 vs 1 = {one['wall_s'] / two['wall_s']:.2f}x (target >= 1.6) [{machine()}]")


if __name__ == "__main__":
    main()
