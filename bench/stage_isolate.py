"""What component isolation adds to a nightly with one new crash: runs, seconds, ratio to the sweep's time.

    .venv/bin/python bench/stage_isolate.py                    # both nightlies below
    .venv/bin/python bench/stage_isolate.py --backend count    # one of them

inductor: BertModel and GPT2Model swept under `inductor` with a config whose C++ compiler does not exist:
one new crash signature (InvalidCxxCompiler), an Inductor one, so isolation spends its most runs (eager,
aot_eager, inductor). count: the same two and MimiModel swept under `count` with capture_scalar_outputs: one
new crash (PendingUnbackedSymbolNotFound), Dynamo's by construction, no runs. Each nightly is a real sweep in
a temporary store, then the verify step's parts: verify the reproducer (timed, not isolation's cost), isolate
(timed), isolate again as a quiet nightly would (must run nothing: the record is stored with the verdict). Not a test: timings vary with load.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.sweep_common import machine  # noqa: E402
from bot.verify import isolate, reproducers  # noqa: E402
from bot.verify.context import StepContext  # noqa: E402
from bot.verify.steps import VerifySteps, render_and_run  # noqa: E402
from bot.view import run_view  # noqa: E402
from harness.core.tracking import tracking_groups  # noqa: E402
from harness.engine.engine import SweepOptions, SweepRequest, sweep  # noqa: E402
from state import db  # noqa: E402

NIGHTLIES = {
    "inductor": (["BertModel", "GPT2Model"], {"broken_cxx": {"torch._inductor.config.cpp.cxx": ["/nonexistent/c++"]}}),
    "count": (["BertModel", "GPT2Model", "MimiModel"], {"cso": {"torch._dynamo.config.capture_scalar_outputs": True}}),
}


def one_nightly(backend: str) -> dict[str, Any]:
    """Sweep, verify, isolate, isolate again; the numbers."""
    models, configs = NIGHTLIES[backend]
    runs_by: dict[str, list[str]] = {"verify": [], "isolate": [], "quiet": []}
    phase = ["verify"]

    def counting(*args: Any) -> tuple[str, dict[str, Any]]:
        runs_by[phase[0]].append(args[1].backend)
        return render_and_run(*args)

    with tempfile.TemporaryDirectory() as tmp:
        conn = db.connect(Path(tmp) / "bench.sqlite")
        start = time.perf_counter()
        run_id = sweep(conn, SweepRequest(models=models, configs=configs,
                                          options=SweepOptions(workers=1, timeout=900, backend=backend))).run.id
        sweep_s = time.perf_counter() - start
        items = run_view.load_items(conn, run_id)
        groups = tracking_groups(list(items.effects), list(items.outcomes))
        start = time.perf_counter()
        ctx = StepContext.of(conn, items.run, dict(items.builds), seams=VerifySteps(run=counting))
        verdicts = reproducers.verify_all(ctx, groups, items.outcomes)
        verify_s = time.perf_counter() - start
        timings = {}
        for name in ("isolate", "quiet"):
            phase[0] = name
            start = time.perf_counter()
            comps = isolate.isolate_all(ctx, groups, verdicts)
            timings[name] = time.perf_counter() - start
        conn.close()
    return {"backend": backend, "models": len(models), "sweep_s": sweep_s, "new_crashes": len(groups),
            "confirmed": sum(v.status == "confirmed" for v in verdicts.values()), "verify_runs": len(runs_by["verify"]),
            "verify_s": verify_s, "isolate_runs": runs_by["isolate"], "isolate_s": timings["isolate"],
            "quiet_runs": len(runs_by["quiet"]), "components": sorted(c.component for c in comps.values())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=sorted(NIGHTLIES), help="one nightly only (default: both)")
    args = ap.parse_args()
    rows = [one_nightly(b) for b in ([args.backend] if args.backend else ["inductor", "count"])]
    print(f"{'backend':9} {'models':>6} {'sweep s':>8} {'new':>4} {'verify runs/s':>14} {'isolation runs':>15} "
          f"{'isolation s':>11} {'ratio':>7} {'quiet runs':>10}  component")
    for r in rows:
        ratio = r["isolate_s"] / r["sweep_s"] if r["sweep_s"] else float("nan")
        print(f"{r['backend']:9} {r['models']:>6} {r['sweep_s']:>8.1f} {r['new_crashes']:>4} "
              f"{r['verify_runs']:>6}/{r['verify_s']:>6.1f} {len(r['isolate_runs']):>15} {r['isolate_s']:>11.1f} "
              f"{ratio:>7.3f} {r['quiet_runs']:>10}  {', '.join(r['components'])} ({'+'.join(r['isolate_runs']) or 'no runs'})")
    print(f"ratio: isolation seconds / the nightly's sweep seconds. {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
