"""Render a standalone reproducer from what a run stored: no model is built, torch is never imported here.

The engine stores, per model of a run, the zoo's build as a `ModelBuild` (config
class, shrunk config, input spec, seed, fingerprint, transformers version:
`state.runs.model_data`). The script embeds that data and the settings as JSON,
and inlines the sources of harness/zoo/inputs.py and harness/core/signature.py (both
kept self-contained for this, read here as text), so it makes the same inputs
and names errors the same way as the sweep.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import harness
from bot.text.render import render
from bot.text.scripts import Code, own_source
from harness.core.model_build import ModelBuild
from harness.core.modes import DEFAULT, Mode

HARNESS = Path(harness.__file__).parent


class NotRenderable(ValueError):
    """The run stored nothing a reproducer can be built from for this model."""


def module_source(path: Path) -> Code:
    """A module of this checkout, its source ready to inline: docstring and `from __future__` dropped."""
    text = path.read_text()
    text = re.sub(r'^""".*?"""\n', "", text, count=1, flags=re.S)
    return own_source(re.sub(r"^from __future__ import annotations\n", "", text, flags=re.M).strip() + "\n")


def render_script(built: ModelBuild | None, settings: dict[str, Any], backend: str = "count",
                  device: str = "cpu", baseline: dict[str, Any] | None = None, mode: Mode = DEFAULT) -> str:
    """The reproducer's source text for one stored model build under `settings` (base + config).

    baseline: the run's baseline settings, for the script's `baseline` mode (None: torch's defaults).
    mode: how the sweep ran the model (harness.core.modes); another than eval inlines harness/engine/in_mode.py,
    the worker's own rules (the train step, autocast, dynamic, the attention implementation), and the script runs
    every check through it; an eval script is the one it was before modes.
    """
    if not built or not built.config_class or not built.model:
        raise NotRenderable("the run stored no build data for this model")
    return render(
        "repro_script.py.j2",
        model=built.model, config_class=built.config_class,
        settings_json=json.dumps(settings, sort_keys=True),
        baseline_json=json.dumps(baseline or {}, sort_keys=True), backend=backend, device=device,
        seed=int(built.seed or 0), fingerprint=built.fingerprint or "",
        transformers_version=built.transformers_version or "",
        config=built.config or {}, spec=built.spec or {},
        inputs_source=module_source(HARNESS / "zoo" / "inputs.py"),
        signature_source=module_source(HARNESS / "core" / "signature.py"),
        mode=None if mode.is_default else mode.to_dict(),
        mode_source=None if mode.is_default else module_source(HARNESS / "engine" / "in_mode.py"),
    )
