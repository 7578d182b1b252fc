"""Benchmark (not a test): `zoo check` over all candidates (or a stratified sample) in engine workers.

Prints the coverage table per stratum, the failures by cause, the wall time, the
sum of the items' own build + eager seconds, and their ratio (pool overhead).
Run it niced, in the background, on a shared machine:

    nice .venv/bin/python bench/zoo_check.py --workers 2 [--sample N --seed S] [--json-out FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import zoo  # noqa: E402
from harness.discovery import check  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--sample", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json-out", help="write the zoo check document and per-model results here")
    args = ap.parse_args()
    t0 = time.perf_counter()
    cands = zoo.candidates()
    if args.sample:
        cands = zoo.sample(cands, args.sample, args.seed)
    enum_s = time.perf_counter() - t0
    fps = {}
    for c in cands:
        try:
            fps[c.model] = zoo.fingerprint(c.model)
        except zoo.BuildError:
            pass
    t1 = time.perf_counter()
    results = check.check([c.model for c in cands], fps, conn=None, workers=args.workers,
                          timeout=args.timeout, progress=True)
    wall = time.perf_counter() - t1
    strata = {c.model: c.stratum for c in cands}
    for r in results:
        r["stratum"] = r["stratum"] or strata[r["model"]]
    doc = check.summarize(results)
    items = sum(r["seconds"] for r in results)
    print(f"candidates {doc['candidates']}  ok {doc['ok']}  ({100.0 * doc['ok'] / max(1, doc['candidates']):.1f}%)")
    for s, e in doc["by_stratum"].items():
        if e["candidates"]:
            print(f"  {s:16s} {e['ok']:4d}/{e['candidates']:4d}  {100.0 * e['ok'] / e['candidates']:5.1f}%")
    print(f"text-only fallbacks: {len(doc['text_only'])}")
    for cause, models in check.group_failures(doc["failures"])[:25]:
        print(f"  {len(models):3d} x {cause[:110]}")
    print(f"enumerate+fingerprint {enum_s:.1f}s; check wall {wall:.1f}s with {args.workers} workers; "
          f"items' own build+eager {items:.1f}s; wall/items ratio {wall / max(items, 1e-9):.2f}; "
          f"statuses {dict(Counter(r['status'] for r in results))}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"doc": doc, "results": results, "wall_s": wall}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
