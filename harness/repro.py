"""Standalone reproducers: a script that rebuilds one tiny model and compiles it under one config.

The script needs only torch and transformers. It embeds the zoo's shrunk config
and input spec as JSON, and inlines the sources of harness/zoo/inputs.py and
harness/signature.py (both kept self-contained for this), so it makes the same
inputs and names errors the same way as the sweep.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

RESULT_PREFIX = "FLAGSWEEP_RESULT "
HERE = Path(__file__).parent


def _module_source(path: Path) -> str:
    """A module's source ready to inline: docstring and `from __future__` dropped."""
    text = path.read_text()
    text = re.sub(r'^""".*?"""\n', "", text, count=1, flags=re.S)
    return re.sub(r"^from __future__ import annotations\n", "", text, flags=re.M).strip() + "\n"


def render_script(model: str, config_settings: dict, base_settings: dict, backend: str = "count",
                  device: str = "cpu") -> str:
    """The reproducer's source text for one model under base settings + one config's settings."""
    import transformers

    from bot.render import render
    from harness import zoo
    from harness.zoo.build import SEED, build, plan

    p = plan(model)
    built = build(model, "cpu")  # the spec after probing (image-token counts) is what the sweep used
    settings = {**base_settings, **config_settings}
    return render(
        "repro_script.py.j2",
        model=model, config_class=p.config_class, settings_json=json.dumps(settings, sort_keys=True),
        settings_text=", ".join(f"{k}={v!r}" for k, v in settings.items()) or "baseline (no settings)",
        backend=backend, device=device, seed=SEED, fingerprint=zoo.fingerprint(model),
        transformers_version=transformers.__version__,
        config_json=_json_literal(built.config or p.config), spec_json=_json_literal(built.spec),
        inputs_source=_module_source(HERE / "zoo" / "inputs.py"),
        signature_source=_module_source(HERE / "signature.py"),
    )


def _json_literal(data: Any) -> str:
    """JSON text safe inside a raw triple-quoted string."""
    return json.dumps(data, sort_keys=True).replace("'''", "\\u0027\\u0027\\u0027")


def run_script(script: str | Path, python: str = sys.executable, timeout: float = 300) -> dict:
    """Run a reproducer (text or path) in a fresh isolated interpreter in an empty dir; its parsed result."""
    text = Path(script).read_text() if isinstance(script, Path) or (len(str(script)) < 4096 and os.path.exists(str(script))) else str(script)
    with tempfile.TemporaryDirectory(prefix="flagsweep-repro-") as tmp:
        path = Path(tmp) / "repro.py"
        path.write_text(text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["HF_HUB_OFFLINE"] = "1"
        try:
            proc = subprocess.run([python, "-I", str(path)], cwd=tmp, capture_output=True, text=True,
                                  timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "graphs": None, "signature": None, "error_type": None, "returncode": None}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX):])
            result["returncode"] = proc.returncode
            return result
    return {"status": "killed", "graphs": None, "signature": None, "error_type": None,
            "returncode": proc.returncode, "stderr_tail": proc.stderr[-2000:]}
