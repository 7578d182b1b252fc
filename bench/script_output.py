"""Benchmark (not a test): what reading a chatty script's output costs the bot (harness.engine.script_runner).

A reproducer may print without end; the runner keeps its stdout whole up to a cap, then only its result lines, and
its stderr's tail. This times one script writing LINES short lines to each pipe, with the resident memory of the
reading process, and prints the seconds per million lines (a tail copied whole per line cost 26 s per million lines at
a1961bb; kept by lines, about 2 s) and that rate at two sizes (about 1: linear). Run it niced on a quiet machine:

    nice .venv/bin/python bench/script_output.py --lines 1000000 3000000
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.engine.script_runner import run_script  # noqa: E402

SCRIPT = "import sys\nfor i in range({n}):\n    sys.stderr.write('x' * 20 + '\\n')\n    sys.stdout.write('y' * 20 + '\\n')\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[1_000_000, 3_000_000])
    args = parser.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}")
    rates = []
    for n in args.lines:
        start = time.perf_counter()
        result = run_script(SCRIPT.format(n=n), timeout=600)
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        rates.append(seconds / (n / 1e6))
        print(f"{n:>10,} lines to each pipe: {seconds:6.1f} s ({rates[-1]:.2f} s per million lines), "
              f"ended {result.status} (no result line), this process's peak {peak} MB")
    if len(rates) > 1:
        print(f"rate at the largest size / the smallest: {rates[-1] / rates[0]:.2f} (about 1: linear)")


if __name__ == "__main__":
    main()
