"""Culprit bisection cost (not a test): the planted series of tests/culprit_series.py bisected on a real overlay.

Builds the four-commit series (harmless, planted, C++, harmless) over a slice of the installed torch in a temporary
git repository, makes the overlay of the installed torch, and bisects the range with the real reproducer (a tiny
function compiled with `fullgraph=True`; `--runs` per probe). Prints, as JSON: the overlay's seconds, the search's
probes, reproducer runs and seconds, seconds per run, the bisection as a ratio of one plain reproducer run (the
same script on the installed torch, no overlay), and the load (`uptime`) before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.builds import checkout  # noqa: E402
from bot.ranges import culprit, overlay  # noqa: E402
from bot.settings import CulpritSettings  # noqa: E402
from bot.verify import overlay_run  # noqa: E402
from harness.core.suspects import Crash  # noqa: E402
from harness.engine.script_runner import run_script  # noqa: E402
from tests import culprit_series as series  # noqa: E402


def main() -> None:
    """Run the bisection once and print its cost."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="reproducer runs per probe (at least 3)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="culprit-bench-") as tmp:
        s = series.build(Path(tmp) / "repo", ["harmless1", "planted", "cpp", "harmless2"])
        t0 = time.monotonic()
        root = overlay.make(series.TORCH_DIR, Path(tmp) / "overlay")
        made = time.monotonic() - t0
        t0 = time.monotonic()
        plain = run_script(series.REPRO, sys.executable, 300)
        one_run = time.monotonic() - t0
        steps = culprit.CulpritSteps(commits=lambda g, b: checkout.commits(s.repo, g, b),
                                     file_at=lambda sha, p: checkout.file_at(s.repo, sha, p),
                                     run=overlay_run.runner(series.REPRO, sys.executable, 300))
        found = culprit.find(steps, signature=series.SIGNATURE, good=s.good, bad=s.shas["harmless2"],
                             crash=Crash(), settings=CulpritSettings(runs=args.runs, max_minutes=30),
                             torch_dir=series.TORCH_DIR, work=root, progress=True)
    b = found.bisection
    print(json.dumps({
        "status": found.status, "named_planted": b.culprit == s.shas["planted"], "commits": len(found.commits),
        "overlay_s": round(made, 1), "probes": len(b.probes), "runs": b.runs, "bisection_s": b.seconds,
        "bisection_min": round(b.seconds / 60, 2), "s_per_run": round(b.seconds / max(b.runs, 1), 2),
        "plain_run_s": round(one_run, 2), "plain_run_status": plain.status,
        "bisection_over_one_run": round(b.seconds / one_run, 1),
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
        "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()}, indent=2))


if __name__ == "__main__":
    main()
