"""bench/gpu_check.sh on the CPU: the device check's own path, for real, on the smallest samples that run every part
of its table (issue 32 ran 3 models in each): one model for the effects (agreement is per item, the count only sets
the total), two for the scaling part (a pool starts no more workers than models, so two keep both workers busy). The
models are the cheapest test models, named: on the CPU the effects compare the CPU with itself and the scaling part
counts items per minute, whatever the models (three corpus models, sampled, made those parts half of this test).

The effects part compares the CPU with itself (it must agree on every item); the scaling part runs one worker
count; the inductor part compiles the cheapest model there is (TinyItemModel) without and with the shared cache. The
modes part, alone, trains the planted modes model in bfloat16 under inductor (tests/mode_models.py).
"""
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.compile

ROOT = Path(__file__).resolve().parent.parent


def test_the_device_check_runs_on_the_cpu_and_prints_its_table():
    ran = subprocess.run(
        [str(ROOT / "bench" / "gpu_check.sh"), "--torch", sys.executable, "--device", "cpu",
         "--sample", "TinyItemModel", "--workers", "2", "--scaling", "2",
         "--scaling-sample", "TinyItemModel,TinyDynamicOutputModel", "--inductor", "TinyItemModel",
         "--extra-module", "tests.fault_models", "--modes", "", "--timeout", "300"],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert ran.returncode == 0, ran.stderr[-3000:]
    text = ran.stdout
    rows = {(part, measure): value for part, measure, value in
            (re.split(r"\s{2,}", line, maxsplit=2) for line in text.splitlines()[2:])}
    assert text.splitlines()[0].split() == ["part", "measure", "value"], text
    # 1 corpus model x 2 flags, the CPU against itself: every effect agrees, no difference is listed.
    assert rows["effects", "cpu vs cpu agree"].startswith("2/2 (1 models;"), text
    assert not any(measure.startswith("differs:") for _, measure in rows), text
    assert "items/min (6 items" in rows["scaling", "2 workers"], text
    assert rows["inductor", "1 models x 3 configs, no cache"].endswith(" s"), text
    assert rows["inductor", "same results with and without"] == "3/3 items", text
    # Without a root the caches are off: no lookup at all, for any config (tests/test_gpu_pool.py has the root's hits).
    per_config = [value for (_, measure), value in rows.items() if measure.endswith(": compile s, FX hits, AOT hits")]
    assert len(per_config) == 3 and all(re.match(r"no cache \d+ s, 0/0, 0/0; fresh ", v) for v in per_config), text
    # The flag that changes nothing (capture_dynamic_output_shape_ops) hit the baseline's graphs in the cache.
    fx_hits = int(rows["inductor", "cache hits (FX graph / AOTAutograd)"].split("/")[0])
    assert fx_hits >= 2, text
    assert ("memory", "peak per item on cpu (MiB)") in rows and ("total", "wall time on cpu") in rows, text
    assert not any(part == "modes" for part, _ in rows), text   # --modes "": the part has no row


def test_the_device_checks_modes_part_trains_in_bfloat16_under_inductor():
    """The modes part alone (the part the GPU nightly's modes are checked by): the planted model trained in bfloat16
    autocast under inductor, each item compiled, its backward too, and judged."""
    from bench.gpu_check import modes_rows
    from harness.core.options import SweepOptions

    base = SweepOptions(device="cpu", timeout=300, extra_modules=["tests.mode_models"])
    (part, measure, value), = modes_rows(["ModePlantedModel"], base, 1, ["train-bf16"])
    assert (part, measure) == ("modes", "train-bf16: 1 models x 3 configs, inductor")
    assert re.match(r"\d+ s \(load ([\d.]+|n/a)\); ok 3; wrong results \d$", value), value
