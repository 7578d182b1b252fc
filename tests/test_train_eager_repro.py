"""A train crash seen under the `eager` backend: the sweep's worker compiles the backward through AOTAutograd under
every backend (harness.engine.backend), so its reproducers must too (harness.core.modes.Mode.compiles_under)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.core.modes import BUILTIN, DEFAULT

CSO = "capture_scalar_outputs"
STANDIN = Path(__file__).with_name("modes_standin")      # AOTAutograd raises while the flag is on: a train-only bug
PLANTED = "RuntimeError: stand-in build: the backward of a graph with captured scalars"


def test_a_train_step_compiles_as_aot_eager_under_the_counting_and_eager_backends_and_eval_as_it_says() -> None:
    train = BUILTIN["train"]
    assert [train.compiles_under(b) for b in ("count", "eager", "aot_eager", "inductor")] == \
        ["aot_eager", "aot_eager", "aot_eager", "inductor"]
    assert [DEFAULT.compiles_under(b) for b in ("count", "eager")] == ["count", "eager"]
    assert BUILTIN["bf16"].compiles_under("eager") == "eager"


@pytest.mark.compile
def test_a_train_crash_under_the_eager_backend_is_filed_with_reproducers_that_fail_as_filed(tmp_path: Path) -> None:
    """A dry-run nightly in train under `[sweep] backend = "eager"` on the stand-in build: the checked reproducer
    fails as filed, the crash is isolated as AOTAutograd's, and the maintainer's script names `aot_eager` and fails
    as filed too (it named `eager`, whose backward nothing compiles, and passed)."""
    from bot.pipeline import nightly
    from bot.settings import (AccuracySettings, ConfirmSettings, IssueSettings, NightlySettings, Settings,
                              SweepSettings, VerifySettings)
    from state import db, runs, verdicts

    python = tmp_path / "python"     # as tests/test_modes_issues.py: reproducers run `python -I`, which drops the
    python.write_text(             # stand-in's PYTHONPATH; the stand-in is the build here, so `-I` becomes `-s`
        '#!/bin/sh\n[ "$1" = "-I" ] && { shift; set -- -s "$@"; }\n'
        f'PYTHONPATH="{STANDIN}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    settings = Settings(state_path=tmp_path / "state.sqlite", nightly=NightlySettings(configs=[CSO], canaries=[]),
                        sweep=SweepSettings(workers=1, modes=["train"], backend="eager"),
                        issues=IssueSettings(min_models=1), confirm=ConfirmSettings(runs=1),
                        verify=VerifySettings(shrink_budget=0), accuracy=AccuracySettings(enabled=False))
    conn = db.connect(settings.state_path)
    result = nightly.run_nightly(conn, settings, torch=str(python), models=["BertModel"], dry_run=True,
                                 out_dir=tmp_path / "out", progress=False)
    outcome = {o.config: o for o in runs.outcomes(conn, result.run_id)}[CSO]
    assert outcome.status == "error" and outcome.signature == PLANTED
    found = verdicts.for_run(conn, result.run_id)[(CSO, PLANTED)].verdict
    assert found.status == "confirmed", found.reason
    assert found.component.component == "aot_autograd", found.component
    assert found.maintainer.backend == "aot_eager" and found.maintainer.status == "confirmed", found.maintainer
    assert 'backend="aot_eager"' in found.maintainer.script and "loss.backward()" in found.maintainer.script
    conn.close()
