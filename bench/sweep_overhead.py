"""Engine overhead: sweep wall time / the items' own build+compile time measured inside the worker (1 worker).

Target: <= 1.25. Run: .venv/bin/python bench/sweep_overhead.py [N_MODELS]
"""
from __future__ import annotations

import sys

from sweep_common import corpus_models, machine, timed_sweep


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    models = corpus_models(n)
    r = timed_sweep(models, workers=1)
    ratio = r["wall_s"] / r["inside_s"]
    print(f"overhead: {len(models)} models x 3 configs = {r['items']} items ({r['ok']} ok), 1 worker")
    print(f"  wall {r['wall_s']:.1f} s, in-worker build+compile {r['inside_s']:.1f} s")
    print(f"  ratio wall / in-worker = {ratio:.2f} (target <= 1.25) [{machine()}]")


if __name__ == "__main__":
    main()
