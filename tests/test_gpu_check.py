"""bench/gpu_check.sh on the CPU: the device check's own path, for real, on a 3-model sample (issue 32).

The effects part compares the CPU with itself (it must agree on every item); the scaling part runs one worker
count; the inductor part compiles the cheapest model there is (TinyItemModel) without and with the shared cache.
"""
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.compile

ROOT = Path(__file__).resolve().parent.parent


def test_the_device_check_runs_on_the_cpu_and_prints_its_table():
    ran = subprocess.run(
        [str(ROOT / "bench" / "gpu_check.sh"), "--torch", sys.executable, "--device", "cpu", "--sample", "3",
         "--workers", "2", "--scaling", "2", "--scaling-sample", "3", "--inductor", "TinyItemModel",
         "--extra-module", "tests.fault_models", "--timeout", "300"],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert ran.returncode == 0, ran.stderr[-3000:]
    rows = {tuple(part.strip() for part in line.split("  ", 1)): line for line in ran.stdout.splitlines()[2:]}
    text = ran.stdout
    assert text.splitlines()[0].split() == ["part", "measure", "value"], text
    assert "cpu vs cpu agree  9/9 (3 models;" in text or "cpu vs cpu agree" in text and "9/9" in text, text
    assert "differs:" not in text, text
    assert "2 workers" in text and "items/min (9 items" in text, text
    assert "1 models x 3 configs, no cache" in text and "with the shared cache" in text, text
    assert "same results with and without  3/3 items" in text, text
    assert "cache hits (FX graph / AOTAutograd)" in text, text
    assert rows and "wall time on cpu" in text, text
