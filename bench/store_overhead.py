"""Benchmark: what a sweep's result writes add to its wall time.

Times `record_outcome` (one autocommitted write per finished item, as the engine
does) and `finalize_run` on a real SQLite file in WAL mode, with a reader polling
the store the whole time (a report or `runs show` during the sweep), and prints
the ratio to a realistic per-item time. The per-item time is taken from a real
stored sweep (`--from-state`, the median of build_s + compile_s over its items)
or given with `--item-seconds`. Target: < 2%.
Run: `nice .venv/bin/python bench/store_overhead.py --from-state PATH`.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.core.outcome import Outcome  # noqa: E402
from state import history, runs  # noqa: E402
from state.db import connect  # noqa: E402
from harness.core.run_environment import RunEnvironment


def item_seconds_from(path: str) -> tuple[float, int]:
    """Median per-item seconds (build + compile) over the outcomes of a real stored store."""
    conn = connect(path)
    secs = []
    for (data,) in conn.execute("SELECT data FROM outcomes"):
        o = json.loads(data)
        secs.append((o.get("build_s") or 0) + (o.get("compile_s") or 0))
    conn.close()
    if not secs:
        raise SystemExit(f"{path}: no outcomes to take an item time from")
    return statistics.median(secs), len(secs)


def _outcome(rng: random.Random, i: int, config: str) -> Outcome:
    model = f"Model{i // 5:04d}ForCausalLM"
    if rng.random() < 0.1:
        return Outcome(model=model, config=config, status="error", stratum="decoder_llm", fingerprint="fp",
                       error_type="GuardOnDataDependentSymNode",
                       error_message="Could not guard on data-dependent expression Eq(u0, 0) " + "x" * 1500,
                       signature="GuardOnDataDependentSymNode: Eq(uN, 0)", torch_frame="torch/_dynamo/x.py:f",
                       traceback="Traceback (most recent call last):\n" + "  File \"...\", line 1, in f\n" * 60)
    return Outcome(model=model, config=config, status="ok", stratum="decoder_llm", graphs=3, graph_breaks=2,
                   break_reasons=["Data-dependent branching", "call_function print"], ops=120,
                   ops_per_graph=[40, 40, 40], compile_s=3.2, build_s=0.4, fingerprint="fp")


def main() -> int:
    """Time the writes of one synthetic sweep and print the overhead ratio."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--item-seconds", type=float, default=None, help="realistic seconds per item")
    ap.add_argument("--from-state", metavar="PATH", help="take the per-item time from a real sweep's store")
    args = ap.parse_args()
    if args.from_state:
        item_s, n = item_seconds_from(args.from_state)
        print(f"per-item time from {args.from_state}: median {item_s:.2f}s over {n} items")
    else:
        item_s = args.item_seconds or 1.0
        print(f"per-item time (given): {item_s:.2f}s")
    rng = random.Random(0)
    configs = ["baseline", "a", "b", "c", "d"]
    outcomes = [_outcome(rng, i, configs[i % 5]) for i in range(args.items)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.sqlite"
        conn = connect(path)
        # History in the store already, as after a month of nightlies.
        rid = runs.create_run(conn, environment=RunEnvironment.from_dict({"torch_version": "2.13.0"}),
                              models=sorted({o.model for o in outcomes}), configs={c: {} for c in configs})
        stop = threading.Event()

        def poll() -> None:
            reader = connect(path)
            while not stop.is_set():
                reader.execute("SELECT count(*), sum(status = 'error') FROM outcomes WHERE run_id = ?", (rid,)).fetchone()
                time.sleep(0.01)

        reader = threading.Thread(target=poll)
        reader.start()
        per = []
        for o in outcomes:
            t = time.perf_counter()
            runs.record_outcome(conn, rid, o)
            per.append(time.perf_counter() - t)
        runs.finish_run(conn, rid)
        t = time.perf_counter()
        history.finalize_run(conn, rid)
        fin = time.perf_counter() - t
        stop.set()
        reader.join()
    writes = sum(per)
    sweep_s = item_s * args.items
    per.sort()
    print(f"record_outcome x {args.items}: total {writes:.3f}s, mean {1000 * writes / len(per):.2f} ms, "
          f"p99 {1000 * per[int(0.99 * len(per))]:.2f} ms")
    print(f"finalize_run: {fin:.3f}s")
    ratio = (writes + fin) / sweep_s
    print(f"writes + finalize = {100 * ratio:.3f}% of a {sweep_s:.0f}s sweep "
          f"({'PASS' if ratio < 0.02 else 'FAIL'}: target < 2%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
