"""Benchmark: load + diff of the two latest comparable runs in a store of 30 runs x 1,000 models x 5 configs.

Synthetic rows in a real SQLite file (WAL, the current schema), finalized the way
the engine finalizes a sweep. Prints the seconds of each step and the ratio to the
1-second target. Not a test: run it by hand, `nice .venv/bin/python bench/diff_bench.py`.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.report import report  # noqa: E402
from harness.core.diff import diff  # noqa: E402
from harness.core.outcome import Outcome  # noqa: E402
from harness.core.run_environment import RunEnvironment  # noqa: E402
from state import history, runs  # noqa: E402
from state.db import connect  # noqa: E402

SIGS = [f"PendingUnbackedSymbolNotFound: Pending unbacked symbols {{uN}} in {k}" for k in range(20)]


def _outcome(rng: random.Random, model: str, config: str, crash_p: float) -> Outcome:
    if config != "baseline" and rng.random() < crash_p:
        sig = rng.choice(SIGS)
        return Outcome(model=model, config=config, status="error", stratum="decoder_llm", fingerprint=f"fp-{model}",
                       error_type="PendingUnbackedSymbolNotFound", error_message=sig + " " + "x" * 300,
                       signature=sig, torch_frame="torch/_dynamo/output_graph.py:compile_and_call_fx_graph",
                       traceback="Traceback (most recent call last):\n" + "  File ...\n" * 40, graphs=1)
    graphs = rng.randint(1, 6)
    return Outcome(model=model, config=config, status="ok", stratum="decoder_llm", fingerprint=f"fp-{model}",
                   graphs=graphs, graph_breaks=graphs - 1, ops=graphs * 40, ops_per_graph=[40] * graphs,
                   break_reasons=["Data-dependent branching"] * (graphs - 1), compile_s=round(rng.uniform(1, 9), 3))


def build(path: Path, n_runs: int, n_models: int, configs: list[str]) -> None:
    """Fill a store with synthetic runs (one transaction per run, as fast as SQLite allows)."""
    conn = connect(path)
    rng = random.Random(0)
    models = [f"Model{i:04d}ForCausalLM" for i in range(n_models)]
    env = RunEnvironment(torch_version="2.13.0", device="cpu", recipe_fingerprint="r")
    for r in range(n_runs):
        rid = runs.create_run(conn, environment=env, models=models, configs={c: {} for c in configs}, kind="nightly",
                              nightly=f"2026-10-{r + 1:02d}")
        rows = []
        for m in models:
            for c in configs:
                o = _outcome(rng, m, c, 0.05 + 0.002 * r)
                rows.append((rid, o.model, o.config, o.status, o.graphs, o.signature, o.fingerprint,
                             json.dumps(o.to_dict()), runs.now()))
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO outcomes (run_id, model, config, status, graphs, signature, fingerprint, data,"
                         " recorded_at) VALUES (?,?,?,?,?,?,?,?,?)", rows)
        conn.execute("COMMIT")
        runs.finish_run(conn, rid)
        history.finalize_run(conn, rid)
    conn.close()


def main() -> int:
    """Build the store, then time load + diff."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--models", type=int, default=1000)
    ap.add_argument("--configs", type=int, default=5, help="configs per run, baseline included")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    configs = ["baseline"] + [f"flag{i}" for i in range(args.configs - 1)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.sqlite"
        t0 = time.perf_counter()
        build(path, args.runs, args.models, configs)
        built = time.perf_counter() - t0
        size_mb = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
        print(f"built {args.runs} runs x {args.models} models x {len(configs)} configs "
              f"({args.runs * args.models * len(configs)} outcomes, {size_mb:.0f} MB) in {built:.1f}s "
              f"({built / args.runs:.2f}s per run incl. finalize_run)")
        best = {}
        for _ in range(args.repeat):
            conn = connect(path)   # a cold connection each time, as the CLI has
            t = {"start": time.perf_counter()}
            pair = history.latest_comparable_pair(conn)
            t["pair"] = time.perf_counter()
            before, after = history.group_outcomes(conn, pair[0]), history.group_outcomes(conn, pair[1])
            be, ae = history.effects(conn, pair[0]), history.effects(conn, pair[1])
            t["load"] = time.perf_counter()
            result = diff(before, after, before_effects=be, after_effects=ae)
            t["diff"] = time.perf_counter()
            steps = {"find pair": t["pair"] - t["start"], "load": t["load"] - t["pair"], "diff": t["diff"] - t["load"],
                     "total": t["diff"] - t["start"]}
            best = {k: min(v, best.get(k, v)) for k, v in steps.items()}
            t1 = time.perf_counter()
            data = report.diff_runs(conn, *pair)
            best["diff_runs (CLI path)"] = min(time.perf_counter() - t1, best.get("diff_runs (CLI path)", 1e9))
            conn.close()
        print(f"pair {pair}: {len(result.transitions)} transitions, {sum(result.counts().values())} counted, "
              f"{len(data['changed_models'])} models changed")
        for k, v in best.items():
            print(f"  {k:22s} {v * 1000:8.1f} ms")
        print(f"load + diff: {best['total']:.3f}s = {best['total'] / 1.0:.2f} x the 1 s target "
              f"({'PASS' if best['total'] < 1.0 else 'FAIL'}); full CLI path {best['diff_runs (CLI path)']:.3f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
