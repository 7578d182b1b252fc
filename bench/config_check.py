"""Benchmark: what checking the configs in the torch under test costs a sweep.

The check is one subprocess of the sweep's interpreter that imports the four
config modules and looks every key up (harness/engine/configs.py). The engine runs it
while its workers start, so what a sweep waits for is the part of it that is
longer than a worker's own start. Prints the seconds of: a bare `import torch`,
the check, a worker start (to `ready`), and the check and the start together
as the engine does them, with the ratios. Not a test: run it by hand,
`nice .venv/bin/python bench/config_check.py [--python PATH] [--repeat N]`.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.engine import configs  # noqa: E402
from harness.core.options import SweepOptions  # noqa: E402
from harness.engine.pool import Pool  # noqa: E402

CONFIGS = {
    "dynamo": {"torch._dynamo.config.capture_scalar_outputs": True},
    "inductor": {"torch._inductor.config.triton.cudagraphs": True, "torch._inductor.config.max_autotune": False},
    "fx": {"torch.fx.experimental._config.soft_pending_unbacked_not_found_error": True},
    "compiler": {"torch.compiler.config.job_id": "bench"},
    "gone": {"torch._dynamo.config.no_such_flag": True},
}


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def worker_start(python: str | None) -> None:
    with Pool(SweepOptions(workers=1, timeout=60, python=python)) as pool:
        pool.environment()    # starts the worker, waits for `ready`, then one round trip


def both(python: str | None) -> None:
    t = threading.Thread(target=worker_start, args=(python,))
    t.start()
    configs.check(CONFIGS, {}, python)
    t.join()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", help="the interpreter under test (default: this one)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    python = args.python or sys.executable
    rows = {
        "import torch": lambda: subprocess.run([python, "-c", "import torch"], check=True),
        "config check": lambda: configs.check(CONFIGS, {}, python),
        "worker start": lambda: worker_start(python),
        "check + start (engine)": lambda: both(python),
    }
    medians = {}
    for name, fn in rows.items():
        times = [timed(fn) for _ in range(args.repeat)]
        medians[name] = statistics.median(times)
        print(f"{name:24s} median {medians[name]:6.2f}s  ({', '.join(f'{t:.2f}' for t in times)})")
    print(f"check / import torch     {medians['config check'] / medians['import torch']:.2f}")
    print(f"(check + start) / start  {medians['check + start (engine)'] / medians['worker start']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
