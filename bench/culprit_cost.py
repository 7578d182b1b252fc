"""Culprit bisection cost on a planted day (not a test): this code against an older checkout's, on the same series.

A day of `--commits` commits over a slice of the installed torch (tests/culprit_series.py) in a temporary git
repository: half of them C++ (a file under aten/ or torch/csrc), interleaved at random (`--seed`), the other half
harmless Python edits, one of which is the planted change. For each of `--placements` positions of the planted
commit (spread over the day), the search runs on real overlays of the installed torch (both builds are it) with a
reproducer run in fresh interpreters, and so does the older code's (`--old DIR`: a checkout of it, e.g. main's
worktree; its search cuts at the first C++ commit). The reproducer is the cheap one of tests/test_culprit_real.py
(it reads the overlay's builtin.py; no torch import), so the counts are exact and the seconds small; `--real`
also runs one placement with the real reproducer (a tiny function compiled with fullgraph=True) for its seconds
per run, and the minutes column is then runs x those seconds. Prints a table and the load (`uptime`) before and
after.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.builds import checkout  # noqa: E402
from bot.pipeline.culprit import run_step  # noqa: E402
from bot.ranges import culprit  # noqa: E402
from bot.settings import CulpritSettings  # noqa: E402
from tests import culprit_series as series  # noqa: E402

PEEK = '''import importlib.util, json, pathlib
pkg = pathlib.Path(importlib.util.find_spec("torch").submodule_search_locations[0])
bad = "abs() of a traced value" in (pkg / "_dynamo/variables/builtin.py").read_text()
print("FLAGSWEEP_RESULT " + json.dumps({"v": 1, "status": "error", "signature": %r} if bad else {"v": 1, "status": "ok"}))
''' % series.SIGNATURE

# The older code's search, run in its own interpreter from its own checkout (its API: find(steps, signature=...)).
OLD = '''import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from bot.builds import checkout
from bot.ranges import culprit
from bot.settings import CulpritSettings
from bot.verify import overlay_run
from harness.core.suspects import Crash
repo, good, bad, script, work, runs = sys.argv[2:8]
steps = culprit.CulpritSteps(commits=lambda g, b: checkout.commits(Path(repo), g, b),
                             file_at=lambda sha, p: checkout.file_at(Path(repo), sha, p),
                             run=overlay_run.runner(open(script).read(), sys.executable, 300))
torch_dir = Path(overlay_run.torch_package())
found = culprit.find(steps, signature=%r, good=good, bad=bad, crash=Crash(),
                     settings=CulpritSettings(runs=int(runs), max_minutes=30), torch_dir=torch_dir, work=Path(work))
b = found.bisection
print(json.dumps({"status": found.status, "culprit": b.culprit if b else None, "probes": len(b.probes) if b else 0,
                  "runs": b.runs if b else 0, "seconds": b.seconds if b else 0.0}))
''' % series.SIGNATURE


def day(repo: Path, commits: int, planted_at: int, seed: int) -> tuple[str, list[str], str]:
    """(good, the day's shas, the planted sha): half C++ at random positions, the planted one at `planted_at` among
    the Python ones."""
    rng = random.Random(seed)
    kinds = ["cpp"] * (commits // 2) + ["py"] * (commits - commits // 2)
    rng.shuffle(kinds)
    pys = [i for i, k in enumerate(kinds) if k == "py"]
    plant = pys[planted_at]
    s = series.build(repo, [])
    shas = []
    for i, kind in enumerate(kinds):
        if kind == "cpp":
            path = repo / ("aten/src/ATen/native" if i % 2 else "torch/csrc/dynamo") / f"k{i}.cpp"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"// kernel change {i}\n")
        elif i == plant:
            path = repo / series.BUILTIN
            path.write_text(path.read_text().replace(series.ANCHOR, series.PLANT, 1))
        else:
            path = repo / "torch/_dynamo/config.py"
            path.write_text(path.read_text() + f"\n# change {i}\n")
        series._git(repo, "add", "-A")
        series._git(repo, "commit", "-q", "-m", series.message(f"change {i}", 3000 + i, ("reviewer1",)),
                    author=f"dev{i}")
        shas.append(series._git(repo, "rev-parse", "HEAD"))
    return s.good, shas, shas[plant]


def new_search(repo: Path, good: str, bad: str, script: str, work: Path, runs: int) -> dict:
    run = run_step(script, sys.executable, 300)
    steps = culprit.CulpritSteps(commits=lambda g, b: checkout.commits(repo, g, b),
                                 file_at=lambda sha, p: checkout.file_at(repo, sha, p),
                                 good=culprit.Build(series.TORCH_DIR, work / "good", run),
                                 bad=culprit.Build(series.TORCH_DIR, work / "bad", run))
    found = culprit.find(steps, culprit.Search(series.SIGNATURE, good, bad),
                         CulpritSettings(runs=runs, max_minutes=30))
    b = found.bisection
    return {"status": found.status, "culprit": b.culprit if b else None, "probes": len(b.probes) if b else 0,
            "runs": b.runs if b else 0, "seconds": b.seconds if b else 0.0}


def old_search(old: Path, repo: Path, good: str, bad: str, script: Path, work: Path, runs: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", OLD, str(old), str(repo), good, bad, str(script), str(work),
                           str(runs)], capture_output=True, text=True, cwd=old)
    if proc.returncode != 0:
        return {"status": "error: " + proc.stderr.strip().splitlines()[-1][:100], "culprit": None, "probes": 0,
                "runs": 0, "seconds": 0.0}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    """Run every placement with both codes and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--placements", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3, help="reproducer runs per probe (at least 3)")
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--old", type=Path, help="a checkout of the older code (e.g. main's worktree)")
    parser.add_argument("--real", action="store_true", help="also time one placement with the real reproducer")
    args = parser.parse_args()
    uptime_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    rows, per_run = [], None
    with tempfile.TemporaryDirectory(prefix="culprit-bench-") as tmp:
        script = Path(tmp) / "peek.py"
        script.write_text(PEEK)
        pythons = args.commits - args.commits // 2
        for n in range(args.placements):
            at = round(n * (pythons - 1) / max(args.placements - 1, 1))
            repo = Path(tmp) / f"repo{n}"
            good, shas, planted = day(repo, args.commits, at, args.seed)
            new = new_search(repo, good, shas[-1], PEEK, Path(tmp) / "overlays", args.runs)
            old = old_search(args.old, repo, good, shas[-1], script, Path(tmp) / "old-overlay", args.runs) \
                if args.old else None
            rows.append((shas.index(planted) + 1, new, old, planted))
        if args.real:
            repo = Path(tmp) / "real"
            good, shas, planted = day(repo, args.commits, pythons // 2, args.seed)
            t0 = time.monotonic()
            real = new_search(repo, good, shas[-1], series.REPRO, Path(tmp) / "overlays", args.runs)
            per_run = (time.monotonic() - t0) / max(real["runs"], 1)
            print(f"real reproducer, planted at {shas.index(planted) + 1}: {real['status']}, named planted: "
                  f"{real['culprit'] == planted}, {real['probes']} probes, {real['runs']} runs, "
                  f"{real['seconds']:.0f} s, {per_run:.1f} s a run")
    _table(rows, per_run, args)
    print(f"load before: {uptime_before}\nload after:  "
          f"{subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


def _table(rows: list, per_run: float | None, args: argparse.Namespace) -> None:
    def cell(r: dict | None, planted: str) -> str:
        if r is None:
            return "-"
        named = "named" if r["culprit"] == planted else ("WRONG" if r["culprit"] else "none")
        minutes = f", {r['runs'] * per_run / 60:.1f} min" if per_run else ""
        return f"{r['status']} {named}: {r['probes']} probes, {r['runs']} runs{minutes}"

    print(f"\n{args.commits} commits (half C++, seed {args.seed}), {args.runs} runs a probe")
    print(f"| planted at | this code | older code |\n| ---: | --- | --- |")
    for at, new, old, planted in rows:
        print(f"| {at} | {cell(new, planted)} | {cell(old, planted)} |")
    for name, i in (("this code", 1), ("older code", 2)):
        done = [r[i] for r in rows if r[i] is not None]
        if done:
            named = sum(1 for r in rows if r[i] and r[i]["culprit"] == r[3])
            wrong = sum(1 for r in rows if r[i] and r[i]["culprit"] and r[i]["culprit"] != r[3])
            print(f"{name}: named the planted commit in {named} of {len(done)}, wrong {wrong}; "
                  f"runs {sum(r['runs'] for r in done)} in all")


if __name__ == "__main__":
    main()
