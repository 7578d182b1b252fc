"""Shrinking the real crash: MimiModel under capture_scalar_outputs fails with PendingUnbackedSymbolNotFound on
torch 2.13. The reproducer is built from the zoo's lock entry as a worker stores it, verified, shrunk with a
cap of 4 tries, and the shrunk script is run once more on its own: same signature, fewer parameters.
About six real runs of the script (~5 s each on an idle core, ~40 s in all)."""
from __future__ import annotations

import sys

import pytest

from bot.verify import shrink
from bot.verify.reproducers import render_and_run
from harness.engine.script_runner import run_script

MODEL = "MimiModel"
CSO = {"torch._dynamo.config.capture_scalar_outputs": True}


def stored_build() -> dict:
    """What a worker stores for MimiModel (harness/engine/worker.py _repro_data), read from the lock entry."""
    import transformers

    from harness.zoo.build import SEED, entry, fingerprint

    e = entry(MODEL)
    return {"model": MODEL, "config_class": e["config_class"], "config": e["config"], "spec": e["spec"],
            "seed": SEED, "fingerprint": fingerprint(MODEL),
            "transformers_version": transformers.__version__}


@pytest.mark.compile
def test_the_real_mimi_crash_shrinks_and_still_fails_the_same_way() -> None:
    built = stored_build()
    script, result = render_and_run(built, CSO, "count", "cpu", sys.executable, 300)
    signature = result["signature"]
    assert result["status"] == "error" and signature.startswith("PendingUnbackedSymbolNotFound"), result
    assert result["parameters"] > 0 and result["seconds"] > 0              # the script reports both
    small = shrink.minimise(built, CSO, "count", "cpu", sys.executable, signature, original=(script, result),
                            budget=600, runner=render_and_run, timeout=300, max_tries=4)
    st = small.stats
    assert st["tries"] <= 4 and st["kept"] >= 1, st
    again = run_script(small.script, sys.executable, 300)                 # the embedded script, run on its own
    assert again["status"] == "error" and again["signature"] == signature, again
    assert again["parameters"] < result["parameters"] and again["parameters"] == st["after"]["parameters"]
    assert st["before"]["parameters"] == result["parameters"] and st["rows"]
