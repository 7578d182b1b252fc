"""GitHub requests per nightly, counted at the fake GitHub: a quiet nightly and one with N changed issues.

    .venv/bin/python -m bench.github_calls [--models 10,100,1000] [--changes 1,5,20]

Targets: a nightly with no changes makes zero writes, and its reads do not grow
with the number of models; a nightly with N changed tracking issues makes
writes proportional to N (an edit and a comment each, plus the summary's).
"""
from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

from bot.github import publish
from bot.settings import Settings, VerifySettings
from state import db
from tests.fakegithub import FakeGitHub
from tests.fakegithub import scenario as sc

CSO = "capture_scalar_outputs"


def corpus(n_models: int, n_sigs: int) -> dict:
    """n models; the first 2 * n_sigs crash under CSO, two per signature; every fifth model has fewer graphs."""
    models = {f"Model{i:05d}ForCausalLM": {"baseline": 3} for i in range(n_models)}
    names = sorted(models)
    for i, name in enumerate(names):
        if i < 2 * n_sigs:
            models[name][CSO] = f"Err{i // 2:03d}: crash number {i // 2} in uN"
        elif i % 5 == 0:
            models[name][CSO] = 2
    return models


def measure(n_models: int, changes: int, n_sigs: int) -> dict:
    """Requests of nightly 1 (file), 2 (identical) and 3 (`changes` issues gain a crashing model)."""
    fake = FakeGitHub.start()
    try:
        tmp = Path(tempfile.mkdtemp())
        settings = Settings(state_path=tmp / "s.sqlite", github=fake.settings(), verify=VerifySettings(enabled=False))
        conn = db.connect(settings.state_path)
        base = corpus(n_models, n_sigs)
        out = {"models": n_models, "n_changed": changes}
        third = copy.deepcopy(base)
        quiet_models = [m for m in sorted(third) if CSO not in third[m]]
        for k in range(changes):          # one more model for each of `changes` signatures
            third[quiet_models[k]][CSO] = f"Err{k:03d}: crash number {k} in uN"
        for label, date, results in (("file", "2026-11-20", base), ("quiet", "2026-11-21", base),
                                     ("changed", "2026-11-22", third)):
            run_id = sc.record_nightly(conn, date, results)
            mark = len(fake.requests)
            t0 = time.perf_counter()
            publish.publish_run(conn, settings, run_id, dry_run=False, out_dir=None,
                                publisher=publish.open_publisher(settings, dry_run=False, out_dir=None))
            reqs = fake.requests[mark:]
            out[label] = {"reads": sum(1 for r in reqs if r.method == "GET"),
                          "writes": sum(1 for r in reqs if r.is_write), "seconds": time.perf_counter() - t0}
        return out
    finally:
        fake.stop()


def main(argv: list[str] | None = None) -> int:
    """Print the request counts table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="10,100,1000")
    p.add_argument("--changes", default="1,5,20")
    p.add_argument("--signatures", type=int, default=20, help="tracking issues in the corpus")
    args = p.parse_args(argv)
    rows = []
    for n in [int(x) for x in args.models.split(",")]:
        for c in [int(x) for x in args.changes.split(",")]:
            print(f"bench: {n} models, {c} changed issues", file=sys.stderr, flush=True)
            sigs = min(args.signatures, n // 4)
            rows.append(measure(n, min(c, sigs), sigs))
    print(f"{'models':>7} {'changed':>8} | {'file r/w':>9} | {'quiet r/w':>9} | {'changed r/w':>11} | writes/changed")
    for r in rows:
        f, q, ch = r["file"], r["quiet"], r["changed"]
        print(f"{r['models']:>7} {r['n_changed']:>8} | {f['reads']:>4}/{f['writes']:<4} | {q['reads']:>4}/{q['writes']:<4} |"
              f" {ch['reads']:>5}/{ch['writes']:<5} | {ch['writes'] / max(1, r['n_changed']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
