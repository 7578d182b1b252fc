"""A generated reproducer, run in a fresh interpreter, sees what the engine saw for the same item."""
from __future__ import annotations

import ast
import json

from harness import repro
from harness.engine import SweepOptions, run_items

MODEL = "Qwen2VLForConditionalGeneration"
CONFIG = {"torch._dynamo.config.capture_dynamic_output_shape_ops": True}


def test_reproducer_matches_the_engine_on_a_real_crash():
    engine = run_items([(MODEL, "dyn")], configs={"dyn": CONFIG}, base_settings={},
                       options=SweepOptions(workers=1, timeout=300))[0]
    script = repro.render_script(MODEL, CONFIG, {})
    ast.parse(script)
    assert "import harness" not in script and "from harness" not in script and "flagsweep import" not in script
    result = repro.run_script(script, timeout=300)
    assert result["status"] == ("ok" if engine.status == "ok" else "error"), (engine.status, result)
    assert result["graphs"] == engine.graphs
    assert result["signature"] == engine.signature
    assert result["error_type"] == engine.error_type
    # the item is a real crash under this flag, so the match says something
    assert engine.status == "error" and engine.signature


def test_run_script_reports_a_script_that_dies_without_a_result():
    result = repro.run_script("import sys\nprint('no result line')\nsys.exit(3)\n", timeout=60)
    assert result["status"] == "killed" and result["returncode"] == 3


def test_result_line_is_the_last_stdout_line_and_parses():
    text = "print('noise')\nimport json\nprint('FLAGSWEEP_RESULT ' + json.dumps({'status': 'ok', 'graphs': 2, 'signature': None, 'error_type': None}))\n"
    result = repro.run_script(text, timeout=60)
    assert result == {"status": "ok", "graphs": 2, "signature": None, "error_type": None, "returncode": 0}
    assert json.loads(json.dumps(result))["graphs"] == 2
